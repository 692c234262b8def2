"""The archiver on the real broker and the real ClickHouse engine."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from archiver.consumer import GROUP_ID, Archiver
from archiver.rows import EVENT_COLUMNS
from storage.client import connect
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.archive import archived
from tests.fixtures.events import make_events

pytestmark = pytest.mark.integration


async def produce(settings: Settings, values: list[tuple[bytes, bytes]]) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap, acks="all", enable_idempotence=True
    )
    await producer.start()
    try:
        await asyncio.gather(*[await producer.send(settings.pageviews_topic, v, key=k) for k, v in values])
    finally:
        await producer.stop()


async def archive_until(
    settings: Settings,
    site: str,
    expected: int,
    timeout_s: float = 240,
    rows: Callable[[Settings, str], int] = lambda settings, site: archived(settings, site)[0],
    settle_s: float = 2.0,
) -> Archiver:
    """Run an archiver until `rows` (by default all the site's) counts `expected` archived.
    `settle_s`: how long it runs on after that, so that a late duplicate, if any, lands before
    the test looks (0 for a test that checks no duplicates of the archiver's own: the archive
    stops changing when the archiver has stopped)."""
    archiver = Archiver(settings, connect(settings))
    task = asyncio.create_task(archiver.run())
    deadline = asyncio.get_running_loop().time() + timeout_s
    while rows(settings, site) < expected and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.5)
    await asyncio.sleep(settle_s)
    archiver.stop()
    await task
    return archiver


async def dead_letters(settings: Settings) -> list[dict]:
    consumer = AIOKafkaConsumer(
        settings.deadletter_topic, bootstrap_servers=settings.kafka_bootstrap, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        batch = await consumer.getmany(timeout_ms=5000)
    finally:
        await consumer.stop()
    return [orjson.loads(r.value) for records in batch.values() for r in records]


async def test_events_archived_once_and_malformed_ones_dead_lettered(settings: Settings) -> None:
    site = "archive.example.com"
    events = make_events(site, 2_500)
    malformed = [(b"k1", b"{not json"), (b"k2", orjson.dumps({"site": site, "url": "https://x/"}))]
    await produce(settings, [(e.key, e.to_json()) for e in events[:1000]] + malformed)
    await produce(settings, [(e.key, e.to_json()) for e in events[1000:]])

    await archive_until(settings, site, expected=2_500)

    assert archived(settings, site) == (2_500, 2_500)
    row = (
        connect(settings)
        .query(
            "SELECT props, path FROM events WHERE event_id = {id:UUID}", parameters={"id": events[1].event_id}
        )
        .result_rows[0]
    )
    assert row == ({"plan": "pro"}, "/p1")
    reasons = {letter["value"]: letter["reason"] for letter in await dead_letters(settings)}
    assert "{not json" in reasons
    assert any("event_id" in reason for reason in reasons.values())


async def test_restart_after_lost_offset_commit_archives_nothing_twice(settings: Settings) -> None:
    """The insert landed but the commit did not (a crash in between): the archive wins."""
    site = "recommit.example.com"
    events = make_events(site, 500)
    await produce(settings, [(e.key, e.to_json()) for e in events])
    await archive_until(settings, site, expected=500)

    # Rewind the group's committed offsets to the beginning, as if no commit had happened.
    rewind = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap, group_id=GROUP_ID, enable_auto_commit=False
    )
    await rewind.start()
    partitions = [TopicPartition(settings.pageviews_topic, p) for p in range(settings.pageviews_partitions)]
    rewind.assign(partitions)
    await rewind.commit({tp: 0 for tp in partitions})
    await rewind.stop()

    more = make_events(site, 100)
    await produce(settings, [(e.key, e.to_json()) for e in more])
    await archive_until(settings, site, expected=600)

    assert archived(settings, site) == (600, 600)


async def test_every_field_is_archived_as_it_was_on_the_log(settings: Settings) -> None:
    # Rows travel as JSON that ClickHouse parses: times keep their milliseconds, text its
    # quotes, backslashes, newlines and non-ASCII, maps their keys; nothing is defaulted.
    site = "fidelity.example.com"
    at = datetime(2026, 11, 21, 23, 59, 59, 987000, tzinfo=UTC)
    event = PageViewEvent(
        event_id=uuid4(), site=site, name="signup", ts=at, received_at=at + timedelta(milliseconds=5),
        url=f'https://{site}/caf\u00e9?q="x"\\y', hostname=site, path="/caf\u00e9/\u6f22\u5b57",
        referrer="https://news.ycombinator.com/item?id=1", referrer_domain="news.ycombinator.com",
        utm_source="newsletter", utm_medium="email", utm_campaign="launch\nday", utm_content="a\tb",
        utm_term="\u00fcber", visitor_id="00ff00ff00ff00ff", ip_hash="ff00ff00ff00ff00", country="CH",
        browser="Firefox", os="Linux", device="desktop", screen_width=2560, language="de-CH",
        props={"plan": "pro", 'quote"key': "line\nbreak", "\u00e9": ""},
        lcp_ms=2500, cls_milli=0, inp_ms=None, fcp_ms=120_000, ttfb_ms=0,  # 0 measured, None not
    )  # fmt: skip
    await produce(settings, [(event.key, event.to_json())])
    await archive_until(settings, site, expected=1)
    client = connect(settings)
    [row] = client.query(
        f"SELECT {', '.join(EVENT_COLUMNS)} FROM events WHERE site = {{site:String}}",
        parameters={"site": site},
    ).named_results()
    row |= {"ts": row["ts"].replace(tzinfo=UTC), "received_at": row["received_at"].replace(tzinfo=UTC)}
    assert PageViewEvent.model_validate(row) == event
