"""Many clients at once against the real collector process: every 202 is exactly one
message on the log, none lost, none doubled."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from archiver.audit import log_ranges
from loadgen.wire import Pool, SendError
from storage.client import connect
from storage.sites import add_site
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.collector_server import running_collector
from tests.fixtures.ports import free_port

pytestmark = pytest.mark.integration

SITE = "concurrent.example.com"
# 200 connections at once, 20 requests each: every interleaving the concurrency can produce.
# Sent with the load generator's lean HTTP/1.1 client (loadgen/wire.py): through httpx, the
# client's own work per request took nearly all of the test's 99 s on CI's 2 cores.
EVENTS = 4_000
CLIENTS = 200
UA = "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0"


async def post_all(url: str) -> list[int | str]:
    """EVENTS page views from CLIENTS concurrent keep-alive connections (distinct client IPs):
    each answer's status code, or the kind of failure where there was none."""
    pool = Pool(url, size=CLIENTS, timeout_s=60)

    async def post(index: int) -> int | str:
        headers = {"User-Agent": UA, "X-Forwarded-For": f"203.0.{index % 200}.{1 + index % 250}"}
        try:
            answer = await pool.post(
                "/api/event", {"d": SITE, "u": f"https://{SITE}/p/{index % 50}"}, headers
            )
        except SendError as error:
            return error.kind
        return answer.status_code

    try:
        return await asyncio.gather(*(post(index) for index in range(EVENTS)))
    finally:
        pool.close()


async def messages_for_site(settings: Settings, since: dict[TopicPartition, int]) -> list[PageViewEvent]:
    """The site's messages from `since` to the log's end."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap)
    await consumer.start()
    events = []
    try:
        consumer.assign(list(since))
        ends = await consumer.end_offsets(list(since))
        for partition, offset in since.items():
            consumer.seek(partition, offset)
        deadline = time.monotonic() + 120
        while any([await consumer.position(tp) < end for tp, end in ends.items()]):
            assert time.monotonic() < deadline, "the log's end not reached"
            batch = await consumer.getmany(timeout_ms=3000, max_records=10_000)
            for records in batch.values():
                events += [PageViewEvent.from_json(r.value) for r in records if SITE.encode() in r.value]
    finally:
        await consumer.stop()
    return events


def test_concurrent_events_are_each_one_unique_message_on_the_log(settings: Settings) -> None:
    add_site(connect(settings), SITE)
    # Where this test's messages begin: not the whole session's log (other tests wrote
    # hundreds of thousands of messages before this one).
    topic = settings.pageviews_topic
    since = {TopicPartition(topic, p): end for p, (_, end) in asyncio.run(log_ranges(settings)).items()}
    with running_collector(settings, free_port()) as url:
        statuses = asyncio.run(post_all(url))
    assert statuses.count(202) == EVENTS, {status: statuses.count(status) for status in set(statuses)}

    events = asyncio.run(messages_for_site(settings, since))
    assert len(events) == EVENTS
    assert len({event.event_id for event in events}) == EVENTS
