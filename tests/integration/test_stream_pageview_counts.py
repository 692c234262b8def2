"""The pageview_counts streaming query, end to end: real Kafka → real Spark → ClickHouse engine.

Each test has its own topic (the watermark is per query and would otherwise be pushed by
other tests' event times), its own checkpoints, its own database and its own sites. The
expected numbers are computed here, independently, from the events the test produced.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar
from uuid import uuid4

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from storage.client import connect
from storage.migrations import apply_migrations
from stream_jobs.app import start_queries, stop_gracefully
from stream_jobs.pageview_counts import QUERY_NAME
from tally.event import PageViewEvent, utc_now
from tally.settings import Settings

pytestmark = pytest.mark.integration

# Generous: a cold micro-batch on the shared 2-core machine can take many seconds.
DEADLINE_S = 180

Counts = dict[tuple[str, datetime], tuple[int, int]]  # (site, minute) → (pageviews, visitors)
Message = tuple[bytes | None, bytes]  # Kafka key, value
T = TypeVar("T")


@pytest.fixture
def stream_settings(tmp_path: Path, kafka_bootstrap: str, clickhouse_url: str) -> Settings:
    run = uuid4().hex[:10]
    settings = Settings(
        home=tmp_path / "home",
        kafka_bootstrap=kafka_bootstrap,
        clickhouse_url=clickhouse_url,
        clickhouse_database=f"tally_stream_{run}",
        pageviews_topic=f"pageviews-{run}",
        spark_trigger_s=1.0,
    )
    asyncio.run(create_topic(settings))
    apply_migrations(settings)
    return settings


@pytest.fixture
def running_queries() -> Iterator[list[StreamingQuery]]:
    """Queries a test starts are appended here and stopped whatever the test's outcome."""
    queries: list[StreamingQuery] = []
    yield queries
    for query in queries:
        stop_gracefully(query)


def test_pageviews_and_visitors_per_minute_match_the_events_produced(
    spark: SparkSession, stream_settings: Settings, running_queries: list[StreamingQuery]
) -> None:
    sites = site_names(3)
    events = pageview_events(sites, first_minute=minutes_ago(10), minutes=4, per_minute=25)
    noise = custom_events(sites, first_minute=minutes_ago(10))
    asyncio.run(produce(stream_settings, [*messages(events + noise), *malformed_messages()]))

    running_queries.extend(start_queries(spark, stream_settings))

    expected = expected_counts(events)
    assert wait_for(lambda: stored_counts(stream_settings, sites), expected) == expected
    assert all(query.isActive for query in running_queries), "malformed values must not stop the query"


def test_restart_from_checkpoint_and_redelivered_batch_do_not_double_count(
    spark: SparkSession, stream_settings: Settings, running_queries: list[StreamingQuery]
) -> None:
    sites = site_names(2)
    first_minute = minutes_ago(10)
    before = pageview_events(sites, first_minute=first_minute, minutes=4, per_minute=20)
    asyncio.run(produce(stream_settings, messages(before)))

    [query] = start_queries(spark, stream_settings)
    running_queries.append(query)
    expected = expected_counts(before)
    assert wait_for(lambda: stored_counts(stream_settings, sites), expected) == expected
    stop_gracefully(query)

    # Forget that the last batch with rows was committed, as if the driver had died right
    # after the sink wrote it: on restart Spark runs that batch again.
    redelivered = last_batch_with_rows(stream_settings)
    uncommit_from(stream_settings.checkpoints_dir / QUERY_NAME, redelivered)
    [query] = start_queries(spark, stream_settings)
    running_queries.append(query)
    assert wait_for(lambda: times_written(stream_settings, redelivered), 2) == 2
    assert stored_counts(stream_settings, sites) == expected

    # Later events, some in minutes already counted: the restored state carries on from the
    # totals before the restart. Event times stay within the watermark of those seen.
    after = pageview_events(sites, first_minute=first_minute + timedelta(minutes=3), minutes=2, per_minute=15)
    asyncio.run(produce(stream_settings, messages(after)))
    expected = expected_counts(before + after)
    assert wait_for(lambda: stored_counts(stream_settings, sites), expected) == expected


# --- events -------------------------------------------------------------------------------


def site_names(count: int) -> list[str]:
    run = uuid4().hex[:8]
    return [f"site{i}-{run}.example" for i in range(count)]


def minutes_ago(minutes: int) -> datetime:
    return utc_now().replace(second=0, microsecond=0) - timedelta(minutes=minutes)


def pageview_events(
    sites: list[str], *, first_minute: datetime, minutes: int, per_minute: int
) -> list[PageViewEvent]:
    """Page views spread over `minutes` of event time; a few visitors come back often."""
    rng = random.Random(first_minute.timestamp())
    events = []
    for minute in range(minutes):
        for site in sites:
            visitors = [f"visitor-{site}-{n}" for n in range(8)]
            for _ in range(per_minute):
                ts = first_minute + timedelta(minutes=minute, seconds=rng.uniform(0, 59.999))
                events.append(event(site, rng.choice(visitors), ts))
    # In event-time order, as a collector stamping receive time writes them.
    return sorted(events, key=lambda e: e.ts)


def custom_events(sites: list[str], *, first_minute: datetime) -> list[PageViewEvent]:
    """Custom events share the topic but are not page views."""
    return [event(site, "visitor-custom", first_minute, name="signup") for site in sites]


def event(site: str, visitor_id: str, ts: datetime, name: str = "pageview") -> PageViewEvent:
    return PageViewEvent(
        event_id=uuid4(),
        site=site,
        name=name,
        ts=ts,
        received_at=utc_now(),
        url=f"https://{site}/",
        visitor_id=visitor_id,
        ip_hash="ip-" + visitor_id,
    )


def messages(events: Iterable[PageViewEvent]) -> list[Message]:
    return [(e.key, e.to_json()) for e in events]


def malformed_messages() -> list[Message]:
    """Values the query must skip without stopping (the collector never writes them)."""
    values = [b"not json", b"{}", b"[1, 2]", b'{"site": "x.example", "ts": "yesterday", "visitor_id": "v"}']
    return [(None, value) for value in values]


def expected_counts(events: list[PageViewEvent]) -> Counts:
    pageviews: Counter[tuple[str, datetime]] = Counter()
    visitors: defaultdict[tuple[str, datetime], set[str]] = defaultdict(set)
    for e in events:
        minute = (e.site, e.ts.replace(second=0, microsecond=0))
        pageviews[minute] += 1
        visitors[minute].add(e.visitor_id)
    return {minute: (pageviews[minute], len(visitors[minute])) for minute in pageviews}


# --- Kafka --------------------------------------------------------------------------------


async def create_topic(settings: Settings) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(settings.pageviews_topic, num_partitions=3, replication_factor=1)]
        )
    finally:
        await admin.close()


async def produce(settings: Settings, messages: list[Message]) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap, acks="all", enable_idempotence=True
    )
    await producer.start()
    try:
        for key, value in messages:
            await producer.send(settings.pageviews_topic, value, key=key)
        await producer.flush()
    finally:
        await producer.stop()


# --- Spark checkpoint ---------------------------------------------------------------------


def uncommit_from(checkpoint: Path, batch_id: int) -> None:
    """Drop the commit of `batch_id` and every later batch, so that `batch_id` runs again."""
    for folder, first in (("commits", batch_id), ("offsets", batch_id + 1)):
        for path in (checkpoint / folder).iterdir():
            number = path.name.lstrip(".").removesuffix(".crc")
            if number.isdigit() and int(number) >= first:
                path.unlink()


# --- ClickHouse ---------------------------------------------------------------------------


def stored_counts(settings: Settings, sites: list[str]) -> Counts:
    rows = (
        connect(settings)
        .query(
            "SELECT site, window_start, sum(pageviews), uniqExact(visitor_id) "
            "FROM pageviews_per_minute FINAL WHERE site IN {sites:Array(String)} "
            "GROUP BY site, window_start",
            parameters={"sites": sites},
        )
        .result_rows
    )
    return {(site, minute.replace(tzinfo=UTC)): (int(pv), int(v)) for site, minute, pv, v in rows}


def last_batch_with_rows(settings: Settings) -> int:
    rows = (
        connect(settings)
        .query(
            "SELECT max(batch_id) FROM stream_batches WHERE query_name = {query:String} AND rows > 0",
            parameters={"query": QUERY_NAME},
        )
        .result_rows
    )
    return int(rows[0][0])


def times_written(settings: Settings, batch_id: int) -> int:
    rows = (
        connect(settings)
        .query(
            "SELECT count() FROM stream_batches "
            "WHERE query_name = {query:String} AND batch_id = {batch:UInt64}",
            parameters={"query": QUERY_NAME, "batch": batch_id},
        )
        .result_rows
    )
    return int(rows[0][0])


def wait_for(observe: Callable[[], T], expected: T, deadline_s: float = DEADLINE_S) -> T:
    """Poll until `observe()` returns `expected` or the deadline passes; returns the last value."""
    deadline = time.monotonic() + deadline_s
    while True:
        seen = observe()
        if seen == expected or time.monotonic() > deadline:
            return seen
        time.sleep(0.5)
