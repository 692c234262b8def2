"""The collector against the real broker and store: what is accepted is on the log, what
is not never is, and every answer has the status DESIGN.md gives it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from starlette.testclient import TestClient

from collector.app import CollectorParts, build_app, production_parts
from collector.blocklist import Blocklist
from collector.enrichment import keyed_hash
from collector.event_log import KafkaEventLog
from storage.client import connect
from storage.sites import add_site
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.ports import free_port

pytestmark = pytest.mark.integration

BROWSER_UA = (
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 Version/18.1 Safari/605.1.15"
)
IPHONE_UA = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/18.1 Mobile/15E148 Safari/604.1"
)
SITES = [
    "beacon.example.com",
    "bad.example.com",
    "batch.example.com",
    "bots.example.com",
    "blocked.example.com",
    "engagement.example.com",
]


@pytest.fixture(scope="module")
def parts(settings: Settings) -> CollectorParts:
    client = connect(settings)
    for site in SITES:
        add_site(client, site)
    return production_parts(settings)


@pytest.fixture(scope="module")
def collector(settings: Settings, parts: CollectorParts) -> Iterator[TestClient]:
    with TestClient(build_app(settings, parts), client=("127.0.0.1", 40000)) as client:
        yield client


def log_end_offsets(settings: Settings) -> dict[int, int]:
    async def read() -> dict[int, int]:
        consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap)
        await consumer.start()
        try:
            partitions = [
                TopicPartition(settings.pageviews_topic, p) for p in range(settings.pageviews_partitions)
            ]
            return {tp.partition: offset for tp, offset in (await consumer.end_offsets(partitions)).items()}
        finally:
            await consumer.stop()

    return asyncio.run(read())


def events_on_log_for(settings: Settings, site: str) -> list[PageViewEvent]:
    """The site's events on the log, read up to the log's end as it stood once the partitions were
    assigned (not until a poll comes back empty: under load the first fetch alone can take longer
    than a poll waits, and the read then found nothing)."""

    async def read() -> list[PageViewEvent]:
        consumer = AIOKafkaConsumer(
            settings.pageviews_topic, bootstrap_servers=settings.kafka_bootstrap, auto_offset_reset="earliest"
        )
        await consumer.start()
        events: list[PageViewEvent] = []

        async def poll() -> None:
            batch = await consumer.getmany(timeout_ms=500, max_records=5000)
            for records in batch.values():
                events.extend(PageViewEvent.from_json(r.value) for r in records if site.encode() in r.value)

        try:
            while not consumer.assignment():
                await poll()
            ends = await consumer.end_offsets(list(consumer.assignment()))
            while any([await consumer.position(tp) < end for tp, end in ends.items()]):
                await poll()
        finally:
            await consumer.stop()
        return events

    return asyncio.run(read())


def post_beacon(collector: TestClient, body: dict, **headers: str) -> int:
    response = collector.post(
        "/api/event",
        content=json.dumps(body),
        headers={"Content-Type": "text/plain", "User-Agent": BROWSER_UA, **headers},
    )
    return response.status_code


def test_beacon_pageview_is_on_the_log_enriched_and_without_the_ip(
    collector: TestClient, settings: Settings
) -> None:
    site = "beacon.example.com"
    status = post_beacon(
        collector,
        {
            "d": site,
            "u": f"https://{site}/pricing?utm_source=newsletter",
            "r": "https://news.ycombinator.com/",
            "w": 390,
        },
        **{"User-Agent": IPHONE_UA, "X-Forwarded-For": "81.2.69.142", "Accept-Language": "en-GB,en;q=0.8"},
    )
    assert status == 202

    [event] = events_on_log_for(settings, site)
    assert (event.site, event.name, event.path, event.hostname) == (site, "pageview", "/pricing", site)
    assert (event.referrer_domain, event.utm_source, event.screen_width, event.language) == (
        "news.ycombinator.com",
        "newsletter",
        390,
        "en-GB",
    )
    assert (event.browser, event.os, event.device, event.country) == ("Safari", "iOS", "mobile", "GB")
    assert len(event.visitor_id) == 16 and len(event.ip_hash) == 16
    assert "81.2.69.142" not in event.to_json().decode()


@pytest.mark.parametrize(
    ("body", "status", "named"),
    [
        (b'{"url": "https://bad.example.com/"}', 400, "site"),
        (b'{"site": "unregistered.example.com", "url": "https://unregistered.example.com/"}', 400, "site"),
        (b'{"site": "bad.example.com", "url": "ftp://bad.example.com/"}', 400, "url"),
        (
            b'{"site": "bad.example.com", "url": "https://bad.example.com/", "n": "' + b"x" * 121 + b'"}',
            400,
            "n",
        ),
        (
            b'{"site": "bad.example.com", "url": "https://bad.example.com/", "props": {"k": {"x": "y"}}}',
            400,
            "props",
        ),
        (
            b'{"d": "bad.example.com", "u": "https://bad.example.com/", "n": "engagement", "sd": -1}',
            400,
            "sd",
        ),
        (
            b'{"d": "bad.example.com", "u": "https://bad.example.com/", "n": "engagement", "sd": 101}',
            400,
            "sd",
        ),
        (b'{"d": "bad.example.com", "u": "https://bad.example.com/", "n": "engagement", "e": -5}', 400, "e"),
        (
            b'{"d": "bad.example.com", "u": "https://bad.example.com/", "n": "engagement", "e": 86400001}',
            400,
            "e",
        ),
        (
            b'{"d": "bad.example.com", "u": "https://bad.example.com/", "scroll_depth": "deep"}',
            400,
            "scroll_depth",
        ),
        (b'{"site": "bad.example.com", "url": "https://bad.example.com/", "w": 70000}', 400, "w"),
        (
            b'{"d": "bad.example.com", "u": "https://bad.example.com/", "n": "engagement", "lcp": 120001}',
            400,
            "lcp",
        ),
        (
            b'{"d": "bad.example.com", "u": "https://bad.example.com/", "n": "engagement", "cls": 101}',
            400,
            "cls",
        ),
        (b"not json", 400, "body"),
        (b"\xff\xfe\x00garbage", 400, "body"),
        (b"[1, 2]", 400, "body"),
        (
            b'{"site": "bad.example.com", "url": "https://x/", "p": {"k": "' + b"x" * 70_000 + b'"}}',
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


def test_bots_get_202_but_are_dropped_and_counted(collector: TestClient, settings: Settings) -> None:
    site = "bots.example.com"
    before = log_end_offsets(settings)
    googlebot = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
    assert post_beacon(collector, {"d": site, "u": f"https://{site}/"}, **{"User-Agent": googlebot}) == 202
    assert post_beacon(collector, {"d": site, "u": f"https://{site}/"}, **{"User-Agent": ""}) == 202
    assert log_end_offsets(settings) == before
    assert "tally_bots_dropped_total 2.0" in collector.get("/metrics").text


def test_batch_needs_the_ingest_key(collector: TestClient, settings: Settings) -> None:
    batch = [{"site": "batch.example.com", "url": "https://batch.example.com/"}]
    assert collector.post("/api/events", json=batch).status_code == 401
    wrong = collector.post("/api/events", json=batch, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert "authorization" in wrong.json()["error"]


def test_engagement_events_carry_scroll_depth_and_engaged_time_on_the_log(
    collector: TestClient, settings: Settings
) -> None:
    site = "engagement.example.com"
    # As Plausible's tracker sends it (short keys, props as a JSON string)...
    beacon = {"n": "engagement", "d": site, "u": f"https://{site}/docs", "sd": 64, "e": 12_345, "p": "{}"}
    assert post_beacon(collector, beacon) == 202
    # ... and as a server-side batch with the native names.
    batch = [{"name": "engagement", "site": site, "url": f"https://{site}/blog", "scroll_depth": 100,
              "engagement_ms": 86_400_000, "ip": "5.9.1.1", "user_agent": BROWSER_UA}]  # fmt: skip
    key = settings.resolved_ingest_key()
    response = collector.post("/api/events", json=batch, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 202
    events = sorted(events_on_log_for(settings, site), key=lambda e: e.path)
    assert [(e.name, e.path, e.scroll_depth, e.engagement_ms) for e in events] == [
        ("engagement", "/blog", 100, 86_400_000),
        ("engagement", "/docs", 64, 12_345),
    ]


def test_batch_honours_explicit_time_and_ip(collector: TestClient, settings: Settings) -> None:
    site = "batch.example.com"
    key = settings.resolved_ingest_key()
    yesterday = datetime.now(UTC) - timedelta(days=1)
    batch = [
        {
            "site": site,
            "url": f"https://{site}/a",
            "ts": yesterday.isoformat(),
            "ip": "5.9.1.1",
            "user_agent": IPHONE_UA,
        },
        {"site": site, "url": f"https://{site}/b", "ts": int(yesterday.timestamp() * 1000), "ip": "41.1.1.1"},
    ]
    response = collector.post("/api/events", json=batch, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 202
    assert response.json() == {"accepted": 2, "dropped": {}}
    events = sorted(events_on_log_for(settings, site), key=lambda e: e.path)
    assert [(e.path, e.country, e.device) for e in events] == [
        ("/a", "DE", "mobile"),
        ("/b", "ZA", "desktop"),
    ]
    assert all(abs(e.ts - yesterday) < timedelta(seconds=1) for e in events)


@pytest.mark.parametrize(
    ("batch", "named"),
    [
        ([{"site": "batch.example.com", "url": "https://batch.example.com/", "ip": "nope"}], "[0].ip"),
        (
            [{"site": "batch.example.com", "url": "https://batch.example.com/"}, {"url": "https://x/"}],
            "[1].site",
        ),
        ([{"site": "batch.example.com", "url": "https://b/", "ts": "2999-01-01T00:00:00Z"}], "[0].ts"),
        ([{"site": "other.example.com", "url": "https://other.example.com/"}], "[0].site"),
        ([{"site": "batch.example.com", "url": "https://batch.example.com/"}] * 1001, "body"),
        ({"site": "batch.example.com"}, "body"),
        ([{"site": "batch.example.com", "url": "https://b/", "engagement_ms": -1}], "[0].engagement_ms"),
        ([{"site": "batch.example.com", "url": "https://b/", "e": 90_000_000}], "[0].e"),
        ([{"site": "batch.example.com", "url": "https://b/", "scroll_depth": 150}], "[0].scroll_depth"),
    ],
)
def test_bad_batch_is_refused_whole_naming_the_event_and_field(
    collector: TestClient, settings: Settings, batch: object, named: str
) -> None:
    before = log_end_offsets(settings)
    key = settings.resolved_ingest_key()
    response = collector.post("/api/events", json=batch, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 400
    assert named in response.json()["error"]
    assert log_end_offsets(settings) == before


def test_blocklisted_client_gets_429_until_the_tombstone(
    collector: TestClient, parts: CollectorParts, settings: Settings
) -> None:
    site = "blocked.example.com"
    client_ip = "198.51.100.77"
    ip_hash = keyed_hash(parts.salts.for_time(datetime.now(UTC)), client_ip)
    until = (datetime.now(UTC) + timedelta(hours=1)).isoformat()

    def status() -> int:
        return post_beacon(collector, {"d": site, "u": f"https://{site}/"}, **{"X-Forwarded-For": client_ip})

    publish_block(settings, ip_hash, orjson.dumps({"until": until, "count": 101}))
    assert wait_for(lambda: status() == 429), "a blocklisted client must get 429"
    assert (
        post_beacon(collector, {"d": site, "u": f"https://{site}/"}, **{"X-Forwarded-For": "198.51.100.78"})
        == 202
    )

    publish_block(settings, ip_hash, None)
    assert wait_for(lambda: status() == 202), "a tombstone must lift the block"


def publish_block(settings: Settings, ip_hash: str, value: bytes | None) -> None:
    """What the rate-limit job publishes: a block for `ip_hash`, or (None) the tombstone."""

    async def publish() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
        await producer.start()
        try:
            await producer.send_and_wait(settings.blocklist_topic, value, key=ip_hash.encode())
        finally:
            await producer.stop()

    asyncio.run(publish())


def wait_for(check: object, timeout_s: float = 30) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.3)
    return False


def test_cors_only_on_the_beacon_endpoint(collector: TestClient) -> None:
    preflight = collector.options(
        "/api/event", headers={"Origin": "https://site.example", "Access-Control-Request-Method": "POST"}
    )
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == "*"
    headers = {"Content-Type": "text/plain", "User-Agent": BROWSER_UA, "Origin": "https://site.example"}
    site = "beacon.example.com"
    # Every beacon's answer, the accepted ones (one 202 made once) as the refused ones.
    for body, status in (
        ({"d": site, "u": f"https://{site}/cors"}, 202),
        ({"d": site, "u": "ftp://nope"}, 400),
    ):
        beacon = collector.post("/api/event", content=json.dumps(body), headers=headers)
        assert (beacon.status_code, beacon.headers["access-control-allow-origin"]) == (status, "*")
        assert beacon.headers["content-length"] == str(len(beacon.content))
    batch = collector.post("/api/events", json=[], headers={"Origin": "https://site.example"})
    assert "access-control-allow-origin" not in batch.headers


def test_metrics_count_accepted_and_rejected_by_reason(collector: TestClient) -> None:
    text = collector.get("/metrics").text
    assert "tally_events_accepted_total" in text
    assert 'tally_events_rejected_total{reason="invalid"}' in text
    assert 'tally_events_rejected_total{reason="unknown_site"}' in text
    assert 'tally_request_duration_seconds_bucket{endpoint="event"' in text


def test_tracker_snippet_is_cached_with_an_etag(collector: TestClient) -> None:
    response = collector.get("/tracker.js")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/javascript")
    assert "max-age=" in response.headers["cache-control"]
    revalidated = collector.get("/tracker.js", headers={"If-None-Match": response.headers["etag"]})
    assert revalidated.status_code == 304
    assert revalidated.content == b""


def test_log_unreachable_gets_503_with_retry_after(settings: Settings, parts: CollectorParts) -> None:
    unreachable = settings.model_copy(update={"kafka_bootstrap": f"127.0.0.1:{free_port()}"})
    # The producer cannot even start without a broker: the app must still answer, with 503.
    down = CollectorParts(
        event_log=KafkaEventLog(unreachable, send_timeout_s=2),
        salts=parts.salts,
        sites=parts.sites,
        blocklist=Blocklist(unreachable),
        countries=parts.countries,
    )
    with TestClient(build_app(unreachable, down), client=("127.0.0.1", 40001)) as client:
        response = client.post(
            "/api/event",
            json={"site": "beacon.example.com", "url": "https://beacon.example.com/"},
            headers={"User-Agent": BROWSER_UA},
        )
        assert client.get("/healthz").json()["kafka"] == "reconnecting"
    assert response.status_code == 503
    assert response.headers["Retry-After"]
