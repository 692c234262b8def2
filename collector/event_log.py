"""The collector's sink: the Kafka topic `pageviews`, behind a small seam.

A 202 is only ever sent after `append` returned, i.e. after every in-sync replica
acknowledged the write (acks=all, idempotent producer). When the broker is unreachable —
even at start — `append` fails fast with LogUnavailable (the collector answers 503) and a
background task keeps reconnecting, so the collector recovers by itself.

Concurrent requests share record batches. Each partition has one batch in flight at a time
and one open batch that every request appends to meanwhile; when the batch in flight is
acknowledged, the open one is sent. Under load a batch carries the records of every request
that arrived during one round trip to the broker; an idle collector sends at once (no
linger). This is what aiokafka's `send()` does per message too, at ~35 µs of Python per
message; appending to a record batch directly costs ~2 µs.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections import deque
from collections.abc import Callable, Sequence
from functools import cache, lru_cache
from typing import Protocol

import structlog
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from aiokafka.producer.message_accumulator import BatchBuilder

from tally.settings import Settings

log = structlog.get_logger()

# A produce request's batch per partition at most (bench/storage_cost.py packs records the same way).
MAX_BATCH_BYTES = 256 * 1024

# The longest one produce request may go unanswered before the producer gives up on it and
# retries it (on the partition's new leader, once the metadata says who): a request to a
# broker cut off from the network is never answered, so under a longer send timeout it must
# be retried within it. The idempotent producer keeps a retried batch from being written twice.
PRODUCE_REQUEST_TIMEOUT_S = 10.0

# A record on the log: (key, value). The key is `site:visitor_id` (tally/event.py).
LogRecord = tuple[bytes, bytes]


class LogUnavailable(Exception):
    """The log could not take the write; the client should retry later (503)."""


class EventLog(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def append(self, records: Sequence[LogRecord]) -> None: ...


# A visitor's events share one key (site:visitor_id): a page view and its engagement events
# follow each other, so keys are partitioned once each while they repeat. At most this many
# keys kept (least recently used dropped; ~200 bytes an entry, ~13 MB at most).
PARTITION_CACHE_SIZE = 65_536


@lru_cache(maxsize=PARTITION_CACHE_SIZE)
def partition_for(key: bytes, partitions: int) -> int:
    """Kafka's default partition for a key (murmur2, as the Java client and aiokafka choose
    it), so that every producer of the topic puts a visitor's events in the same partition."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (seed 0x9747b28c), a word at a time: aiokafka's costs ~9 µs a key,
    this ~2.4 (one mask fewer a word, the word unpacker made once per length)."""
    length = len(data)
    words = length >> 2
    h = 0x9747B28C ^ length
    for k in _words(words)(data):
        k = (k * _M) & _MASK
        h = ((h * _M) ^ (((k ^ (k >> 24)) * _M) & _MASK)) & _MASK
    if tail := length & 3:
        end = words * 4
        if tail == 3:
            h ^= data[end + 2] << 16
        if tail >= 2:
            h ^= data[end + 1] << 8
        h = ((h ^ data[end]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


@cache
def _words(count: int) -> Callable[[bytes], tuple[int, ...]]:
    """Reads the first `count` little-endian 32-bit words of a key."""
    return struct.Struct(f"<{count}I").unpack_from


class PartitionQueue:
    """One partition's records on their way to the broker: the batch in flight (at most
    one) and the batches waiting behind it, the last of which takes new records."""

    def __init__(self, producer: AIOKafkaProducer, topic: str, partition: int, timeout_s: float) -> None:
        self._producer = producer
        self._topic = topic
        self._partition = partition
        self._timeout_s = timeout_s
        # Batches not sent yet: (records, acknowledged, deadline). A batch fails once its
        # first record has waited timeout_s, in the queue and in flight together.
        self._waiting: deque[tuple[BatchBuilder, asyncio.Future[None], float]] = deque()
        self._sender: asyncio.Task[None] | None = None

    def add(self, key: bytes, value: bytes) -> asyncio.Future[None]:
        """Append the record; the future resolves once the broker acknowledged its batch."""
        if not self._waiting or self._waiting[-1][0].append(key=key, value=value, timestamp=None) is None:
            self._open_batch()
            if self._waiting[-1][0].append(key=key, value=value, timestamp=None) is None:
                raise LogUnavailable(f"record of {len(value)} bytes is over the batch size")
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(self._send_waiting())
        return self._waiting[-1][1]

    def _open_batch(self) -> None:
        loop = asyncio.get_running_loop()
        acknowledged = loop.create_future()
        # Logged by the sender when it fails; not "never retrieved" when no request waits.
        acknowledged.add_done_callback(lambda future: future.cancelled() or future.exception())
        self._waiting.append((self._producer.create_batch(), acknowledged, loop.time() + self._timeout_s))

    async def _send_waiting(self) -> None:
        try:
            partition = self._partition
            while self._waiting:
                batch, acknowledged, deadline = self._waiting.popleft()
                try:
                    async with asyncio.timeout_at(deadline):
                        delivery = await self._producer.send_batch(batch, self._topic, partition=partition)
                        # Shielded: on a timeout the producer still owns the batch (it may yet
                        # land: the sender's retry then finds it archived, by its event_id).
                        await asyncio.shield(delivery)
                except Exception as error:  # every request waiting on the batch gets its 503
                    reason = str(error) or type(error).__name__
                    if isinstance(error, TimeoutError):
                        reason = f"not acknowledged within {self._timeout_s:g} s"
                    log.warning("log_append_failed", partition=partition, error=reason[:200])
                    acknowledged.set_exception(LogUnavailable(reason))
                else:
                    acknowledged.set_result(None)
        finally:
            self._sender = None

    async def drained(self) -> None:
        while self._sender is not None:
            await asyncio.shield(self._sender)

    def fail_waiting(self, reason: str) -> None:
        while self._waiting:
            _batch, acknowledged, _deadline = self._waiting.popleft()
            if not acknowledged.done():
                acknowledged.set_exception(LogUnavailable(reason))


class KafkaEventLog:
    def __init__(
        self, settings: Settings, send_timeout_s: float = 10.0, reconnect_every_s: float = 2.0
    ) -> None:
        self._settings = settings
        self._topic = settings.pageviews_topic
        self._send_timeout_s = send_timeout_s
        self._reconnect_every_s = reconnect_every_s
        self._producer: AIOKafkaProducer | None = None
        self._queues: list[PartitionQueue] = []
        self._connector: asyncio.Task[None] | None = None

    def _new_producer(self) -> AIOKafkaProducer:
        return AIOKafkaProducer(
            bootstrap_servers=self._settings.kafka_bootstrap,
            acks="all",
            enable_idempotence=True,
            # No linger: records wait for the batch in flight anyway (PartitionQueue).
            linger_ms=0,
            max_batch_size=MAX_BATCH_BYTES,
            compression_type="lz4",
            request_timeout_ms=int(min(self._send_timeout_s, PRODUCE_REQUEST_TIMEOUT_S) * 1000),
        )

    async def start(self) -> None:
        if not await self._try_connect():
            self._connector = asyncio.create_task(self._connect_until_up())

    async def _try_connect(self) -> bool:
        producer = self._new_producer()
        try:
            await producer.start()
            partitions = await producer.partitions_for(self._topic)
        except KafkaError as error:
            log.warning("kafka_unreachable", error=str(error))
            await producer.stop()
            return False
        timeout_s = self._send_timeout_s
        self._queues = [PartitionQueue(producer, self._topic, p, timeout_s) for p in sorted(partitions)]
        self._producer = producer
        return True

    async def _connect_until_up(self) -> None:
        while not await self._try_connect():
            await asyncio.sleep(self._reconnect_every_s)
        log.info("kafka_connected")

    async def stop(self) -> None:
        if self._connector:
            self._connector.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._connector
        if self._producer:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._send_timeout_s):
                    for queue in self._queues:
                        await queue.drained()
            for queue in self._queues:
                queue.fail_waiting("the collector is stopping")
            await self._producer.stop()

    @property
    def connected(self) -> bool:
        return self._producer is not None

    async def append(self, records: Sequence[LogRecord]) -> None:
        if self._producer is None:
            raise LogUnavailable("not connected to Kafka")
        queues = self._queues
        acknowledged = {queues[partition_for(key, len(queues))].add(key, value) for key, value in records}
        # Each batch fails by itself once its deadline passed (PartitionQueue), so no request
        # waits longer than the send timeout. Shielded: the futures are shared by requests.
        for future in acknowledged:
            await asyncio.shield(future)
