"""The archive audit (archiver/audit.py, `tally verify`) on the real broker and store:
a hole punched into the archive is found exactly where it is, archived again from the log
once — even by two repairs at the same moment — and the audit then finds the archive whole.
A round checks only the offsets above each partition's clean mark, and moves the mark no
further than the first hole it found; `tally verify --full` checks every offset."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading

import pytest

from archiver.audit import (
    HELD_BELOW_MARKS,
    MARKS,
    SUMMARY,
    PartitionAudit,
    audit_archive,
    find_holes,
    held_below_parameters,
    marks_still_held,
    read_marks,
    summary_parameters,
    verify,
)
from archiver.rows import ACCOUNTED_OFFSETS, archive_row, insert_rows
from storage.client import connect
from storage.schema import apply_migrations
from storage.tables import SYNTHETIC_PARTITION
from tally.settings import PROJECT_ROOT, Settings
from tests.fixtures.archive import archived
from tests.fixtures.cli import run_tally
from tests.fixtures.events import make_events
from tests.integration.test_archiver import archive_until, produce

pytestmark = pytest.mark.integration

SITE = "audit.example.com"


def punch_hole(settings: Settings, partition: int, start: int, end: int) -> None:
    """Lose archived offsets [start, end) of a partition, as issue 19's lost batch did."""
    connect(settings).command(
        f"DELETE FROM events WHERE kafka_partition = {partition} "
        f"AND kafka_offset >= {start} AND kafka_offset < {end}",
        settings={"mutations_sync": 2},
    )


def by_partition(audits: list[PartitionAudit]) -> dict[int, PartitionAudit]:
    return {audit.partition: audit for audit in audits}


def test_a_hole_in_the_archive_is_found_and_archived_again_once(settings: Settings) -> None:
    events = make_events(SITE, 3_000)
    asyncio.run(produce(settings, [(e.key, e.to_json()) for e in events]))
    asyncio.run(archive_until(settings, SITE, expected=3_000, settle_s=0))
    before = by_partition(verify(settings, fix=False).partitions)
    partition = max(before, key=lambda p: before[p].log_end)
    last = before[partition].archived_last
    assert last is not None and all(audit.holes == [] for audit in before.values())

    punch_hole(settings, partition, last - 500, last - 100)
    assert archived(settings, SITE)[0] < 3_000

    # Two repairs at once (the archiver's own audit and an operator's `tally verify`).
    # Below the clean mark the first verify set: only a full audit looks there.
    reports = []
    repairs = [threading.Thread(target=lambda: reports.append(verify(settings, full=True))) for _ in range(2)]
    for repair in repairs:
        repair.start()
    for repair in repairs:
        repair.join()

    found = [by_partition(report.partitions)[partition] for report in reports]
    # Each found that very hole, or none if the other had already archived it.
    holes_seen = [[(h.start, h.end) for h in audit.holes] for audit in found]
    assert [(last - 500, last - 100)] in holes_seen
    assert all(holes in ([], [(last - 500, last - 100)]) for holes in holes_seen)
    assert archived(settings, SITE) == (3_000, 3_000)
    after = by_partition(verify(settings, fix=False, full=True).partitions)
    assert all(audit.holes == [] and audit.duplicates == 0 for audit in after.values())


def test_verify_says_in_one_line_that_the_stack_is_down(settings: Settings) -> None:
    environment = os.environ | settings.environment() | {"TALLY_KAFKA_BOOTSTRAP": "127.0.0.1:9"}
    result = subprocess.run(
        [sys.executable, "-m", "ops.cli", "verify"],
        cwd=PROJECT_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("tally: ") and "cannot reach Kafka" in line
    assert "Traceback" not in result.stdout + result.stderr


def test_an_insert_retried_after_its_answer_was_lost_lands_once(settings: Settings) -> None:
    """The store restarting mid-insert: the batch landed, the answer did not, the archiver
    sends the same batch again (archiver/consumer.py, _with_retry)."""
    site = "retried-insert.example.com"
    rows = [
        archive_row(event, SYNTHETIC_PARTITION, offset) for offset, event in enumerate(make_events(site, 300))
    ]
    client = connect(settings)
    insert_rows(client, rows)
    insert_rows(client, rows)
    assert archived(settings, site) == (300, 300)


def audit_round(settings: Settings, fix: bool = True, full: bool = False) -> dict[int, PartitionAudit]:
    return by_partition(asyncio.run(audit_archive(settings, connect(settings), fix=fix, full=full)))


def archive_ends(settings: Settings) -> dict[int, int]:
    """Per partition, one past the last offset the archive accounts for."""
    rows = (
        connect(settings)
        .query(
            f"SELECT kafka_partition, max(kafka_offset) + 1 FROM ({ACCOUNTED_OFFSETS}) "
            "GROUP BY kafka_partition",
            parameters={"synthetic": SYNTHETIC_PARTITION},
        )
        .result_rows
    )
    return {int(p): int(end) for p, end in rows}


def set_marks(settings: Settings, marks: dict[int, int]) -> None:
    connect(settings).insert(
        MARKS, [[p, mark] for p, mark in marks.items()], column_names=["kafka_partition", "clean_below"]
    )


def archive_more(settings: Settings, site: str, count: int) -> None:
    """`count` events of `site` produced and archived. The archiver's own duplicates are
    test_archiver's: the audits here start once it has stopped, with nothing left to land."""
    events = make_events(site, count)
    asyncio.run(produce(settings, [(e.key, e.to_json()) for e in events]))
    asyncio.run(archive_until(settings, site, expected=count, settle_s=0))


def test_a_clean_round_marks_the_archive_end_and_the_next_reads_only_the_offsets_above(
    settings: Settings,
) -> None:
    archive_more(settings, "marked.example.com", 20_000)
    first = audit_round(settings, full=True)
    ends = archive_ends(settings)
    assert all(a.holes == [] and a.duplicates == 0 for a in first.values())
    assert read_marks(connect(settings)) == {p: ends[p] for p in first if p in ends}

    archive_more(settings, "marked-later.example.com", 300)
    set_marks(settings, ends)  # as they were: the archiver's own audit may have moved them on
    second = audit_round(settings)
    for partition, audit in second.items():
        # The round started at the mark, saw only what was archived since, and moved the mark on.
        assert audit.checked_from == ends[partition]
        assert audit.archived_first is None or audit.archived_first >= ends[partition]
        assert (audit.holes, audit.duplicates) == ([], 0)
    assert read_marks(connect(settings)) == archive_ends(settings)


def test_a_round_past_the_mark_reads_only_the_granules_archived_since(settings: Settings) -> None:
    """A scratch store of 600,000 archived events of two sites over 55 days, 3 partitions as the
    visitor keys spread them: with the marks 3,000 offsets short of each partition's end (the
    last 2 days), the round's summary skips the granules of `events` whose offsets are all below
    the marks (migration 0065's index): it reads under a tenth of them, and finds those 9,000
    offsets whole."""
    scratch = settings.model_copy(update={"clickhouse_database": "archive_audit_scale"})
    apply_migrations(scratch)
    client = connect(scratch)
    try:
        client.command(
            "INSERT INTO events (event_id, site, name, ts, received_at, visitor_id, kafka_partition, "
            "kafka_offset) SELECT generateUUIDv4(number), concat('s', toString(number % 2), '.example.com'), "
            "'pageview', toDateTime64('2026-09-01 00:00:00', 3, 'UTC') + toIntervalSecond(number * 8), "
            "toDateTime64('2026-09-01 00:00:00', 3, 'UTC') + toIntervalSecond(number * 8), "
            "toString(cityHash64(number % 50000)), number % 3, intDiv(number, 3) FROM numbers(600000)"
        )
        logs = {p: (0, 200_000) for p in range(3)}
        marks = {p: 197_000 for p in range(3)}
        plan = "\n".join(
            row[0]
            for row in client.query(
                f"EXPLAIN indexes = 1 {SUMMARY}", parameters=summary_parameters(logs, marks)
            ).result_rows
        )
        skip = plan[plan.index("events_kafka_offset") :]
        selected, total = map(int, skip.split("Granules: ", 1)[1].split()[0].split("/"))
        assert selected * 10 < total, plan

        audits = by_partition(find_holes(client, logs, marks))
        assert {p: (a.archived_first, a.archived_last, a.holes) for p, a in audits.items()} == {
            p: (197_000, 199_999, []) for p in range(3)
        }
        assert {p: a.clean_below for p, a in audits.items()} == {p: 200_000 for p in range(3)}

        # The look below each mark (is the offset under it still archived?) skips as much.
        plan = "\n".join(
            row[0]
            for row in client.query(
                f"EXPLAIN indexes = 1 {HELD_BELOW_MARKS}", parameters=held_below_parameters(marks)
            ).result_rows
        )
        skip = plan[plan.index("events_kafka_offset") :]
        selected, total = map(int, skip.split("Granules: ", 1)[1].split()[0].split("/"))
        assert selected * 10 < total, plan
        assert marks_still_held(client, logs, marks) == marks
        # A mark above offsets the archive no longer holds is dropped: that partition is checked
        # from every offset. A mark at the log's start has nothing below it to look for.
        longer = {p: (0, 200_100) for p in range(3)}
        assert marks_still_held(client, longer, {0: 197_000, 1: 200_050, 2: 0}) == {0: 197_000, 2: 0}
    finally:
        client.command("DROP DATABASE IF EXISTS archive_audit_scale")


def test_a_hole_above_the_mark_is_repaired_and_the_mark_waits_until_it_is_checked_again(
    settings: Settings,
) -> None:
    site = "hole-above-mark.example.com"
    archive_more(settings, "before-the-hole.example.com", 200)
    audit_round(settings, full=True)
    marks = read_marks(connect(settings))
    archive_more(settings, site, 3_000)
    set_marks(settings, marks)  # the archiver's own audit may have marked the new offsets clean
    ends = archive_ends(settings)
    partition = max(ends, key=lambda p: ends[p] - marks[p])
    hole = (marks[partition] + 100, marks[partition] + 200)
    assert hole[1] < ends[partition]
    punch_hole(settings, partition, *hole)

    # Reported, not repaired: the mark stops at the hole, and the next round looks again.
    for fix in (False, True):
        audit = audit_round(settings, fix=fix)[partition]
        assert [(h.start, h.end) for h in audit.holes] == [hole]
        assert audit.repaired == (100 if fix else 0)
        assert read_marks(connect(settings))[partition] == hole[0]

    audit = audit_round(settings)[partition]
    assert audit.checked_from == hole[0] and audit.holes == []
    assert read_marks(connect(settings))[partition] == archive_ends(settings)[partition]
    assert archived(settings, site) == (3_000, 3_000)


def test_a_hole_or_a_duplicate_below_the_mark_is_found_by_verify_full_only(settings: Settings) -> None:
    site = "below-mark.example.com"
    archive_more(settings, site, 1_500)
    audit_round(settings, full=True)
    ends = archive_ends(settings)
    assert read_marks(connect(settings)) == ends
    partition = max(ends, key=lambda p: ends[p])
    hole = (ends[partition] - 300, ends[partition] - 250)
    twice = ends[partition] - 10  # an offset accounted for by a row and a dead letter
    punch_hole(settings, partition, *hole)
    client = connect(settings)
    client.insert(
        "archive_deadletters",
        [[partition, twice, "planted"]],
        column_names=["kafka_partition", "kafka_offset", "reason"],
    )

    line = f"partition {partition}: "
    incremental = cli_verify(settings, site, "--no-repair")
    [seen] = [row for row in incremental.stdout.splitlines() if row.startswith(line)]
    assert "holes none (0 offsets)" in seen and "duplicates 0" in seen, incremental.stdout

    full = cli_verify(settings, site, "--no-repair", "--full")
    [seen] = [row for row in full.stdout.splitlines() if row.startswith(line)]
    assert f"holes {hole[0]}..{hole[1] - 1} (50 offsets)" in seen and "duplicates 1" in seen, full.stdout
    assert full.returncode == 1
    # The full audit set the mark back to the first offset it found wrong: rounds look there again.
    assert read_marks(client)[partition] == hole[0]
    assert [(h.start, h.end) for h in audit_round(settings, fix=False)[partition].holes] == [hole]

    client.command(
        "DELETE FROM archive_deadletters WHERE kafka_partition = {p:UInt16} AND kafka_offset = {o:UInt64}",
        parameters={"p": partition, "o": twice},
        settings={"mutations_sync": 2},
    )
    repaired = cli_verify(settings, site, "--full")
    [seen] = [row for row in repaired.stdout.splitlines() if row.startswith(line)]
    assert "repaired 50, duplicates 0" in seen, repaired.stdout
    assert audit_round(settings)[partition].holes == []
    assert read_marks(client)[partition] == archive_ends(settings)[partition]
    assert archived(settings, site) == (1_500, 1_500)


def cli_verify(settings: Settings, site: str, *options: str) -> subprocess.CompletedProcess[str]:
    return run_tally(os.environ | settings.environment(), "verify", "--site", site, *options, timeout=120)
