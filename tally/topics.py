"""The Kafka topics Tally uses, created idempotently (by `tally up`, `tally init` and tests)."""

from __future__ import annotations

import asyncio

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaConnectionError

from tally.settings import Settings


def topic_specs(settings: Settings) -> list[NewTopic]:
    replicas = settings.kafka_replication_factor
    # acks=all is answered once this many copies hold a write: with 3 replicas and 2 in
    # sync, one broker can die (or be cut off) without a producer noticing more than a pause.
    min_isr = {"min.insync.replicas": str(settings.kafka_min_insync_replicas)}
    return [
        # The source of truth: keep raw events for a week (the archive keeps them for good).
        NewTopic(
            settings.pageviews_topic,
            num_partitions=settings.pageviews_partitions,
            replication_factor=replicas,
            topic_configs={"retention.ms": str(7 * 24 * 3600 * 1000), **min_isr},
        ),
        # A table as a stream: the latest value per ip_hash wins, tombstones lift a block.
        NewTopic(
            settings.blocklist_topic,
            num_partitions=1,
            replication_factor=replicas,
            topic_configs={
                "cleanup.policy": "compact",
                "min.compaction.lag.ms": "0",
                "segment.ms": "600000",
                **min_isr,
            },
        ),
        NewTopic(
            settings.deadletter_topic, num_partitions=1, replication_factor=replicas, topic_configs=min_isr
        ),
        # Alerts fired by the alerts query, keyed by rule; the delivery process consumes them.
        # One partition: a handful a minute at most, delivered in the order fired.
        NewTopic(
            settings.alerts_topic,
            num_partitions=1,
            replication_factor=replicas,
            topic_configs={"retention.ms": str(7 * 24 * 3600 * 1000), **min_isr},
        ),
    ]


async def ensure_topics(settings: Settings, timeout_s: float = 60.0) -> list[str]:
    """Create the missing topics; returns the names created. Waits for the broker to answer."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap, request_timeout_ms=10_000)
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            await admin.start()
            break
        except KafkaConnectionError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.5)
    try:
        existing = set(await admin.list_topics())
        missing = [spec for spec in topic_specs(settings) if spec.name not in existing]
        if missing:
            await admin.create_topics(missing)
        return [spec.name for spec in missing]
    finally:
        await admin.close()


def ensure_topics_sync(settings: Settings, timeout_s: float = 60.0) -> list[str]:
    return asyncio.run(ensure_topics(settings, timeout_s))


async def topic_config(settings: Settings, topic: str) -> dict[str, str]:
    """The broker's effective configuration of `topic` (defaults included)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        await admin.close()
    [(_error, _message, _type, _name, entries)] = response.resources
    return {entry[0]: entry[1] for entry in entries}
