"""`tally bench`: one fixed scenario on the local stack, reported with the machine.

Starts the stack if it is not running (and stops it again after), then measures in turn
(bench/sections.py): event-to-visible latency at 1,000 events/s, dashboard query latency
(bench/dashboard.py), the collector next to a bare ASGI app's ceiling (bench/collector.py),
the archiver's throughput (bench/archiver.py), the Spark application's sustained throughput
(bench/stream.py), and every component's memory. `--only SECTION` runs one of them.
Writes bench/results/<date>-<host>.json and .md; a partial run <date>-<host>-<section>.*, so
that it never overwrites a full run's report.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
from rich.console import Console

from bench.alerts import bench_alerts
from bench.archiver import bench_archiver
from bench.cluster import bench_cluster
from bench.collector import run_collector_bench
from bench.open_loop import Sent, post_at_rate
from bench.sections import SECTION_NAMES, SECTIONS, Section, selected
from bench.storage_cost import bench_storage_cost
from loadgen.runner import percentile
from ops.local import stack, supervisor
from ops.local.components import components
from storage import queries
from storage.client import connect
from storage.sites import add_site
from tally.settings import PROJECT_ROOT, Settings

RESULTS_DIR = PROJECT_ROOT / "bench" / "results"
LATENCY_SITE = "latency.bench.example.com"
LATENCY_RATE = 1_000  # page views/s: the rate the event-to-screen target is stated at
# Older reports (before `--only`) named the latency section event_to_visible.
_LEGACY_NAMES = {"latency": "event_to_visible"}


def machine() -> dict[str, object]:
    cpu_model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor(),
    )
    java = subprocess.run(
        ["java", "-version"], capture_output=True, text=True, check=False
    ).stderr.splitlines()
    return {
        "host": socket.gethostname(),
        "cpu": cpu_model,
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "java": java[0] if java else "",
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def component_rss(settings: Settings) -> dict[str, float]:
    """RSS (MiB) of each component with its children (Spark's JVM is a child of its driver)."""
    rss = {}
    for status in stack.status(settings):
        if not status.pid:
            continue
        process = psutil.Process(status.pid)
        family = [process, *process.children(recursive=True)]
        rss[status.name] = round(sum(p.memory_info().rss for p in family) / 2**20, 1)
    rss["total"] = round(sum(rss.values()), 1)
    return rss


def _latency_headers(index: int) -> dict[str, str]:
    # A browser's user agent (bot filters drop others) and a client address of its own per
    # event, well under the per-IP rate limit whatever the run's size.
    return {
        "User-Agent": "Mozilla/5.0 (X11; Linux x86_64)",
        "X-Forwarded-For": f"10.9.{index // 250 % 256}.{1 + index % 250}",
        "Content-Type": "text/plain",
    }


def bench_latency(settings: Settings, events: int = 30_000, rate: float = LATENCY_RATE) -> dict[str, float]:
    """`events` page views posted to the collector at `rate`/s → counted in the Spark-derived
    tables the API reads (source agg, through the query layer).

    Event k (in ack order) is visible at the first poll whose count reaches k: the latency of
    each event is that poll's time minus its ack time. The sender's own rate is reported too:
    on two cores it shares the machine with the stack, and a sender that falls behind offers
    less than `rate`.
    """
    # Accepted from the moment it is added (collector/known_sites.py): no wait.
    add_site(connect(settings), LATENCY_SITE)
    client = connect(settings)
    since = datetime.now(UTC) - timedelta(minutes=1)
    baseline = _agg_count(client, since)
    sent = Sent()
    polls: list[tuple[float, int]] = []
    body = json.dumps({"d": LATENCY_SITE, "u": f"https://{LATENCY_SITE}/"}).encode()
    started = time.monotonic()

    async def measure() -> None:
        sender = asyncio.create_task(
            post_at_rate(
                "127.0.0.1", settings.collector_port, "/api/event", _latency_headers, body, rate, events, sent
            )
        )
        while not sender.done() or (polls and polls[-1][1] < len(sent.acked)):
            count = await asyncio.to_thread(_agg_count, client, since) - baseline
            polls.append((time.monotonic(), count))
            if sender.done() and (not sent.acked or time.monotonic() - sent.acked[-1] > 60):
                break
            await asyncio.sleep(0.1)
        await sender

    asyncio.run(measure())
    acked = sorted(sent.acked)
    latencies = sorted(visibility_latencies(acked, polls))
    return {
        "rate": rate,
        "offered": events,
        "sent": len(acked),
        "sent_per_s": round(len(acked) / (acked[-1] - started)) if acked else 0,
        "failed": len(sent.failed),
        "visible": len(latencies),
        "p50_s": round(percentile(latencies, 0.5), 3),
        "p95_s": round(percentile(latencies, 0.95), 3),
        "p99_s": round(percentile(latencies, 0.99), 3),
    }


def visibility_latencies(acked: list[float], polls: list[tuple[float, int]]) -> list[float]:
    """For the k-th acknowledged event, the first poll at or after its ack that counts k."""
    latencies, poll = [], 0
    for index, acked_at in enumerate(acked):
        while poll < len(polls) and (polls[poll][1] <= index or polls[poll][0] < acked_at):
            poll += 1
        if poll == len(polls):
            break
        latencies.append(polls[poll][0] - acked_at)
    return latencies


def _agg_count(client: object, since: datetime) -> int:
    points = queries.pageviews_per_minute(
        client, LATENCY_SITE, since, datetime.now(UTC) + timedelta(minutes=2), "agg"
    )
    return sum(point.pageviews for point in points)


def _optional(name: str, measure: Callable[[], dict], console: Console) -> dict:
    """Run one section; a section that fails is reported as such, not hidden."""
    console.print(f"[bold]{name}[/bold] …")
    started = time.monotonic()
    try:
        result = measure()
    except Exception as error:  # one broken section must not lose the others' figures
        result = {"error": f"{type(error).__name__}: {error}"[:500]}
    console.print(f"  {json.dumps(result)[:300]}  ({time.monotonic() - started:.0f}s)")
    return result


def run_bench(
    settings: Settings, console: Console, only: str | None = None, events: int | None = None
) -> dict:
    """Every section (or only `only`), each sized by `events` where it takes a size (else its
    default, bench/sections.py), with the stack's memory before and after."""
    sections = selected(only)
    needs_stack = any(section.needs_stack for section in sections)
    started_stack = needs_stack and not supervisor.supervisor_running(settings)
    report: dict[str, object] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "sections": [section.name for section in sections],
        "events": events,
    }
    try:
        if started_stack:  # inside the try: a stack that fails to come up is stopped again too
            stack.up(settings, demo=False, progress=console.print)
        if needs_stack:
            report["rss_idle_mib"] = component_rss(settings)
        report.update(run_sections(sections, section_runners(settings), events, console))
        if needs_stack:
            report["rss_after_mib"] = component_rss(settings)
    finally:
        if started_stack:
            stack.down(settings)
    report["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    return report


def run_sections(
    sections: tuple[Section, ...],
    runners: Mapping[str, Callable[[int | None], dict]],
    events: int | None,
    console: Console,
) -> dict[str, dict]:
    """Each section's figures under its name, in the order given; `events` overrides the size
    of the sections that take one."""
    results = {}
    for section in sections:
        size = section.default_events if events is None or section.default_events is None else events
        results[section.name] = _optional(
            section.title, lambda name=section.name, size=size: runners[name](size), console
        )
    return results


def section_runners(settings: Settings) -> dict[str, Callable[[int | None], dict]]:
    """What runs each section, given its size (None for a section that takes none)."""
    return {
        "latency": lambda size: bench_latency(settings, events=size),
        "alerts": lambda size: bench_alerts(settings, rounds=size or 10),
        "dashboard": lambda size: _dashboard_bench(settings, size),
        "collector": lambda _size: _collector_bench(settings),
        "archiver": lambda size: _archiver_bench(settings, size),
        "stream": lambda size: _stream_bench(settings, size),
        "storage": lambda size: bench_storage_cost(settings, size),
        "cluster": lambda size: bench_cluster(settings, size),
    }


@contextmanager
def components_paused(settings: Settings, *names: str) -> Iterator[None]:
    """Some of the stack's components stopped for a throughput section, started again after:
    on two cores, Spark catching up on the previous section's events (or the archiver on the
    collector's) would measure itself too."""
    rpc = supervisor.rpc(settings)
    for name in names:
        rpc.supervisor.stopProcess(name, True)
    try:
        yield
    finally:
        for component in components(settings):
            if component.name in names:
                supervisor.start_component(settings, component)


def stream_jobs_paused(settings: Settings) -> AbstractContextManager[None]:
    return components_paused(settings, "spark")


def _collector_bench(settings: Settings) -> dict:
    """The collector and the bare app with nothing consuming the log: both runs see the same
    machine (Kafka idle but for the collector's writes)."""
    with components_paused(settings, "spark", "archiver"):
        return run_collector_bench(settings)


def _archiver_bench(settings: Settings, events: int) -> dict:
    with stream_jobs_paused(settings):
        return bench_archiver(settings, events)


def _stream_bench(settings: Settings, events: int) -> dict:
    """The Spark application on a backlog of its own topic (two Spark drivers would share
    the cores)."""
    from bench.stream import run_stream_bench

    with stream_jobs_paused(settings):
        return asdict(run_stream_bench(settings, events))


def _dashboard_bench(settings: Settings, events: int) -> dict:
    from bench.dashboard import run_dashboard_bench

    return run_dashboard_bench(settings, events)


def write_report(report: dict, directory: Path = RESULTS_DIR) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"{report['started_at'][:10]}-{report['machine']['host']}"
    if not _is_full_run(report):
        stem += "-" + "-".join(report["sections"])
    json_path, md_path = directory / f"{stem}.json", directory / f"{stem}.md"
    json_path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    md_path.write_text(markdown(report))
    return json_path, md_path


def sections_run(report: dict) -> tuple[str, ...]:
    """The sections a report measured (a report from before `--only` ran them all)."""
    return tuple(report.get("sections", SECTION_NAMES))


def _is_full_run(report: dict) -> bool:
    return set(sections_run(report)) == set(SECTION_NAMES)


def section_result(report: dict, name: str) -> object:
    """A section's figures, under its name or the name an older report gave it."""
    return report.get(name, report.get(_LEGACY_NAMES.get(name, name)))


def headline(report: dict) -> list[tuple[str, str, str]]:
    """The figures the issues set targets for, in words; a section that failed or was not run
    says so."""

    def figure(section: str, describe: Callable[[dict], str]) -> str:
        if section in SECTION_NAMES and section not in sections_run(report):
            return "not run"
        result = section_result(report, section)
        if not isinstance(result, dict):
            return "not measured"
        if "error" in result:
            return f"failed: {result['error'][:120]}"
        try:
            return describe(result)
        except (KeyError, IndexError, TypeError, ValueError) as missing:
            return f"incomplete ({missing!r})"

    def collector(result: dict) -> str:
        by_scenario = {r["scenario"]: r for r in result["results"]}
        single, bare = by_scenario["collector_single_event"], by_scenario["bare_starlette_202"]
        batch = next((r for name, r in by_scenario.items() if name.startswith("collector_batch")), None)
        text = (
            f"{single['events_per_s']:,.0f} events/s single (p50 {single['p50_ms']} ms, "
            f"p99 {single['p99_ms']} ms) = {single['events_per_s'] / bare['events_per_s']:.0%} "
            f"of bare Starlette's {bare['events_per_s']:,.0f}/s"
        )
        return text + (f"; batches {batch['events_per_s']:,.0f} events/s (target ≥ 50,000)" if batch else "")

    def dashboard(result: dict) -> str:
        every = {**result["callbacks"], **{f"API {k}": v for k, v in result["api"].items()}}
        timings = {k: v for k, v in every.items() if "p95_ms" in v}
        failed = sorted(k for k in every if k not in timings)
        over = sorted((v["p95_ms"], k) for k, v in timings.items() if v["p95_ms"] > 300)
        worst = max(v["p95_ms"] for v in timings.values())
        return (
            f"{len(timings) - len(over)} of {len(every)} requests ≤ 300 ms p95 over "
            f"{result['archive']['events']:,} events, {result['period']['preset']}; "
            f"slowest p95 {worst:,.0f} ms" + (f"; failed: {', '.join(failed)}" if failed else "")
        )

    def latency(result: dict) -> str:
        text = f"p50 {result['p50_s']} s, p95 {result['p95_s']} s"
        if "p99_s" in result:  # older reports have no p99 and no sent/visible counts
            text += f", p99 {result['p99_s']} s"
        text += f" at {result['rate']:,.0f}/s"
        if "sent" in result:
            text += f"; {result['visible']:,} of {result['sent']:,} sent visible"
            # A sender that fell behind measured a lighter load than the target's: say so.
            if result["sent_per_s"] < 0.95 * result["rate"]:
                text += f", sender reached {result['sent_per_s']:,}/s"
        return text

    def cluster(result: dict) -> str:
        def one(mode: str) -> str:
            figures = result[mode]
            return (
                f"{mode} {figures['accepted_per_s']:,}/s accepted, p50 {figures['p50_s']} s, "
                f"p95 {figures['p95_s']} s, archive complete after {figures['archive_complete_after_s']} s"
            )

        offered = f" ({result['offered_events']:,} offered at {result['offered_rate']}/s)"
        return "; ".join(one(mode) for mode in ("single", "cluster")) + offered

    def storage(result: dict) -> str:
        return (
            f"log {result['log_bytes_per_event_by_batch']['1']} B alone in a batch, "
            f"{result['log_bytes_per_event_by_batch']['10000']} B in full batches; "
            f"archive {result['archive_bytes_per_event']} B ({result['events']:,} page views)"
        )

    def idle(result: dict) -> str:
        return f"{result['total']:,.0f} MiB total"

    return [
        ("collector throughput", figure("collector", collector), "≥ 50% of the bare ASGI ceiling"),
        (
            "archiver throughput",
            figure("archiver", lambda r: f"{r['events_per_s']:,} events/s ({r['events']:,} events)"),
            "≥ 50,000 events/s",
        ),
        (
            "Spark sustained throughput",
            figure(
                "stream", lambda r: f"{r['events_per_s']:,} events/s, batch p95 {r['batch_ms_p95']:,.0f} ms"
            ),
            "≥ 20,000 events/s",
        ),
        (
            "event to visible (agg)",
            figure("latency", latency),
            f"≤ 5 s p95 at {LATENCY_RATE:,}/s",
        ),
        ("dashboard and API latency", figure("dashboard", dashboard), "≤ 300 ms p95 each"),
        ("single node vs cluster", figure("cluster", cluster), "— (2 cores: correctness, not speed)"),
        ("bytes per page view", figure("storage", storage), "— (docs/capacity.md's input)"),
        ("RSS, idle", figure("rss_idle_mib", idle), "≤ 4 GiB"),
        ("RSS, after the run", figure("rss_after_mib", idle), "—"),
    ]


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        f"# Tally benchmark — {report['started_at']}",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, {m['os']};",
        f"Python {m['python']}; {m['java']}.",
        f"Load average at start: {m['load_average_at_start']}.",
        _run_line(report),
        "",
        "| measure | figure | target (issues) |",
        "|---|---|---|",
        *(f"| {measure} | {figure} | {target} |" for measure, figure, target in headline(report)),
        "",
        "The sections below hold every figure measured.",
        "",
    ]
    memory = [name for name in ("rss_idle_mib", "rss_after_mib") if name in report]
    for section in (*sections_run(report), *memory):
        lines += [
            f"## {section}",
            "",
            "```json",
            json.dumps(section_result(report, section), indent=2, default=str),
            "```",
            "",
        ]
    return "\n".join(lines)


def _run_line(report: dict) -> str:
    ran = sections_run(report)
    size = f"--events {report['events']:,}" if report.get("events") else "each section's default size"
    if report.get("events") and not any(s.events_mean for s in SECTIONS if s.name in ran):
        size += " (unused: no section run takes a size)"
    if _is_full_run(report):
        return f"Sections: all ({', '.join(ran)}), {size}."
    not_run = [name for name in SECTION_NAMES if name not in ran]
    return f"Partial run: {', '.join(ran)}, {size}; not run: {', '.join(not_run)}."
