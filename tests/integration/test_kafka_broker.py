import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

pytestmark = pytest.mark.integration


async def test_broker_has_tally_topics_with_compacted_blocklist(kafka_bootstrap: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        topics = await admin.describe_topics(["pageviews", "blocklist", "deadletter"])
        partitions = {t["topic"]: len(t["partitions"]) for t in topics}
        configs = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "blocklist")])
    finally:
        await admin.close()
    assert partitions == {"pageviews": 3, "blocklist": 1, "deadletter": 1}
    entries = {c[0]: c[1] for c in configs[0].resources[0][4]}
    assert entries["cleanup.policy"] == "compact"


async def test_message_acked_with_acks_all_is_read_back(kafka_bootstrap: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        sent = await producer.send_and_wait("deadletter", b"hello", key=b"k")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        "deadletter", bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest", group_id=None
    )
    await consumer.start()
    try:
        batch = await consumer.getmany(timeout_ms=10_000)
    finally:
        await consumer.stop()
    values = [m.value for msgs in batch.values() for m in msgs]
    assert sent.offset >= 0
    assert b"hello" in values
