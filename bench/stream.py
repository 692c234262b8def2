"""How fast the Spark application keeps up: a backlog of N page views straight into Kafka,
then `python -m stream_jobs.app` until it has read them all.

The application runs one query, `activity` (stream_jobs/activity.py), which computes every
derived table from one read of the log: the rollups (windowed counts and breakdowns),
sessions, the rate-limit counters and late events. So its throughput is the throughput with
every computation running.

Reported: throughput (events/s from the query's start to its having read the backlog), the
micro-batch durations (p50/p95 of the progress reports' triggerExecution), the time to start,
and the peak RSS of the application (Python driver + its JVM + any worker, summed).

It uses its own topic, database and TALLY_HOME on the Kafka and ClickHouse of `settings`
(the local stack, or TALLY_KAFKA_BOOTSTRAP / TALLY_CLICKHOUSE_URL), and removes them after.
`run_stream_bench(settings)` for `tally bench`; `python -m bench.stream --events N`
standalone.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import click
import psutil
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from storage.client import connect
from storage.schema import apply_migrations
from tally.event import PageViewEvent
from tally.settings import PROJECT_ROOT, Settings

# The queries the application runs (stream_jobs.app.QUERIES), by the name its progress log
# lines carry; not imported, so that this module does not load pyspark.
QUERIES = ("activity",)
_BATCH_LINE = re.compile(
    r"^(?P<at>\S+ \S+) INFO stream_jobs: query (?P<query>\w+) batch (?P<batch>\d+): "
    r"(?P<events>\d+) events in (?P<ms>-?\d+) ms"
)
_STARTED_LINE = re.compile(r"^(?P<at>\S+ \S+) INFO stream_jobs: query (?P<query>\w+) started")


@dataclass
class StreamBenchReport:
    events: int
    produce_s: float
    startup_s: float  # process start → the query started
    catch_up_s: float  # query started → it has read every event
    events_per_s: float
    batches: int
    batch_ms_p50: float
    batch_ms_p95: float
    peak_rss_mib: float  # driver + JVM (+ workers), summed at each sample
    peak_jvm_rss_mib: float
    peak_driver_rss_mib: float  # the Python driver alone
    per_query_events_per_s: dict[str, float] = field(default_factory=dict)
    spark_driver_memory: str = ""
    live_events_per_s: float = 0
    live_batch_ms_p50: float = 0
    live_batch_ms_p95: float = 0

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def run_stream_bench(
    settings: Settings,
    events: int = 200_000,
    seed: int = 1,
    progress: Callable[[str], None] = print,
    timeout_s: float = 1800,
    live_rate: float = 500,
    live_s: float = 30,
) -> StreamBenchReport:
    """Backlog of `events`, then (if live_rate) `live_rate` page views/s for `live_s` seconds
    with event time = now: the micro-batches of a live run at that rate."""
    run = f"bench{int(time.time())}"
    home = Path(tempfile.mkdtemp(prefix="tally-bench-stream-"))
    bench = settings.model_copy(
        update={
            "home": home,
            "pageviews_topic": f"pageviews-{run}",
            "blocklist_topic": f"blocklist-{run}",
            "clickhouse_database": f"tally_{run}",
            # The stack's store, whose password is in the stack's home, not in this one.
            "clickhouse_password": settings.resolved_clickhouse_password(),
        }
    )
    try:
        asyncio.run(_create_topics(bench))
        apply_migrations(bench)
        progress(f"producing {events} page views to {bench.pageviews_topic}")
        started = time.monotonic()
        asyncio.run(_produce(bench, backlog(events, seed)))
        produce_s = time.monotonic() - started
        progress(f"produced in {produce_s:.1f} s; starting the stream jobs")
        report = _measure(bench, events, produce_s, progress, timeout_s, live_rate, live_s)
    except BaseException:
        progress(f"failed: the stream jobs' log is kept in {home}")
        raise
    finally:
        connect(bench, with_database=False).command(f"DROP DATABASE IF EXISTS {bench.clickhouse_database}")
        asyncio.run(_delete_topics(bench))
    shutil.rmtree(home, ignore_errors=True)
    return report


def _measure(
    settings: Settings,
    events: int,
    produce_s: float,
    progress: Callable[[str], None],
    timeout_s: float,
    live_rate: float,
    live_s: float,
) -> StreamBenchReport:
    log_path = settings.home_dir / "stream_jobs.log"
    environment = os.environ | settings.environment()
    with log_path.open("wb") as log:
        started = time.monotonic()
        wall_started = datetime.now()
        app = subprocess.Popen(
            [sys.executable, "-m", "stream_jobs.app"],
            cwd=PROJECT_ROOT,
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        peak = {"total": 0, "jvm": 0, "driver": 0}
        deadline = started + timeout_s
        try:
            lines = _wait_until_read(app, log_path, events, peak, deadline)
            caught_up = len(lines)
            live = int(live_rate * live_s)
            if live:
                progress(f"caught up; now {live_rate:.0f} page views/s for {live_s:.0f} s")
                asyncio.run(_produce_live(settings, live_rate, live_s))
                lines = _wait_until_read(app, log_path, events + live, peak, deadline)
        finally:
            _stop(app)
    report = _report(lines[:caught_up], events, produce_s, wall_started, peak, settings)
    live_durations = sorted(int(m["ms"]) for m in _matches(_BATCH_LINE, lines[caught_up:]))
    report.live_events_per_s = live_rate
    report.live_batch_ms_p50 = _percentile(live_durations, 0.5)
    report.live_batch_ms_p95 = _percentile(live_durations, 0.95)
    return report


def _wait_until_read(
    app: subprocess.Popen, log_path: Path, events: int, peak: dict[str, int], deadline: float
) -> list[str]:
    """Until every query has read `events` (from its progress log lines); samples RSS."""
    while True:
        for part, rss in _tree_rss(app.pid).items():
            peak[part] = max(peak[part], rss)
        lines = log_path.read_text(errors="replace").splitlines()
        read = _events_read(lines)
        if all(read.get(query, 0) >= events for query in QUERIES):
            return lines
        if app.poll() is not None:
            raise RuntimeError(f"the stream jobs exited ({app.returncode}): see {log_path}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"not done in time: read {read} of {events}")
        time.sleep(0.5)


def _stop(app: subprocess.Popen) -> None:
    """SIGTERM to the driver (it stops its queries and JVM), SIGKILL to the group after 60 s."""
    if app.poll() is not None:
        return
    app.send_signal(signal.SIGTERM)
    try:
        app.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(app.pid, signal.SIGKILL)
        app.wait()


def _report(
    lines: list[str],
    events: int,
    produce_s: float,
    wall_started: datetime,
    peak: dict[str, int],
    settings: Settings,
) -> StreamBenchReport:
    starts = [_at(m["at"]) for m in _matches(_STARTED_LINE, lines)]
    batches = _matches(_BATCH_LINE, lines)
    durations = sorted(int(m["ms"]) for m in batches)
    first_start = min(starts)
    done: dict[str, datetime] = {}
    read: dict[str, int] = {}
    for m in batches:
        read[m["query"]] = read.get(m["query"], 0) + int(m["events"])
        if read[m["query"]] >= events and m["query"] not in done:
            done[m["query"]] = _at(m["at"])
    catch_up_s = (max(done.values()) - first_start).total_seconds()
    return StreamBenchReport(
        events=events,
        produce_s=round(produce_s, 1),
        startup_s=round((max(starts) - wall_started).total_seconds(), 1),
        catch_up_s=round(catch_up_s, 1),
        events_per_s=round(events / catch_up_s),
        batches=len(durations),
        batch_ms_p50=_percentile(durations, 0.5),
        batch_ms_p95=_percentile(durations, 0.95),
        peak_rss_mib=round(peak["total"] / 2**20),
        peak_jvm_rss_mib=round(peak["jvm"] / 2**20),
        peak_driver_rss_mib=round(peak["driver"] / 2**20),
        per_query_events_per_s={
            query: round(events / (at - first_start).total_seconds()) for query, at in done.items()
        },
        spark_driver_memory=settings.spark_driver_memory,
    )


def _matches(pattern: re.Pattern[str], lines: list[str]) -> list[re.Match[str]]:
    """The log lines of the measured queries that match `pattern`."""
    return [m for line in lines if (m := pattern.match(line)) and m["query"] in QUERIES]


def _events_read(lines: list[str]) -> dict[str, int]:
    """Events read per query: each query reads the log once, so each counts the backlog once."""
    read: dict[str, int] = {}
    for m in _matches(_BATCH_LINE, lines):
        read[m["query"]] = read.get(m["query"], 0) + int(m["events"])
    return read


def _at(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f")


def _percentile(values: list[int], fraction: float) -> float:
    return float(values[min(len(values) - 1, int(fraction * len(values)))]) if values else 0.0


def _tree_rss(pid: int) -> dict[str, int]:
    """RSS of the driver process, of its JVM, and of both plus any Python worker. Other
    children are skipped: the JVM forks short-lived shells whose RSS, until they exec, is a
    copy of its own."""
    try:
        root = psutil.Process(pid)
        children = root.children(recursive=True)
        driver = root.memory_info().rss
        jvm = sum(p.memory_info().rss for p in children if p.name() == "java")
        workers = sum(p.memory_info().rss for p in children if p.name().startswith("python"))
        return {"total": driver + jvm + workers, "jvm": jvm, "driver": driver}
    except psutil.Error:
        return {}


# --- the backlog ----------------------------------------------------------------------------

PATHS = ["/", "/pricing", "/blog", "/docs", "/about", "/signup", "/login", "/features", "/changelog"]
REFERRERS = ["", "", "google.com", "news.ycombinator.com", "reddit.com", "duckduckgo.com"]
CLIENTS = [("desktop", "Chrome", "Windows"), ("mobile", "Safari", "iOS"), ("desktop", "Firefox", "Linux")]


def backlog(count: int, seed: int, sites: int = 5) -> list[bytes]:
    """`count` page views in event-time order over the last 2 hours: visitors in sessions of
    ~3 page views, a few clients sharing an address, one in 200 a scraper over the limit."""
    rng = random.Random(seed)
    end = datetime.now(UTC)
    span_s = 7200.0
    values = []
    visitor = 0
    while len(values) < count:
        visitor += 1
        site = f"site{rng.randrange(sites)}.bench.example"
        device, browser, os_name = rng.choice(CLIENTS)
        ip = f"ip-{rng.randrange(visitor // 3 + 1)}" if rng.random() > 0.005 else "scraper"
        ts = end - timedelta(seconds=rng.uniform(0, span_s))
        referrer = rng.choice(REFERRERS)
        while len(values) < count:
            event = PageViewEvent(
                event_id=UUID(int=rng.getrandbits(128), version=4),
                site=site,
                ts=ts,
                received_at=ts,
                url=f"https://{site}/",
                path=rng.choice(PATHS),
                referrer_domain=referrer,
                visitor_id=f"v{visitor}",
                ip_hash=ip,
                country=rng.choice(["US", "DE", "FR", "IN", "BR", ""]),
                device=device,
                browser=browser,
                os=os_name,
            )
            values.append((event.ts, event.key, event.to_json()))
            if rng.random() < 1 / 3:
                break
            ts += timedelta(seconds=rng.expovariate(1 / 90))
    values.sort(key=lambda item: item[0])
    return [(key, value) for _, key, value in values]


async def _create_topics(settings: Settings) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [
                NewTopic(
                    settings.pageviews_topic,
                    num_partitions=settings.pageviews_partitions,
                    replication_factor=1,
                ),
                NewTopic(settings.blocklist_topic, 1, 1, topic_configs={"cleanup.policy": "compact"}),
            ]
        )
    finally:
        await admin.close()


async def _delete_topics(settings: Settings) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        await admin.delete_topics([settings.pageviews_topic, settings.blocklist_topic])
    finally:
        await admin.close()


async def _produce_live(settings: Settings, rate: float, duration_s: float) -> None:
    """Exactly rate * duration_s page views with event time = now, sent in 100 ms ticks."""
    rng = random.Random(7)
    total = int(rate * duration_s)
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        started = time.monotonic()
        sent = 0
        while sent < total:
            due = min(total, int((time.monotonic() - started) * rate)) - sent
            for _ in range(due):
                event = _live_event(rng)
                await producer.send(settings.pageviews_topic, event.to_json(), key=event.key)
            sent += due
            await asyncio.sleep(0.1)
        await producer.flush()
    finally:
        await producer.stop()


def _live_event(rng: random.Random) -> PageViewEvent:
    visitor = rng.randrange(2000)
    now = datetime.now(UTC)
    return PageViewEvent(
        event_id=UUID(int=rng.getrandbits(128), version=4),
        site=f"site{visitor % 5}.bench.example",
        ts=now,
        received_at=now,
        url="https://live.bench.example/",
        path=rng.choice(PATHS),
        visitor_id=f"live{visitor}",
        ip_hash=f"live-ip-{visitor}",
    )


async def _produce(settings: Settings, messages: list[tuple[bytes, bytes]]) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap, acks="all", linger_ms=20, max_batch_size=512 * 1024
    )
    await producer.start()
    try:
        pending = []
        for key, value in messages:
            pending.append(await producer.send(settings.pageviews_topic, value, key=key))
            if len(pending) >= 10_000:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
    finally:
        await producer.stop()


@click.command()
@click.option("--events", type=int, default=200_000, show_default=True, help="Backlog size.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option(
    "--live-rate", type=float, default=500, show_default=True, help="Page views/s after the backlog."
)
@click.option(
    "--live-s", type=float, default=30, show_default=True, help="Seconds of live traffic (0: none)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def main(events: int, seed: int, live_rate: float, live_s: float, as_json: bool) -> None:
    report = run_stream_bench(
        Settings(),
        events,
        seed,
        progress=lambda line: print(line, file=sys.stderr),
        live_rate=live_rate,
        live_s=live_s,
    )
    if as_json:
        print(json.dumps(report.as_dict(), indent=2))
        return
    print(
        f"{report.events} events: {report.events_per_s} events/s through every computation "
        f"(catch-up {report.catch_up_s} s, start {report.startup_s} s); micro-batches "
        f"p50 {report.batch_ms_p50:.0f} ms p95 {report.batch_ms_p95:.0f} ms over {report.batches}; "
        f"live at {report.live_events_per_s:.0f}/s: micro-batches p50 {report.live_batch_ms_p50:.0f} ms "
        f"p95 {report.live_batch_ms_p95:.0f} ms; "
        f"peak RSS {report.peak_rss_mib:.0f} MiB (JVM {report.peak_jvm_rss_mib:.0f}, Python driver "
        f"{report.peak_driver_rss_mib:.0f}; spark.driver.memory {report.spark_driver_memory}); "
        f"per query {report.per_query_events_per_s}"
    )


if __name__ == "__main__":
    main()
