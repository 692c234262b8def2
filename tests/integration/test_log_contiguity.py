"""The archive's gaplessness rests on one property of `pageviews`: each partition's offsets
are contiguous, so "the next offset" is always "this one + 1" (archiver/consumer.py, Batch).
It holds because the collector's producer is idempotent but not transactional (commit
markers would take offsets) and the topic is not compacted. These tests fail if either
changes, before the archiver starts refusing records beyond a missing offset."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from collector.event_log import KafkaEventLog
from tally.settings import Settings
from tally.topics import topic_config
from tests.fixtures.events import make_events

pytestmark = pytest.mark.integration


def test_pageviews_topic_deletes_and_never_compacts(settings: Settings) -> None:
    config = asyncio.run(topic_config(settings, settings.pageviews_topic))
    assert config["cleanup.policy"] == "delete"


async def test_offsets_the_collector_writes_are_contiguous(settings: Settings) -> None:
    """Written the collector's way, in several appends, each partition's offsets run without a gap."""
    topic = settings.pageviews_topic
    partitions = [TopicPartition(topic, p) for p in range(settings.pageviews_partitions)]
    reader = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, enable_auto_commit=False)
    await reader.start()
    try:
        starts = await reader.end_offsets(partitions)
        event_log = KafkaEventLog(settings)
        await event_log.start()
        try:
            # Concurrent appends, as concurrent requests make them: they share record batches.
            appends = [make_events("contiguous.example.com", 50) for _ in range(5)]
            await asyncio.gather(
                *(event_log.append([(e.key, e.to_json()) for e in events]) for events in appends)
            )
        finally:
            await event_log.stop()
        ends = await reader.end_offsets(partitions)
        reader.assign(partitions)
        for tp in partitions:
            reader.seek(tp, starts[tp])
        offsets: dict[TopicPartition, list[int]] = {tp: [] for tp in partitions}
        while sum(map(len, offsets.values())) < sum(ends[tp] - starts[tp] for tp in partitions):
            batch = await reader.getmany(timeout_ms=5000)
            assert batch, f"the log holds fewer records than its offsets span: {offsets}"
            for tp, records in batch.items():
                offsets[tp] += [record.offset for record in records if record.offset < ends[tp]]
    finally:
        await reader.stop()
    assert sum(ends[tp] - starts[tp] for tp in partitions) == 250
    assert offsets == {tp: list(range(starts[tp], ends[tp])) for tp in partitions}
