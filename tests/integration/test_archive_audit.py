"""The archive audit (storage/archive_audit.py, `tally verify`) on the real broker and store:
a hole punched into the archive is found exactly where it is, archived again from the log
once — even by two repairs at the same moment — and the audit then finds the archive whole."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading

import pytest

from storage.archive_audit import PartitionAudit, verify
from storage.archive_rows import SYNTHETIC_PARTITION, archive_row, insert_rows
from storage.client import connect
from tally.settings import PROJECT_ROOT, Settings
from tests.fixtures.archive import archived
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
    asyncio.run(archive_until(settings, SITE, expected=3_000))
    before = by_partition(verify(settings, fix=False).partitions)
    partition = max(before, key=lambda p: before[p].log_end)
    last = before[partition].archived_last
    assert last is not None and all(audit.holes == [] for audit in before.values())

    punch_hole(settings, partition, last - 500, last - 100)
    assert archived(settings, SITE)[0] < 3_000

    # Two repairs at once (the archiver's own audit and an operator's `tally verify`).
    reports = []
    repairs = [threading.Thread(target=lambda: reports.append(verify(settings))) for _ in range(2)]
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
    after = by_partition(verify(settings, fix=False).partitions)
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
    sends the same batch again (storage/archiver.py, _with_retry)."""
    site = "retried-insert.example.com"
    rows = [
        archive_row(event, SYNTHETIC_PARTITION, offset) for offset, event in enumerate(make_events(site, 300))
    ]
    client = connect(settings)
    insert_rows(client, rows)
    insert_rows(client, rows)
    assert archived(settings, site) == (300, 300)
