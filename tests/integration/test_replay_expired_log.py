"""A replay (`tally replay`, `tally upgrade`) over a log whose retention has expired its first
days keeps those days' numbers: they are rebuilt from the archive, the rest from the log, and
every report of every day is the same after the swap as before. Real Kafka (records deleted
from the log's head as retention deletes them), the real archiver, Spark and ClickHouse.

Before, the replay refused without --force, and with it the swap dropped the expired days."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from storage import queries
from storage.client import connect
from storage.expired_history import expired_history
from storage.queries import agg, raw
from stream_jobs.activity import QUERY_NAME
from stream_jobs.app import stop_gracefully
from stream_jobs.queries import start_queries
from stream_jobs.replay import beginning_offsets, rebuild_with_history, swap
from tally.settings import Settings
from tests.fixtures.events import page_view
from tests.fixtures.spark import site_names, wait_for_watermark
from tests.integration.test_provenance import Landed, archive, end_offsets, produce, visits
from tests.integration.test_stream_agg_equals_raw import last_midnight, reports_of

pytestmark = pytest.mark.integration


def test_a_replay_after_the_log_expired_its_first_days_keeps_their_numbers(
    spark: SparkSession, stream_settings: Settings, running_queries: list[StreamingQuery]
) -> None:
    settings = stream_settings
    site, clock_site = site_names(2)
    days = [last_midnight() - timedelta(days=n) for n in (3, 2, 1)]
    traffic = sorted(
        (event for day in days for event in visits([site], day + timedelta(hours=9))), key=lambda e: e.ts
    )
    # A page view of the second day arriving after the third's (a slow sender's, within the
    # allowed lateness): on a retained offset, yet of a day the archive rebuilds.
    straggler = page_view(site, "visitor-0", days[1] + timedelta(hours=12))
    clock = page_view(clock_site, "clock", days[-1] + timedelta(hours=14))  # closes every session
    landed = produce(settings, [*traffic, straggler, clock])
    archive(settings, len(landed))
    running_queries.extend(start_queries(spark, settings, [QUERY_NAME]))
    wait_for_watermark(settings, QUERY_NAME, clock.ts - timedelta(seconds=settings.watermark_s))
    for query in running_queries:
        stop_gracefully(query)
    client = connect(settings)

    def every_days_reports(source: object) -> dict[datetime, dict[str, object]]:
        one_day = timedelta(days=1)
        return {day: reports_of(client, queries.StatsQuery(site, day, day + one_day), source) for day in days}

    before = every_days_reports(agg)
    assert all(before[day]["aggregate"]["pageviews"] > 0 for day in days), before  # type: ignore[index]
    assert before == every_days_reports(raw)

    # Retention deletes the log's head: every event of the first two days is gone from it.
    kept_from = first_offsets_from(landed, days[-1])
    delete_records(settings, kept_from)
    moved = {p: o for p, o in beginning_offsets(settings).items() if o}
    assert moved == {p: o for p, o in kept_from.items() if o}

    history = expired_history(client, beginning_offsets(settings))
    assert history is not None
    assert history.cut == days[-1].date()
    assert history.first_day == {site: days[0].date()}
    assert history.expired_events == sum(1 for _, p, offset in landed if offset < kept_from[p])
    assert history.expired_events == len(traffic) * 2 // 3  # the straggler is still on the log
    rebuild_with_history(spark, settings, history)
    swap(settings)

    # The expired days from the archive, the last from the log: every report as before.
    assert every_days_reports(agg) == before
    assert every_days_reports(raw) == before


def first_offsets_from(landed: list[Landed], moment: datetime) -> dict[int, int]:
    """Per partition, the offset of its first event at or after `moment` (its end if none)."""
    first = end_offsets(landed)
    for event, partition, offset in landed:
        if event.ts >= moment:
            first[partition] = min(first[partition], offset)
    return first


def delete_records(settings: Settings, before: dict[int, int]) -> None:
    """What retention does: the records below each partition's offset leave the log."""

    async def delete() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
        await admin.start()
        try:
            topic = settings.pageviews_topic
            deleted = {TopicPartition(topic, p): RecordsToDelete(o) for p, o in before.items() if o}
            await admin.delete_records(deleted, timeout_ms=30_000)
        finally:
            await admin.close()

    asyncio.run(delete())
