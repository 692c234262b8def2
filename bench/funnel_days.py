"""The funnel at the query layer over the dashboard benchmark's archive (bench/dashboard.py's
synthetic site, made if missing): raw, agg cold (the site's stored days deleted before each
request: a definition's first request) and agg warm (its days stored), for the `30d` preset
(ending now: today live) and for 28 closed days, unfiltered and filtered. Wall
time per request, and with --engine-pid the engine's CPU per request (utime + stime of the
ClickHouse endpoint's process from /proc), which a shared machine's load disturbs less.

For when the whole dashboard benchmark cannot run (it measures every request, raw ones at
seconds each): `python -m bench.funnel_days [--events N] [--rounds R] [--engine-pid PID]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from datetime import time as clock_time
from pathlib import Path

from bench.dashboard import bench_site, ensure_archive, forget_funnel_days
from dashboard.periods import period
from loadgen.runner import percentile
from storage import queries
from storage.client import connect
from storage.queries import FunnelReport, FunnelStep, StatsQuery
from storage.schema import apply_migrations
from tally.settings import Settings

DAY = timedelta(days=1)
STEPS = [FunnelStep("page", "/"), FunnelStep("page", "/blog/*"), FunnelStep("event", "Signup")]


def engine_cpu(pid: int | None) -> float:
    """Seconds of CPU the process has used (0 without a pid)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measured(
    request: Callable[[], FunnelReport],
    rounds: int,
    pid: int | None,
    before: Callable[[], object] | None = None,
) -> dict[str, object]:
    walls, cpus, answer = [], [], None
    for _ in range(rounds):
        if before is not None:
            before()
        cpu, started = engine_cpu(pid), time.perf_counter()
        answer = request()
        walls.append(time.perf_counter() - started)
        cpus.append(engine_cpu(pid) - cpu)
    walls.sort()
    figures: dict[str, object] = {
        "p50_ms": round(percentile(walls, 0.5) * 1000, 1),
        "p95_ms": round(percentile(walls, 0.95) * 1000, 1),
        "rounds": rounds,
    }
    if pid is not None:
        figures["engine_cpu_median_ms"] = round(statistics.median(cpus) * 1000)
    if answer is not None and answer.days is not None:
        figures["days"] = {"stored": answer.days.stored_days, "computed": answer.days.computed_days}
    return figures


def run(settings: Settings, events: int, rounds: int, pid: int | None) -> dict:
    apply_migrations(settings)
    now = datetime.now(UTC)
    archive = ensure_archive(settings, events, now)
    client = connect(settings, send_receive_timeout=3600)
    site = bench_site(events)
    today = datetime.combine(now.date(), clock_time(), UTC)
    shown = period("30d", now)
    ranges = {
        "30d preset (29 days stored, today live)": StatsQuery(site, shown.start, shown.end),
        "28 closed days (all stored)": StatsQuery(site, today - 29 * DAY, today - DAY),
    }
    results: dict[str, dict] = {}
    load = [os.getloadavg()[0]]
    for name, plain in ranges.items():
        for label, q in (("", plain), (", filtered country=DE", replace(plain, filters={"country": "DE"}))):
            few = max(2, rounds // 3)  # raw and cold take seconds each
            raw = measured(lambda q=q: queries.funnel(client, q, STEPS, source="raw"), few, pid)

            def agg(q: StatsQuery = q) -> FunnelReport:
                return queries.funnel(client, q, STEPS, source="agg")

            cold = measured(agg, few, pid, before=lambda: forget_funnel_days(settings, site))
            warm = measured(agg, rounds, pid)
            same = [(r.visitors, r.sessions) for r in agg().steps] == [
                (r.visitors, r.sessions) for r in queries.funnel(client, q, STEPS, source="raw").steps
            ]
            results[name + label] = {"raw": raw, "agg cold": cold, "agg warm": warm, "agg equals raw": same}
            load.append(os.getloadavg()[0])
    return {
        "archive": {**archive, "site": site},
        "steps": [{step.kind: step.value} for step in STEPS],
        "load_average_1m": {"min": min(load), "max": max(load)},
        "funnels": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--engine-pid", type=int, default=None, help="the ClickHouse endpoint's pid: CPU")
    arguments = parser.parse_args()
    print(json.dumps(run(Settings(), arguments.events, arguments.rounds, arguments.engine_pid), indent=2))


if __name__ == "__main__":
    main()
