"""Many clients at once against the real collector process: every 202 is exactly one
message on the log, none lost, none doubled."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from aiokafka import AIOKafkaConsumer

from storage.client import connect
from storage.sites import add_site
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.collector_server import running_collector
from tests.fixtures.ports import free_port

pytestmark = pytest.mark.integration

SITE = "concurrent.example.com"
EVENTS = 10_000
CLIENTS = 200
UA = "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0"


async def post_all(url: str) -> list[int]:
    """EVENTS page views from CLIENTS concurrent connections (distinct client IPs)."""
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    semaphore = asyncio.Semaphore(CLIENTS)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:

        async def post(index: int) -> int:
            async with semaphore:
                response = await client.post(
                    f"{url}/api/event",
                    content=json.dumps({"d": SITE, "u": f"https://{SITE}/p/{index % 50}"}),
                    headers={"User-Agent": UA, "X-Forwarded-For": f"203.0.{index % 200}.{1 + index % 250}"},
                )
                return response.status_code

        return await asyncio.gather(*(post(index) for index in range(EVENTS)))


async def messages_for_site(settings: Settings) -> list[PageViewEvent]:
    consumer = AIOKafkaConsumer(
        settings.pageviews_topic, bootstrap_servers=settings.kafka_bootstrap, auto_offset_reset="earliest"
    )
    await consumer.start()
    events = []
    try:
        while batch := await consumer.getmany(timeout_ms=3000, max_records=10_000):
            for records in batch.values():
                events += [PageViewEvent.from_json(r.value) for r in records if SITE.encode() in r.value]
    finally:
        await consumer.stop()
    return events


def test_ten_thousand_concurrent_events_are_ten_thousand_unique_messages(settings: Settings) -> None:
    add_site(connect(settings), SITE)
    with running_collector(settings, free_port()) as url:
        statuses = asyncio.run(post_all(url))
    assert statuses.count(202) == EVENTS, {status: statuses.count(status) for status in set(statuses)}

    events = asyncio.run(messages_for_site(settings))
    assert len(events) == EVENTS
    assert len({event.event_id for event in events}) == EVENTS
