"""What an answer's `meta` says of the log for its range (storage/queries/provenance.py coverage):
per partition the range's archived events, their first and last offset and how many the stream
jobs have not read. Read from the per-day summary of the archive (migration 0075) and the
range's partial days, it must be what the rows themselves say, on the real ClickHouse engine:
for ranges with whole days and ragged ends, inside one day, across one midnight, with events of
the synthetic partition (imports) that are never pending, after the archive lost rows and had
them written again (the summary counted those twice) and with the summary missing the site's
rows: the archive's own count of the range tells when the summary cannot be trusted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import uuid4

import pytest
from clickhouse_connect.driver.client import Client

from archiver.rows import ARCHIVE_COLUMNS, EVENT_COLUMNS
from storage.client import connect
from storage.queries.contract import StatsQuery
from storage.queries.provenance import PartitionCoverage, coverage
from storage.tables import ARCHIVE_OFFSETS_DAY, SYNTHETIC_PARTITION
from tests.fixtures.clickhouse import Endpoint, own_database_settings
from tests.fixtures.events import page_view

pytestmark = pytest.mark.integration

Archived = tuple[datetime, int, int]  # an event's time, its partition, its offset


def archive(client: Client, site: str, day: datetime) -> list[Archived]:
    """72 events an hour apart from `day` 00:30 over partitions 0 and 1, each partition's offsets
    counting up; and 10 imported ones (the synthetic partition) on the second day."""
    archived, offsets = [], {0: 100, 1: 500}
    for hour in range(72):
        partition = hour % 2
        archived.append((day + timedelta(hours=hour, minutes=30), partition, offsets[partition]))
        offsets[partition] += 1
    archived += [(day + timedelta(days=1, hours=6, minutes=n), SYNTHETIC_PARTITION, n) for n in range(10)]
    rows = [
        [getattr(page_view(site, f"v{offset % 7}", ts), column) for column in EVENT_COLUMNS]
        + [partition, offset]
        for ts, partition, offset in archived
    ]
    client.insert("events", rows, column_names=ARCHIVE_COLUMNS)
    return archived


def counted(archived: list[Archived], start: datetime, end: datetime, processed: dict[int, int]) -> list:
    """The coverage the rows themselves give."""
    partitions: dict[int, list[int]] = {}
    for ts, partition, offset in archived:
        if start <= ts < end:
            partitions.setdefault(partition, []).append(offset)
    return [
        PartitionCoverage(
            partition=partition,
            events=len(offsets),
            first_offset=min(offsets),
            last_offset=max(offsets),
            processed_to=processed.get(partition),
            pending=0
            if partition == SYNTHETIC_PARTITION
            else sum(offset >= processed.get(partition, 0) for offset in offsets),
        )
        for partition, offsets in sorted(partitions.items())
    ]


def test_meta_of_the_log_from_the_daily_summary_is_what_the_archived_rows_say(
    clickhouse_endpoint: Endpoint, tmp_path: Path
) -> None:
    client = connect(own_database_settings(tmp_path, clickhouse_endpoint, "coverage"))
    site = f"coverage-{uuid4().hex[:8]}.example.com"
    day = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=5)
    archived = archive(client, site, day)
    # Partition 0 read up to the middle of the second day; partition 1 read whole.
    processed = {0: 100 + 20, 1: 500 + 36}
    ranges = [
        (day, day + timedelta(days=3)),  # three whole days
        (day + timedelta(hours=5, minutes=10), day + timedelta(days=2, hours=17, minutes=45)),  # ragged ends
        (day + timedelta(days=1, hours=3), day + timedelta(days=1, hours=20)),  # inside one day
        (day + timedelta(hours=12), day + timedelta(days=1, hours=12)),  # across one midnight, no whole day
        (day + timedelta(days=2), day + timedelta(days=2, hours=6)),  # from a midnight
        (day - timedelta(days=3), day),  # nothing archived
    ]
    for start, end in ranges:
        expected = counted(archived, start, end, processed)
        assert coverage(client, StatsQuery(site, start, end), processed) == expected, (start, end)
    assert coverage(client, StatsQuery(site, day, day + timedelta(days=3)), {}) == counted(
        archived, day, day + timedelta(days=3), {}
    )  # the stream jobs have read nothing: every event of the log is pending

    # Partition 1's rows of the second day lost from the archive and written again (as the audit
    # repairs a broken part): the summary has them twice, the answer still once.
    lost = "site = {site:String} AND kafka_partition = 1 AND toDate(ts) = {day:Date}"
    lost_day = {"site": site, "day": (day + timedelta(days=1)).date()}
    client.command("CREATE TABLE lost_rows AS events")
    client.command(f"INSERT INTO lost_rows SELECT * FROM events WHERE {lost}", parameters=lost_day)
    client.command(f"ALTER TABLE events DELETE WHERE {lost} SETTINGS mutations_sync = 2", parameters=lost_day)
    client.command("INSERT INTO events SELECT * FROM lost_rows")
    summary, archive_count = client.query(
        f"SELECT (SELECT sum(events) FROM {ARCHIVE_OFFSETS_DAY} WHERE site = {{site:String}}),"
        " (SELECT count() FROM events WHERE site = {site:String})",
        parameters={"site": site},
    ).result_rows[0]
    assert summary == archive_count + 12  # the premise: the summary counted the 12 rows twice
    for start, end in ranges:
        expected = counted(archived, start, end, processed)
        assert coverage(client, StatsQuery(site, start, end), processed) == expected, (start, end)

    # The summary without the site's rows at all (rows archived before it was kept, or cleared by
    # hand): the archive still answers what it holds.
    client.command(
        f"ALTER TABLE {ARCHIVE_OFFSETS_DAY} DELETE WHERE site = {{site:String}} SETTINGS mutations_sync = 2",
        parameters={"site": site},
    )
    for start, end in ranges:
        expected = counted(archived, start, end, processed)
        assert coverage(client, StatsQuery(site, start, end), processed) == expected, (start, end)
