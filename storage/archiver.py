"""The archiver: Kafka `pageviews` → ClickHouse `events`, every event exactly once.

Exactly once: each row carries its (kafka_partition, kafka_offset). When partitions are
assigned, the archiver seeks each one to one past the highest offset already in the
archive, so the archive — not the consumer group — is the record of progress. A crash
between the insert and the offset commit therefore re-reads nothing that is archived.
Offsets are still committed after each insert so that lag is visible to Kafka tooling.

Malformed messages go to `deadletter` with the reason and never block a partition.
While ClickHouse is down the archiver retries the same batch with backoff and fetches at
most one batch ahead: memory stays bounded by two batches.

Rows go to ClickHouse as JSONEachRow: each message is validated against the event contract
(malformed ones are dead-lettered, never sent), then written as pydantic serialises the
validated event, and ClickHouse parses the JSON natively. Building rows in Python and
serialising them to the Native format cost more than everything else the archiver does.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import orjson
import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import KafkaError
from clickhouse_connect.driver.client import Client
from pydantic import ValidationError

from storage.client import connect
from storage.schema import apply_migrations
from tally import heartbeat, structured_logging
from tally.event import PageViewEvent, describe_validation_error
from tally.settings import Settings

log = structlog.get_logger()

GROUP_ID = "tally-archiver"
EVENT_COLUMNS = list(PageViewEvent.model_fields)
ARCHIVE_COLUMNS = [*EVENT_COLUMNS, "kafka_partition", "kafka_offset"]
# The partition for rows written straight into the archive (tests, benchmarks): no topic has
# it, so these rows never move the archiver's resume position for a real partition.
SYNTHETIC_PARTITION = 65535


@dataclass
class Batch:
    rows: list[bytes] = field(default_factory=list)  # JSONEachRow lines
    dead: list[tuple[ConsumerRecord, str]] = field(default_factory=list)
    next_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    skipped: int = 0

    def add(self, record: ConsumerRecord, next_expected: dict[int, int]) -> None:
        floor = next_expected.get(record.partition)
        if floor is None or record.offset < floor:
            # Position not known yet, already archived, or already in this batch: a fetch
            # racing the seek to the archive's position can deliver the same offsets twice.
            self.skipped += 1
            return
        next_expected[record.partition] = record.offset + 1
        self.next_offsets[TopicPartition(record.topic, record.partition)] = record.offset + 1
        try:
            event = PageViewEvent.from_json(record.value or b"")
        except ValidationError as error:
            self.dead.append((record, describe_validation_error(error, whole="value")))
            return
        self.rows.append(archive_row(event, record.partition, record.offset))

    def __len__(self) -> int:
        return len(self.rows) + len(self.dead)


def archive_row(event: PageViewEvent, partition: int, offset: int) -> bytes:
    """The event as one JSONEachRow line of `events`, with where it came from on the log."""
    validated = event.model_dump_json().encode()
    return b'{"kafka_partition":%d,"kafka_offset":%d,%s' % (partition, offset, validated[1:])


# ISO-8601 times as pydantic writes them ("2026-11-22T06:32:33.123Z"); a field the table
# does not know is an error, not silently dropped.
INSERT_SETTINGS = {"date_time_input_format": "best_effort", "input_format_skip_unknown_fields": 0}


def archived_positions(client: Client, topic_partitions: list[int]) -> dict[int, int]:
    """Next offset to read per partition, according to what the archive already holds."""
    rows = client.query(
        "SELECT kafka_partition, max(kafka_offset) + 1 FROM events "
        "WHERE kafka_partition IN {partitions:Array(UInt16)} GROUP BY kafka_partition",
        parameters={"partitions": topic_partitions},
    ).result_rows
    return {int(partition): int(offset) for partition, offset in rows}


class ResumeFromArchive(ConsumerRebalanceListener):
    """On every assignment, continue each partition where the archive ends.

    `next_expected` is shared with the archiver: records below it are dropped even if the
    fetcher had already started from the (older) committed offset when the seek happened.
    `settle` is awaited first on every rebalance: it lets the insert in flight land and
    drops the batch being collected, so that the archive's end is the whole truth.
    """

    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        client: Client,
        next_expected: dict[int, int],
        settle: Callable[[], Awaitable[None]],
    ) -> None:
        self._consumer = consumer
        self._client = client
        self._next_expected = next_expected
        self._settle = settle

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._settle()
        for tp in revoked:
            self._next_expected.pop(tp.partition, None)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        if not assigned:
            return
        # Close the gate before the first await: the fetcher may already be delivering
        # records from the committed offsets while we ask the archive where it ends.
        # Records skipped meanwhile are fetched again after the seeks below.
        for tp in assigned:
            self._next_expected.pop(tp.partition, None)
        await self._settle()
        partitions = [tp.partition for tp in assigned]
        positions = await asyncio.to_thread(archived_positions, self._client, partitions)
        for tp in assigned:
            if tp.partition in positions:
                self._consumer.seek(tp, positions[tp.partition])
            else:
                # Nothing archived from this partition: the archive is a copy of the whole log.
                await self._consumer.seek_to_beginning(tp)
            self._next_expected[tp.partition] = positions.get(tp.partition, 0)
        log.info("partitions_assigned", partitions=sorted(partitions), resume=positions)


class Archiver:
    def __init__(
        self, settings: Settings, client: Client, max_rows: int = 10_000, max_wait_s: float = 1.0
    ) -> None:
        self.settings = settings
        self.client = client
        self.max_rows = max_rows
        self.max_wait_s = max_wait_s
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=settings.kafka_bootstrap,
            group_id=GROUP_ID,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=4 * 1024 * 1024,
            isolation_level="read_committed",
        )
        self.deadletter = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
        # Per partition, the next offset not yet archived (see Batch.add).
        self.next_expected: dict[int, int] = {}
        self._stopping = asyncio.Event()
        self._archiving: asyncio.Task[None] | None = None  # the batch being inserted
        self._rebalances = 0  # a batch collected across a rebalance is dropped

    async def run(self) -> None:
        await self.deadletter.start()
        self.consumer.subscribe(
            [self.settings.pageviews_topic],
            listener=ResumeFromArchive(self.consumer, self.client, self.next_expected, self._settle),
        )
        await self.consumer.start()
        try:
            while not self._stopping.is_set():
                # The next batch is fetched and parsed while the previous one is inserted;
                # batches are archived and committed one after the other, in order.
                batch = await self._collect()
                await self._archived()
                if len(batch):
                    self._archiving = asyncio.create_task(self._archive(batch))
                heartbeat.beat(self.settings, "archiver")
            await self._archived()
        finally:
            await self.consumer.stop()
            await self.deadletter.stop()

    def stop(self) -> None:
        self._stopping.set()

    async def _archived(self) -> None:
        """Wait for the batch in flight, if any, to be archived and committed."""
        if self._archiving:
            await self._archiving
            self._archiving = None

    async def _settle(self) -> None:
        await self._archived()
        self._rebalances += 1

    async def _collect(self) -> Batch:
        """Up to max_rows messages or max_wait_s, whichever comes first; empty if the
        partitions were reassigned meanwhile (its records are fetched again from the
        archive's end)."""
        batch = Batch()
        rebalances = self._rebalances
        deadline = time.monotonic() + self.max_wait_s
        while len(batch) < self.max_rows and not self._stopping.is_set():
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0:
                break
            fetched = await self.consumer.getmany(
                timeout_ms=remaining_ms, max_records=self.max_rows - len(batch)
            )
            if self._rebalances != rebalances:
                return Batch()
            for records in fetched.values():
                for record in records:
                    batch.add(record, self.next_expected)
        return batch

    async def _archive(self, batch: Batch) -> None:
        for record, reason in batch.dead:
            await self._dead_letter(record, reason)
        if batch.rows:
            await self._insert_with_retry(batch.rows)
        if batch.next_offsets:
            try:
                await self.consumer.commit(batch.next_offsets)
            except KafkaError as error:  # e.g. mid-rebalance: the archive stays the record
                log.warning("offset_commit_failed", error=str(error)[:300])
        log.debug("archived", rows=len(batch.rows), dead=len(batch.dead), skipped=batch.skipped)

    async def _insert_with_retry(self, rows: list[bytes]) -> None:
        delay_s = 0.5
        while True:
            try:
                await asyncio.to_thread(
                    self.client.raw_insert,
                    "events",
                    ARCHIVE_COLUMNS,
                    b"\n".join(rows),
                    settings=INSERT_SETTINGS,
                    fmt="JSONEachRow",
                )
                return
            except Exception as error:  # ClickHouse down or slow: keep the batch, back off, retry
                log.warning("archive_insert_failed", error=str(error)[:300], retry_in_s=delay_s)
                heartbeat.beat(self.settings, "archiver")
                await asyncio.sleep(delay_s)
                delay_s = min(delay_s * 2, 30.0)

    async def _dead_letter(self, record: ConsumerRecord, reason: str) -> None:
        value = orjson.dumps(
            {
                "reason": reason,
                "source": "archiver",
                "topic": record.topic,
                "partition": record.partition,
                "offset": record.offset,
                "value": (record.value or b"").decode("utf-8", errors="replace")[:65536],
            }
        )
        await self.deadletter.send_and_wait(self.settings.deadletter_topic, value, key=record.key)


async def run_archiver(settings: Settings) -> None:
    client = connect(settings)
    archiver = Archiver(settings, client)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, archiver.stop)
    await archiver.run()


def main() -> None:
    structured_logging.configure()
    settings = Settings()
    apply_migrations(settings)
    asyncio.run(run_archiver(settings))


if __name__ == "__main__":
    main()
