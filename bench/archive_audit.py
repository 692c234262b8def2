"""What an archive audit round costs: the full audit (every archived offset, as every
round did before the clean marks, and `tally verify --full` still does) against the incremental
one (the offsets since the marks), over a synthetic archive of N events.

The events go straight into `events` of the configured database with INSERT … SELECT FROM
numbers(N): 3 partitions (offset n // 3 of partition n % 3, as the visitor keys spread them),
20 sites, 3M visitors, spread over 60 days, so that offsets grow with time as on the log. The
materialized views on `events` are dropped first (they would build derived tables the audit
never reads): run it against a scratch store only, never against one that holds real data.
The round's log ranges are the archive's own (no broker is needed). After the full round sets
the marks, a round's worth of new events (30,000: 100 events/s for the 300 s interval) is
archived, and the incremental round checks them (with --merge, after the newest month's parts
were merged: the new events share granules with the same day's older ones, as once the store's
background merges have run).

Figures: wall time of find_holes, granules of `events` the summary selects (EXPLAIN indexes=1:
the local endpoint keeps no system.query_log), the endpoint's peak RSS during the round if its
pid is given. `python -m bench.archive_audit --events N [--endpoint-pid PID] [--merge]` prints
them as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import psutil
from clickhouse_connect.driver.client import Client

from archiver.audit import SUMMARY, find_holes, read_marks, summary_parameters, write_marks
from storage.client import connect
from storage.schema import apply_migrations
from tally.settings import Settings

T = TypeVar("T")
PARTITIONS = 3
SPAN_MS = 60 * 86_400_000
NEW_EVENTS = 30_000
_FILL = """
INSERT INTO events (event_id, schema_version, site, name, ts, received_at, url, hostname, path,
                    visitor_id, kafka_partition, kafka_offset)
SELECT generateUUIDv4(number), 1, concat('site-', toString(number % 20), '.example.com'), 'pageview',
       toDateTime64('2026-09-01 00:00:00', 3, 'UTC') + toIntervalMillisecond(intDiv(number * {span}, {total}))
           AS at, at,
       concat('https://x.example.com/p', toString(number % 500)), 'x.example.com',
       concat('/p', toString(number % 500)), toString(cityHash64(intDiv(number, 7) % 3000000)),
       number % {partitions}, intDiv(number, {partitions})
FROM numbers({start}, {count})
"""


def fill(client: Client, start: int, end: int, total: int) -> None:
    """Archive events start..end-1 (of `total` spread over the span; later ones past it)."""
    for low in range(start, end, 5_000_000):
        count = min(5_000_000, end - low)
        client.command(
            _FILL.format(span=SPAN_MS, total=total, partitions=PARTITIONS, start=low, count=count),
            settings={"max_insert_threads": 2},
        )


def newest_month(client: Client) -> str:
    """The month of the last archived event (the highest offset)."""
    return str(
        client.query("SELECT toString(toYYYYMM(argMax(ts, kafka_offset))) FROM events").result_rows[0][0]
    )


def archive_logs(client: Client) -> dict[int, tuple[int, int]]:
    rows = client.query("SELECT kafka_partition, max(kafka_offset) + 1 FROM events GROUP BY kafka_partition")
    return {int(p): (0, int(end)) for p, end in rows.result_rows}


def granules(client: Client, logs: dict[int, tuple[int, int]], marks: dict[int, int]) -> str:
    """'selected/total' granules of `events` the summary reads, from its plan."""
    plan = "\n".join(
        row[0]
        for row in client.query(
            f"EXPLAIN indexes = 1 {SUMMARY}", parameters=summary_parameters(logs, marks)
        ).result_rows
    )
    if "Ranges:" not in plan:
        return "none (nothing past the marks on the log)"
    # The last index step over `events` (the kafka_offset index, when the bound lets it apply).
    indexes = plan[plan.index("ReadFromMergeTree") : plan.index("Ranges:")]
    return indexes.rsplit("Granules: ", 1)[1].split()[0]


def peak_rss(pid: int | None, work: Callable[[], T]) -> tuple[T, int | None]:
    """`work()`'s result and the peak RSS (bytes) of process `pid` while it ran."""
    if pid is None:
        return work(), None
    process, peak, done = psutil.Process(pid), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], process.memory_info().rss)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        return work(), peak[0]
    finally:
        done.set()
        sampler.join()


def audit_round(client: Client, full: bool, pid: int | None) -> dict:
    logs = archive_logs(client)
    marks = read_marks(client)
    used = {} if full else marks
    plan = granules(client, logs, used)
    started = time.monotonic()
    audits, rss = peak_rss(pid, lambda: find_holes(client, logs, None if full else marks))
    wall = time.monotonic() - started
    write_marks(client, marks, audits)
    return {
        "wall_s": round(wall, 3),
        "granules_read": plan,
        "endpoint_peak_rss_mib": rss and round(rss / 2**20),
        "holes": sum(len(a.holes) for a in audits),
        "offsets_checked": sum(
            a.archived_last - a.archived_first + 1
            for a in audits
            if a.archived_last is not None and a.archived_first is not None
        ),
    }


def run_audit_bench(settings: Settings, events: int, pid: int | None, merge: bool, full: bool = True) -> dict:
    apply_migrations(settings)
    client = connect(settings)
    views = client.query(
        "SELECT name FROM system.tables WHERE database = currentDatabase() AND engine = 'MaterializedView'"
    ).result_rows
    for (view,) in views:
        client.command(f"DROP VIEW {view}")
    archived = int(client.query("SELECT count() FROM events").result_rows[0][0])
    started = time.monotonic()
    if archived < events:
        fill(client, archived, events, events)
    filled_s = time.monotonic() - started
    result: dict = {"events": events, "filled_s": round(filled_s, 1), "load_average": os.getloadavg()}
    if full:
        result["full"] = audit_round(client, True, pid)
    archived = int(client.query("SELECT count() FROM events").result_rows[0][0])
    # Spread as if they had been among the N (over the same span): the newest of them are later
    # than the last archived, their offsets higher, their day and month the same.
    fill(client, archived, archived + NEW_EVENTS, archived + NEW_EVENTS)
    if merge:  # the newest month's parts merged, the new events among the day's older ones
        result["merged_s"] = -time.monotonic()
        client.command(
            "OPTIMIZE TABLE events PARTITION ID {month:String} FINAL",
            parameters={"month": newest_month(client)},
            settings={"optimize_throw_if_noop": 1},  # a merge already running must not pass for one
        )
        result["merged_s"] = round(result["merged_s"] + time.monotonic(), 1)
    result["incremental"] = audit_round(client, False, pid)
    result["incremental_nothing_new"] = audit_round(client, False, pid)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--endpoint-pid", type=int, default=None)
    parser.add_argument(
        "--merge", action="store_true", help="merge the newest month's parts after the new events land"
    )
    parser.add_argument("--no-full", action="store_true", help="skip the full round (marks already set)")
    args = parser.parse_args()
    result = run_audit_bench(Settings(), args.events, args.endpoint_pid, args.merge, not args.no_full)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
