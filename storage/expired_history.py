"""The history the log no longer holds, as the archive keeps it: where a rebuild of the derived
tables (`tally replay`, `tally upgrade`) must take the archive instead of the log.

Kafka keeps `pageviews` for 7 days; the archive keeps every event with the partition and offset
it had on the log. The events the log has expired are therefore exactly the archived rows below
their partition's first retained offset. A rebuild splits history at one UTC day, the cut:
- before it, every day is rebuilt from the archive (storage/rollup_backfill.py, the stream
  jobs' definitions in SQL, checked against Spark's rows by tests);
- from it, the stream jobs replay the log, skipping the events whose time is before the cut
  (late or back-dated events a retained offset holds: the archive has counted them).
The cut is the day after the newest expired event, so the log holds every event of the days
from it on. A day is never half from each side.

What the split changes: a visit crossing midnight into the cut day is a session on each side
(the stream jobs start it anew at midnight); the late events of the days before the cut are
counted in those days' rollups (the archive has them all) rather than recorded as late, which
the stats read the archive for anyway (contract.LATE_EVENTS_RULE). Rows written straight into
the archive (SYNTHETIC_PARTITION: tests, benchmarks) are in the days rebuilt from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from clickhouse_connect.driver.client import Client

from storage.tables import EVENTS


@dataclass(frozen=True)
class ExpiredHistory:
    """What a rebuild takes from the archive: every day before `cut`, per site from its first."""

    cut: date
    expired_events: int  # archived events below their partition's first retained offset
    first_day: dict[str, date]  # site → its first archived day before the cut

    @property
    def cut_at(self) -> datetime:
        return datetime.combine(self.cut, time(), UTC)

    @property
    def days(self) -> int:
        return sum((self.cut - first).days for first in self.first_day.values())


def expired_history(client: Client, beginnings: dict[int, int]) -> ExpiredHistory | None:
    """The history to take from the archive, given each partition's first retained offset on the
    log; None when the log has expired none of the archived events."""
    expired = {partition: offset for partition, offset in beginnings.items() if offset > 0}
    if not expired:
        return None
    partitions = sorted(expired)
    newest, count = client.query(
        f"""
        SELECT max(ts), count() FROM {EVENTS}
        WHERE indexOf({{partitions:Array(UInt16)}}, kafka_partition) > 0
          AND kafka_offset < {{offsets:Array(UInt64)}}[indexOf({{partitions:Array(UInt16)}}, kafka_partition)]
        """,
        parameters={"partitions": partitions, "offsets": [expired[p] for p in partitions]},
    ).result_rows[0]
    if not count:
        return None
    newest = newest.replace(tzinfo=UTC) if newest.tzinfo is None else newest
    cut = newest.astimezone(UTC).date() + timedelta(days=1)
    rows = client.query(
        f"SELECT site, toDate(min(ts)) FROM {EVENTS} WHERE ts < {{cut:DateTime64(3, 'UTC')}} GROUP BY site",
        parameters={"cut": datetime.combine(cut, time(), UTC)},
    ).result_rows
    return ExpiredHistory(cut, int(count), {site: first for site, first in sorted(rows)})
