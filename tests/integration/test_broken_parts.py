"""A part of the store that no longer reads back (its marks file emptied, as a merge on a full disk
left one in CI) fails every read of its table. Against the real ClickHouse endpoint: the error
names the part, the part is detached, the index is rebuilt from the archive, and the archiver's
next write of the batch lands, with the copies of events archived before still found; and
`tally verify` sets a broken part of the archive aside itself and reads its events again from
the log."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import uuid4

import pytest
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import DatabaseError

from archiver.audit import verify
from archiver.rows import ArchiveRow, archive_row, write_batch
from storage import broken_parts
from storage.client import connect
from tests.fixtures.archive import archived
from tests.fixtures.clickhouse import Endpoint, own_database_settings
from tests.fixtures.events import make_events
from tests.fixtures.topics import own_store_and_topic
from tests.integration.test_archiver import archive_until, produce

pytestmark = pytest.mark.integration

WINDOW_S = 3600.0


def batch(site: str, first_offset: int, count: int) -> list[ArchiveRow]:
    """`count` events received an hour ago: inside the window `archive_ids` is rebuilt for (its
    days count back from today, so a fixed date would fall out of it a week later)."""
    rows = []
    received = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    for offset, made in enumerate(make_events(site, count, start=received), start=first_offset):
        event = made.model_copy(update={"event_id": uuid4()})
        rows.append(
            ArchiveRow(archive_row(event, 0, offset), 0, offset, site, event.event_id, event.received_at)
        )
    return rows


def copy_of(row: ArchiveRow, offset: int) -> ArchiveRow:
    """The same event re-sent, found later on the log."""
    return ArchiveRow(row.line, 0, offset, row.site, row.event_id, row.received_at)


def empty_the_marks(client: Client, table: str = "archive_ids") -> str:
    """Empty the marks files of the table's one active part, as the disk left them; its name."""
    [(name, path)] = client.query(
        "SELECT name, path FROM system.parts WHERE database = currentDatabase()"
        " AND table = {table:String} AND active",
        parameters={"table": table},
    ).result_rows
    empty_marks_of(client, Path(path))
    return str(name)


def empty_marks_of(client: Client, part: Path) -> None:
    marks = [file for file in part.iterdir() if ".cmrk" in file.name or ".mrk" in file.name]
    assert marks, list(part.iterdir())
    for file in marks:
        file.write_bytes(b"")
    client.command("SYSTEM DROP MARK CACHE")


def test_an_unreadable_index_part_is_set_aside_and_rebuilt(
    clickhouse_endpoint: Endpoint, tmp_path: Path
) -> None:
    settings = own_database_settings(tmp_path, clickhouse_endpoint, "broken_parts")
    client = connect(settings)
    site = f"broken-{uuid4().hex[:8]}.example.com"
    archived = batch(site, 0, 40)
    write_batch(client, archived, [], WINDOW_S)
    part = empty_the_marks(client)

    later = [*batch(site, 40, 10), copy_of(archived[3], 50)]
    with pytest.raises(DatabaseError) as refused:
        write_batch(client, later, [], WINDOW_S)
    broken = broken_parts.named_in(refused.value)
    assert broken is not None and broken.part == part, str(refused.value)[:500]

    assert broken_parts.set_aside(client, broken) == f"{settings.clickhouse_database}.archive_ids"
    detached = client.query(
        "SELECT count() FROM system.detached_parts WHERE database = currentDatabase()"
        " AND table = 'archive_ids' AND name = {part:String}",
        parameters={"part": part},
    ).result_rows[0][0]
    assert detached == 1
    # Once set aside it is no active part any more: a second caller finds nothing to do.
    assert broken_parts.set_aside(client, broken) is None

    copies = write_batch(client, later, [], WINDOW_S)
    assert [(copy.row.offset, copy.first.offset) for copy in copies] == [(50, 3)]  # the index knew it again
    count, unique = client.query(
        "SELECT count(), uniqExact(event_id) FROM events WHERE site = {site:String}",
        parameters={"site": site},
    ).result_rows[0]
    assert count == unique == 50


#: What the store answered the archiver's and the dashboard's reads in CI for a quarter of an hour
#: after the store's disk had filled (the full-disk fault test): a broken part, and no path to it.
UNNAMED = (
    "Received ClickHouse exception, code: 33, server response: Code: 33. DB::Exception: Cannot read all "
    "data. Bytes read: 0. Bytes expected: 1. (CANNOT_READ_ALL_DATA) (version 26.9.2.1)"
)


def test_a_broken_part_no_error_names_is_found_by_check_and_set_aside(
    clickhouse_endpoint: Endpoint, tmp_path: Path
) -> None:
    """For a broken-part error naming no part, CHECK finds the broken one among the newest parts
    and it is set aside; an error of another kind searches nothing."""
    settings = own_database_settings(tmp_path, clickhouse_endpoint, "unnamed_broken_part")
    client = connect(settings)
    site = f"unnamed-{uuid4().hex[:8]}.example.com"
    client.command("SYSTEM STOP MERGES events")  # two parts stay two
    write_batch(client, batch(site, 0, 40), [], WINDOW_S)
    write_batch(client, batch(site, 40, 10), [], WINDOW_S)  # a second part of events, left whole
    [(part, path)] = client.query(
        "SELECT name, path FROM system.parts WHERE database = currentDatabase() AND table = 'events'"
        " AND active ORDER BY modification_time, name LIMIT 1"
    ).result_rows
    empty_marks_of(client, Path(path))
    assert broken_parts.named_in(RuntimeError(UNNAMED)) is None

    [found] = broken_parts.located(client, RuntimeError(UNNAMED))
    assert found.part == part
    assert broken_parts.set_aside(client, found) == f"{settings.clickhouse_database}.events"
    assert archived(settings, site) == (10, 10)  # readable again; the rest is the audit's to re-read
    assert broken_parts.checked(client) == []
    assert broken_parts.located(client, RuntimeError("Code: 243. DB::Exception: not enough space")) == []


@pytest.mark.parametrize(
    "message",
    [
        "Code: 241. DB::Exception: Memory limit exceeded (while reading from part /x/store/b48/"
        "b48a6155-5370-41bc-8792-56eea88cb2e3/all_1_40_12/)",
        "Code: 246. DB::Exception: Empty marks file, no part path here",
        "Code: 243. DB::Exception: Cannot reserve 1.00 MiB, not enough space",
    ],
)
def test_errors_that_name_no_broken_part_set_nothing_aside(message: str) -> None:
    assert broken_parts.named_in(RuntimeError(message)) is None


def test_tally_verify_sets_an_unreadable_archive_part_aside_and_reads_its_events_again_from_the_log(
    clickhouse_endpoint: Endpoint, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = own_store_and_topic(tmp_path, clickhouse_endpoint, kafka_bootstrap, "broken_events")
    site = f"broken-{uuid4().hex[:8]}.example.com"
    events = make_events(site, 300)
    asyncio.run(produce(settings, [(event.key, event.to_json()) for event in events]))
    asyncio.run(archive_until(settings, site, expected=300))
    client = connect(settings)
    client.command("OPTIMIZE TABLE events FINAL")  # the 300 in one part, then 60 more in another
    [(part, path)] = client.query(
        "SELECT name, path FROM system.parts"
        " WHERE database = currentDatabase() AND table = 'events' AND active"
    ).result_rows
    later = make_events(site, 60)
    asyncio.run(produce(settings, [(event.key, event.to_json()) for event in later]))
    asyncio.run(archive_until(settings, site, expected=360))
    empty_marks_of(client, Path(path))
    with pytest.raises(DatabaseError):
        archived(settings, site)  # every read of the archive fails on that part

    report = verify(settings)
    assert report.set_aside == [f"{settings.clickhouse_database}.events part {part}"]
    assert any(part in line for line in report.lines())
    # The part's rows were re-read from the log, each once: the archive is whole again.
    assert archived(settings, site) == (360, 360)
    assert sum(audit.repaired for audit in report.partitions) == 300
    assert all(audit.gapless for audit in verify(settings, fix=False, full=True).partitions)
