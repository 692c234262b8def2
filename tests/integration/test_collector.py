"""The collector against the real broker: what is accepted is on the log, what is not never is."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from starlette.testclient import TestClient

from collector.app import build_app
from collector.event_log import KafkaEventLog
from collector.salts import DailySalts
from storage.client import connect
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.ports import free_port

pytestmark = pytest.mark.integration

BROWSER_UA = (
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 Version/18.1 Safari/605.1.15"
)


@pytest.fixture(scope="module")
def collector(settings: Settings) -> Iterator[TestClient]:
    app = build_app(settings, KafkaEventLog(settings), DailySalts(connect(settings)))
    with TestClient(app, client=("127.0.0.1", 40000)) as client:
        yield client


def log_end_offsets(settings: Settings) -> dict[int, int]:
    async def read() -> dict[int, int]:
        consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap)
        await consumer.start()
        try:
            partitions = [
                TopicPartition(settings.pageviews_topic, p) for p in range(settings.pageviews_partitions)
            ]
            ends = await consumer.end_offsets(partitions)
            return {tp.partition: offset for tp, offset in ends.items()}
        finally:
            await consumer.stop()

    return asyncio.run(read())


def events_on_log_for(settings: Settings, site: str) -> list[PageViewEvent]:
    async def read() -> list[PageViewEvent]:
        consumer = AIOKafkaConsumer(
            settings.pageviews_topic, bootstrap_servers=settings.kafka_bootstrap, auto_offset_reset="earliest"
        )
        await consumer.start()
        events = []
        try:
            while batch := await consumer.getmany(timeout_ms=2000):
                for records in batch.values():
                    events += [PageViewEvent.from_json(r.value) for r in records if site.encode() in r.value]
        finally:
            await consumer.stop()
        return events

    return asyncio.run(read())


def test_beacon_pageview_is_on_the_log_enriched_and_without_the_ip(
    collector: TestClient, settings: Settings
) -> None:
    site = "beacon.example.com"
    response = collector.post(
        "/api/event",
        content=json.dumps(
            {
                "d": site,
                "u": f"https://{site}/pricing?utm_source=newsletter",
                "r": "https://news.ycombinator.com/",
                "w": 1440,
            }
        ),
        headers={
            "Content-Type": "text/plain",
            "User-Agent": BROWSER_UA,
            "X-Forwarded-For": "203.0.113.50",
            "Accept-Language": "en-GB,en;q=0.8",
        },
    )
    assert response.status_code == 202

    [event] = events_on_log_for(settings, site)
    assert (event.site, event.name, event.path, event.hostname) == (site, "pageview", "/pricing", site)
    assert (event.referrer_domain, event.utm_source, event.screen_width, event.language) == (
        "news.ycombinator.com",
        "newsletter",
        1440,
        "en-GB",
    )
    assert len(event.visitor_id) == 16 and len(event.ip_hash) == 16
    assert "203.0.113.50" not in event.to_json().decode()


@pytest.mark.parametrize(
    ("body", "status", "named"),
    [
        (b'{"url": "https://a.example.com/"}', 400, "site"),
        (b'{"site": "a.example.com", "url": "ftp://a.example.com/"}', 400, "url"),
        (
            b'{"site": "a.example.com", "url": "https://a.example.com/", "props": {"k": {"x": "y"}}}',
            400,
            "props",
        ),
        (b"not json", 400, "body"),
        (b"\xff\xfe\x00garbage", 400, "body"),
        (b"[1, 2]", 400, "body"),
        (
            b'{"site": "a.example.com", "url": "https://a.example.com/", "p": {"k": "'
            + b"x" * 70_000
            + b'"}}',
            413,
            "body",
        ),
    ],
)
def test_bad_input_gets_a_clear_error_and_never_reaches_the_log(
    collector: TestClient, settings: Settings, body: bytes, status: int, named: str
) -> None:
    before = log_end_offsets(settings)
    response = collector.post("/api/event", content=body, headers={"Content-Type": "text/plain"})
    assert response.status_code == status
    assert named in response.json()["error"]
    assert log_end_offsets(settings) == before


def test_log_unreachable_gets_503_with_retry_after(settings: Settings) -> None:
    unreachable = settings.model_copy(update={"kafka_bootstrap": f"127.0.0.1:{free_port()}"})
    event_log = KafkaEventLog(unreachable, send_timeout_s=2)
    app = build_app(unreachable, event_log, DailySalts(connect(settings)))
    # The producer cannot even start without a broker: the app must still answer, with 503.
    with TestClient(app, client=("127.0.0.1", 40001)) as client:
        response = client.post(
            "/api/event", json={"site": "down.example.com", "url": "https://down.example.com/"}
        )
    assert response.status_code == 503
    assert response.headers["Retry-After"]


def test_tracker_snippet_is_served(collector: TestClient) -> None:
    response = collector.get("/tracker.js")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/javascript")
    assert "sendBeacon" in response.text
