"""The archiver frozen (SIGSTOP) for longer than its consumer session while events keep
arriving, then thawed: the broker has expired it, it rejoins its group, and the archive
still holds every offset of every partition, without a hole (issue 19)."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from storage.archiver import SYNTHETIC_PARTITION
from storage.client import connect
from tally.settings import Settings
from tests.fixtures.events import make_events
from tests.integration.test_archiver import produce
from tests.integration.test_archiver_crash import archiver_process, wait_until

pytestmark = pytest.mark.integration

SITE = "pause.example.com"
BEFORE_PAUSE = 30_000
DURING_PAUSE = 20_000
SESSION_TIMEOUT_S = 6.0  # the broker's minimum
PAUSE_S = 10.0


async def log_ends(settings: Settings) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap)
    await consumer.start()
    try:
        topic, count = settings.pageviews_topic, settings.pageviews_partitions
        ends = await consumer.end_offsets([TopicPartition(topic, p) for p in range(count)])
        return {tp.partition: end for tp, end in ends.items()}
    finally:
        await consumer.stop()


def archived_ranges(settings: Settings) -> dict[int, tuple[int, int, int]]:
    """Per partition: (first offset, last offset, offsets held) in the archive."""
    rows = (
        connect(settings)
        .query(
            "SELECT kafka_partition, min(kafka_offset), max(kafka_offset), uniqExact(kafka_offset) "
            "FROM events WHERE kafka_partition != {synthetic:UInt16} GROUP BY kafka_partition",
            parameters={"synthetic": SYNTHETIC_PARTITION},
        )
        .result_rows
    )
    return {int(p): (int(low), int(high), int(held)) for p, low, high, held in rows}


def archived_site(settings: Settings) -> tuple[int, int]:
    row = (
        connect(settings)
        .query(
            "SELECT count(), uniqExact(event_id) FROM events WHERE site = {site:String}",
            parameters={"site": SITE},
        )
        .result_rows[0]
    )
    return int(row[0]), int(row[1])


def test_archiver_paused_past_its_session_leaves_no_hole(settings: Settings) -> None:
    settings = settings.model_copy(update={"archiver_session_timeout_s": SESSION_TIMEOUT_S})
    events = make_events(SITE, BEFORE_PAUSE + DURING_PAUSE)
    asyncio.run(produce(settings, [(e.key, e.to_json()) for e in events[:BEFORE_PAUSE]]))

    with archiver_process(settings) as archiver:
        # Freeze it mid-stream: batches archived, the next one being collected.
        wait_until(lambda: archived_site(settings)[0] > 0, timeout_s=120)
        os.kill(archiver.pid, signal.SIGSTOP)
        frozen_at = time.monotonic()
        asyncio.run(produce(settings, [(e.key, e.to_json()) for e in events[BEFORE_PAUSE:]]))
        time.sleep(max(0.0, frozen_at + PAUSE_S - time.monotonic()))
        os.kill(archiver.pid, signal.SIGCONT)

        ends = asyncio.run(log_ends(settings))
        caught_up = lambda: all(  # noqa: E731
            archived_ranges(settings).get(p, (0, -1, 0))[1] + 1 >= end for p, end in ends.items() if end
        )
        wait_until(caught_up, timeout_s=120)
        time.sleep(3)  # a duplicate, if any, would land now
        ranges = archived_ranges(settings)

    holes = {p: (high - low + 1) - held for p, (low, high, held) in ranges.items() if high - low + 1 != held}
    assert holes == {}, f"offsets missing per partition: {holes}; archive {ranges}, log ends {ends}"
    assert archived_site(settings) == (BEFORE_PAUSE + DURING_PAUSE,) * 2
