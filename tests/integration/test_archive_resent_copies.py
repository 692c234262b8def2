"""Re-sent events on the real broker and store (archiver/copies.py): copies of an
event — its sender's same event_id, at other offsets, in other partitions, received later —
are archived once, their offsets accounted for in `archive_duplicates`, and the audit's hole
repair follows the same rule."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from aiokafka import AIOKafkaProducer

from archiver.audit import PartitionAudit, audit_archive, verify
from storage.client import connect
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.archive import archived
from tests.fixtures.events import make_events
from tests.integration.test_archiver import archive_until

pytestmark = pytest.mark.integration


async def produce_to(settings: Settings, placed: list[tuple[int, PageViewEvent]]) -> None:
    """Each event to the given partition: copies land wherever a test wants them."""
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap, acks="all", enable_idempotence=True
    )
    await producer.start()
    try:
        sends = [
            await producer.send(settings.pageviews_topic, e.to_json(), key=e.key, partition=p)
            for p, e in placed
        ]
        await asyncio.gather(*sends)
    finally:
        await producer.stop()


def resent(event: PageViewEvent, after: timedelta, **changes: object) -> PageViewEvent:
    """The same event sent again: received later, perhaps from elsewhere (another visitor key)."""
    return event.model_copy(update={"received_at": event.received_at + after, **changes})


def copies_recorded(settings: Settings, site: str) -> dict[tuple[int, int], tuple[int, int]]:
    """The site's copies in archive_duplicates: their position → the first copy's position."""
    rows = (
        connect(settings)
        .query(
            "SELECT kafka_partition, kafka_offset, first_kafka_partition, first_kafka_offset "
            "FROM archive_duplicates FINAL WHERE site = {site:String}",
            parameters={"site": site},
        )
        .result_rows
    )
    return {(p, o): (fp, fo) for p, o, fp, fo in rows}


def audits(settings: Settings, fix: bool) -> list[PartitionAudit]:
    """A full audit: every offset, not only those above the clean marks."""
    return asyncio.run(audit_archive(settings, connect(settings), fix=fix, full=True))


def test_a_resent_event_is_archived_once_in_any_partition_and_batch(settings: Settings) -> None:
    site, elsewhere = "resent.example.com", "resent-elsewhere.example.com"
    events = make_events(site, 300)
    # Copies in the same batch as their first (another partition, a second later), and a copy
    # of a copy: the sender retried twice.
    now = [(i % 3, e) for i, e in enumerate(events)]
    now += [((i + 1) % 3, resent(e, timedelta(seconds=1))) for i, e in enumerate(events[:20])]
    now += [(i % 3, resent(e, timedelta(seconds=2))) for i, e in enumerate(events[:5])]
    asyncio.run(produce_to(settings, now))
    asyncio.run(archive_until(settings, site, expected=300))

    # Copies in a later batch: hours later, after the daily salt rotated (another visitor key).
    later = [(2, resent(e, timedelta(hours=5), visitor_id="rotated" + e.visitor_id)) for e in events[20:40]]
    # The same event_ids sent for another site: other events, never suppressed.
    other = [(0, e.model_copy(update={"site": elsewhere})) for e in events[:10]]
    asyncio.run(produce_to(settings, later + other))
    asyncio.run(archive_until(settings, elsewhere, expected=10))

    assert archived(settings, site) == (300, 300)
    assert archived(settings, elsewhere) == (10, 10)
    copies = copies_recorded(settings, site)
    assert len(copies) == 20 + 5 + 20
    # Every copy points at the row that is archived, which carries the same event_id.
    firsts = connect(settings).query(
        "SELECT count() FROM events WHERE site = {site:String} "
        "AND (kafka_partition, kafka_offset) IN {firsts:Array(Tuple(UInt16, UInt64))}",
        parameters={"site": site, "firsts": list(set(copies.values()))},
    )
    assert firsts.result_rows[0][0] == 40
    # The copies' offsets are accounted for: no hole, nothing twice.
    for audit in audits(settings, fix=False):
        assert (audit.holes, audit.duplicates) == ([], 0), audit
    assert sum(audit.copies for audit in audits(settings, fix=False)) >= 45


def test_a_copy_received_after_the_window_is_another_event(settings: Settings) -> None:
    site = "resent-late.example.com"
    [event] = make_events(site, 1)
    late = resent(event, timedelta(seconds=settings.dedup_window_s + 1))
    asyncio.run(produce_to(settings, [(0, event), (1, late)]))
    asyncio.run(archive_until(settings, site, expected=2))
    assert archived(settings, site) == (2, 1)
    assert copies_recorded(settings, site) == {}


def test_holes_holding_a_copy_or_its_first_are_repaired_by_the_same_rule(settings: Settings) -> None:
    site = "resent-hole.example.com"
    events = make_events(site, 100)
    # Each copy right behind its first, so that losing them leaves holes below the archive's end.
    placed = [(0, e) for e in events[:30] for e in (e, resent(e, timedelta(seconds=3)))]
    placed += [(0, e) for e in events[30:]]
    asyncio.run(produce_to(settings, placed))
    asyncio.run(archive_until(settings, site, expected=100))
    copies = copies_recorded(settings, site)
    assert len(copies) == 30

    # Lose both the record of the copies and some first copies' rows (whose ids stay indexed).
    client = connect(settings)
    where = "(kafka_partition, kafka_offset) IN {rows:Array(Tuple(UInt16, UInt64))}"
    for table, rows in (("archive_duplicates", list(copies)), ("events", list(copies.values())[:10])):
        client.command(
            f"DELETE FROM {table} WHERE {where}",
            parameters={"rows": rows},
            settings={"mutations_sync": 2},
        )
    assert archived(settings, site) == (90, 90)

    report = verify(settings, full=True)  # below the mark the archiver's own audit may have set

    assert sum(partition.missing for partition in report.partitions) >= 40
    assert archived(settings, site) == (100, 100)
    assert copies_recorded(settings, site) == copies
    assert report.repeated_ids == 0
    for audit in audits(settings, fix=False):
        assert (audit.holes, audit.duplicates) == ([], 0), audit
