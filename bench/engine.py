"""The stats engine's archive compiler (stats/raw_sql.py) timed per query over a synthetic archive.

    python -m bench.engine [--events 1000000] [--rounds 5] [--save FILE] [--compare FILE] [--sessions-only]

Starts a ClickHouse endpoint (ops.clickhouse_endpoint, the chDB engine) in $TALLY_HOME, fills it
with the dashboard bench's synthetic archive (bench/dashboard.py: 30 days, 3 page views per
visit, 3 visits per visitor, custom and engagement events) and its goals, then asks each query of
QUERIES `rounds` times through `raw_sql.answer`, printing the median and the slowest time with the
load average. `--save` writes every answer; `--compare` checks the answers equal a saved run's,
so a speed-up is shown to change no answer on the same archive. `--against OLD/raw_sql.py` times
another version of the compiler too, round by round interleaved with this one (the same load for
both, on two cores shared with other work), and checks both answer the same.

SESSION_QUERIES are the shapes the planner (stats/planner.py) answers from `sessions` (built from
the archive by storage/rollup_backfill.py, as the stream jobs build it): each is timed through
the planner with source agg and through the archive compiler, round by round interleaved, and
both answers must be equal. `--sessions-only` times these alone.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

from clickhouse_connect.driver.client import Client

from bench.dashboard import bench_site, ensure_archive, ensure_derived, ensure_goals
from stats import planner, raw_sql
from stats.query import Behaviour, Condition, Logic, Query
from storage.client import connect
from storage.schema import apply_migrations
from tally.settings import Settings

# The figures of the engine's author (1M events, 2 busy cores), and what each shape exercises.
PAGE = Condition("is", "event:page", ("/pricing",))
QUERIES: dict[str, dict] = {
    "aggregate": {"metrics": ("visitors", "visits", "pageviews", "bounce_rate", "visit_duration")},
    "visitors by day": {"metrics": ("visitors", "pageviews"), "dimensions": ("time:day",)},
    "visitors by page": {"metrics": ("visitors", "pageviews"), "dimensions": ("event:page",)},
    "source x page": {"metrics": ("visitors", "pageviews"), "dimensions": ("visit:source", "event:page")},
    "bounce rate by page": {"metrics": ("visits", "bounce_rate"), "dimensions": ("event:page",)},
    "day x country": {"metrics": ("visitors", "visits"), "dimensions": ("time:day", "visit:country")},
    "aggregate, page filter": {
        "metrics": ("visitors", "visits", "bounce_rate", "visit_duration"),
        "filters": PAGE,
    },
    "has_done Signup": {
        "metrics": ("visitors", "pageviews"),
        "filters": Behaviour("has_done", Condition("is", "event:name", ("Signup",))),
    },
}

NEWSLETTER = Condition("is", "visit:utm_source", ("newsletter",))
VISIT_METRICS = ("visits", "bounce_rate", "visit_duration", "views_per_visit")
SESSION_QUERIES: dict[str, dict] = {
    "visit metrics": {"metrics": VISIT_METRICS},
    "visit metrics by day": {"metrics": VISIT_METRICS, "dimensions": ("time:day",)},
    "bounce rate by channel": {"metrics": ("visits", "bounce_rate"), "dimensions": ("visit:channel",)},
    "source x entry page, utm filter": {
        "metrics": ("bounce_rate", "visits", "visit_duration"),
        "dimensions": ("visit:source", "visit:entry_page"),
        "filters": NEWSLETTER,
    },
    "exit pages, source or utm": {
        "metrics": ("visits", "views_per_visit"),
        "dimensions": ("visit:exit_page",),
        "filters": Logic("or", (Condition("contains", "visit:source", ("google",)), NEWSLETTER)),
    },
    # custom events land on every page here: the planner's check sends it to the archive
    "bounce rate, visits by day, page /pricing": {
        "metrics": ("bounce_rate", "visits"),
        "dimensions": ("time:day",),
        "filters": PAGE,
    },
    "visitors + bounce rate by day (joined)": {
        "metrics": ("visitors", "bounce_rate"),
        "dimensions": ("time:day",),
    },
    # by the page: `paths`, and custom_events_by_page for the custom events' pages
    "bounce rate by page": {"metrics": ("bounce_rate",), "dimensions": ("event:page",)},
    "visits + bounce rate by source x page": {
        "metrics": ("visits", "bounce_rate"),
        "dimensions": ("visit:source", "event:page"),
    },
}


def _answers(rows: list[raw_sql.Row]) -> list:
    return [[[str(value) for value in row.dimensions], row.metrics] for row in rows]


def _timed(engine: ModuleType, client: Client, query: Query) -> tuple[float, list]:
    began = time.monotonic()
    rows = engine.answer(client, query)
    return time.monotonic() - began, _answers(rows)


def _figures(timings: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(timings), 2), "max_s": round(max(timings), 2)}


def load_compiler(path: Path) -> ModuleType:
    """Another version of stats/raw_sql.py (e.g. `git show main:stats/raw_sql.py > FILE`)."""
    spec = importlib.util.spec_from_file_location("raw_sql_against", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # type: ignore[union-attr]  # its dataclasses look it up
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def run_sessions(client: Client, site: str, start: datetime, now: datetime, rounds: int) -> dict:
    """SESSION_QUERIES through the planner (source agg) and the archive compiler, interleaved."""
    figures: dict = {}
    for name, fields in SESSION_QUERIES.items():
        query = Query(site, start, now, source="agg", **fields)
        timings: dict[str, list[float]] = {"planner": [], "archive": []}
        for _ in range(rounds):
            began = time.monotonic()
            planned = planner.answer(client, query)
            timings["planner"].append(time.monotonic() - began)
            took, archive = _timed(raw_sql, client, replace(query, source="raw"))
            timings["archive"].append(took)
            if _answers(planned.rows) != archive:
                raise SystemExit(f"{name}: the planner and the archive answer differently")
        entry = {
            "source": planned.source,
            "planner": _figures(timings["planner"]),
            "archive": _figures(timings["archive"]),
            "load_average": os.getloadavg()[0],
        }
        figures[name] = entry
        print(
            f"{name:40} {entry['source']}: median {entry['planner']['median_s']:5.2f} s "
            f"max {entry['planner']['max_s']:5.2f} s   archive: median {entry['archive']['median_s']:5.2f} s "
            f"max {entry['archive']['max_s']:5.2f} s  load {entry['load_average']:.2f}",
            flush=True,
        )
    return figures


def run(
    settings: Settings,
    events: int,
    rounds: int,
    against: ModuleType | None = None,
    sessions_only: bool = False,
) -> dict:
    apply_migrations(settings)
    now = datetime(2026, 11, 20, tzinfo=UTC)  # fixed: the same archive is reused between runs
    archive = ensure_archive(settings, events, now)
    site = bench_site(events)
    ensure_goals(settings, site)
    client = connect(settings, send_receive_timeout=600)
    start = now - timedelta(days=30)
    report: dict = {"archive": archive, "queries": {}, "answers": {}}
    report["derived"] = ensure_derived(settings, site)
    report["sessions"] = run_sessions(client, site, start, now, rounds)
    for name, fields in ({} if sessions_only else QUERIES).items():
        query = Query(site, start, now, **fields)
        timings: dict[str, list[float]] = {"now": [], "against": []}
        for _ in range(rounds):
            took, answers = _timed(raw_sql, client, query)
            timings["now"].append(took)
            if against is not None:
                took, before = _timed(against, client, query)
                timings["against"].append(took)
                if before != answers:
                    raise SystemExit(f"{name}: the two compilers answer differently")
        entry = {**_figures(timings["now"]), "load_average": os.getloadavg()[0]}
        line = f"{name:24} median {entry['median_s']:5.2f} s  max {entry['max_s']:5.2f} s"
        if against is not None:
            entry["against"] = old = _figures(timings["against"])
            line += f"   against: median {old['median_s']:5.2f} s  max {old['max_s']:5.2f} s"
        report["queries"][name] = entry
        report["answers"][name] = answers
        print(f"{line}  load {entry['load_average']:.2f}", flush=True)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--save", type=Path)
    parser.add_argument("--compare", type=Path)
    parser.add_argument("--against", type=Path, help="another raw_sql.py, timed interleaved with this one")
    parser.add_argument("--sessions-only", action="store_true", help="time SESSION_QUERIES alone")
    arguments = parser.parse_args()
    from tests.fixtures.clickhouse import running_endpoint
    from tests.fixtures.ports import free_port

    home = Path(os.environ.get("TALLY_HOME", ".tally-test"))
    home.mkdir(parents=True, exist_ok=True)
    with running_endpoint(home, free_port()) as endpoint:
        settings = Settings(home=home, clickhouse_url=endpoint.url, clickhouse_password=endpoint.password)
        against = load_compiler(arguments.against) if arguments.against else None
        report = run(settings, arguments.events, arguments.rounds, against, arguments.sessions_only)
    if arguments.save:
        arguments.save.write_text(json.dumps(report, indent=1, default=str))
    if arguments.compare:
        before = json.loads(arguments.compare.read_text())["answers"]
        now = json.loads(json.dumps(report["answers"], default=str))
        differing = [name for name in now if before.get(name) != now[name]]
        print("answers: same as", arguments.compare, "" if not differing else f"EXCEPT {differing}")


if __name__ == "__main__":
    main()
