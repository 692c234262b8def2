"""The log as the archive audit sees it: per partition of `pageviews`, the offsets Kafka still
retains, and the offset the archiver's consumer group last committed — what the archiver said it
had written. Every offset below the committed one was archived once (the archiver commits only
after a batch's inserts landed, archiver/consumer.py), so one the archive lacks there was lost,
even above the highest offset the archive still holds."""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import UnknownTopicOrPartitionError

from tally.settings import Settings

#: The archiver's consumer group: its committed offsets are the archiver's word.
GROUP_ID = "tally-archiver"


async def log_ranges(settings: Settings) -> dict[int, tuple[int, int]]:
    """Per partition of `pageviews`: (earliest retained offset, next offset to be written)."""
    topic = settings.pageviews_topic
    partitions = [TopicPartition(topic, p) for p in await topic_partitions(settings)]
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        starts = await consumer.beginning_offsets(partitions)
        ends = await consumer.end_offsets(partitions)
    finally:
        await consumer.stop()
    return {tp.partition: (starts[tp], ends[tp]) for tp in partitions}


async def topic_partitions(settings: Settings) -> list[int]:
    """The partitions `pageviews` has, as the broker describes it. A fresh consumer knows no
    topic yet, and a guessed count asks for partitions the topic may lack (and waits for them)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        # Every topic's metadata: asking for one by name may have the broker create it.
        described = await admin.describe_topics()
    finally:
        await admin.close()
    topic = settings.pageviews_topic
    for found in described:
        if found["topic"] == topic and found["partitions"]:
            return sorted(partition["partition"] for partition in found["partitions"])
    raise UnknownTopicOrPartitionError(f"no topic {topic}")


async def committed_offsets(settings: Settings, partitions: list[int]) -> dict[int, int]:
    """Per partition, the offset the archiver's group committed (the next one it would read);
    partitions it never committed are left out."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        topic = settings.pageviews_topic
        asked = [TopicPartition(topic, p) for p in partitions]
        answers = await admin.list_consumer_group_offsets(GROUP_ID, partitions=asked)
    finally:
        await admin.close()
    return {tp.partition: answer.offset for tp, answer in answers.items() if answer.offset >= 0}
