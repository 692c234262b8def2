"""The archiver's gaplessness rule, record by record (archiver/consumer.py, Batch): a record is
taken only if its offset is its partition's next one. The race that delivers a record from
past the expected offset (a fetch racing the seek after a rebalance) is rare in a real run,
so the rule itself is pinned here; tests/integration/test_archiver_pause.py and the pause
fault run drive the real archiver into it."""

from __future__ import annotations

from aiokafka import ConsumerRecord, TopicPartition

from archiver.consumer import Batch, Jump
from tests.fixtures.events import make_events

EVENTS = make_events("batch.example.com", 20)


def record(partition: int, offset: int) -> ConsumerRecord:
    value = EVENTS[offset % len(EVENTS)].to_json()
    return ConsumerRecord("pageviews", partition, offset, 0, 0, b"k", value, None, 1, len(value), [])


def test_contiguous_records_are_taken_and_repeats_skipped() -> None:
    batch, expected = Batch(), {0: 5}
    for offset in (5, 6, 6, 7, 3):
        assert batch.add(record(0, offset), expected) is None
    assert len(batch) == 3 and batch.skipped == 2
    assert expected == {0: 8}
    assert batch.next_offsets == {TopicPartition("pageviews", 0): 8}


def test_a_record_past_the_next_offset_drops_the_partition_and_says_where_to_reread() -> None:
    batch, expected = Batch(), {0: 5, 1: 10}
    for offset in (5, 6, 7):
        batch.add(record(0, offset), expected)
    batch.add(record(1, 10), expected)

    jump = batch.add(record(0, 10_001), expected)

    assert jump == Jump(TopicPartition("pageviews", 0), expected=8, received=10_001, resume=5)
    # Partition 0's run is gone and will be read again from 5; partition 1's is kept.
    assert expected == {0: 5, 1: 11}
    assert list(batch.rows) == [1] and len(batch) == 1
    assert batch.next_offsets == {TopicPartition("pageviews", 1): 11}
    assert batch.add(record(0, 5), expected) is None and expected[0] == 6


def test_a_partition_without_a_known_position_takes_nothing() -> None:
    batch, expected = Batch(), {}
    assert batch.add(record(2, 0), expected) is None
    assert len(batch) == 0 and batch.skipped == 1
