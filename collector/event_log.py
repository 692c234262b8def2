"""The collector's sink: the Kafka topic `pageviews`, behind a small seam.

A 202 is only ever sent after `append` returned, i.e. after every in-sync replica
acknowledged the write (acks=all, idempotent producer). When the broker is unreachable —
even at start — `append` fails fast with LogUnavailable (the collector answers 503) and a
background task keeps reconnecting, so the collector recovers by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

import structlog
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from tally.event import PageViewEvent
from tally.settings import Settings

log = structlog.get_logger()


class LogUnavailable(Exception):
    """The log could not take the write; the client should retry later (503)."""


class EventLog(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def append(self, events: list[PageViewEvent]) -> None: ...


class KafkaEventLog:
    def __init__(
        self, settings: Settings, send_timeout_s: float = 10.0, reconnect_every_s: float = 2.0
    ) -> None:
        self._settings = settings
        self._send_timeout_s = send_timeout_s
        self._reconnect_every_s = reconnect_every_s
        self._producer: AIOKafkaProducer | None = None
        self._connector: asyncio.Task[None] | None = None

    def _new_producer(self) -> AIOKafkaProducer:
        return AIOKafkaProducer(
            bootstrap_servers=self._settings.kafka_bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            max_batch_size=256 * 1024,
            compression_type="lz4",
            request_timeout_ms=int(self._send_timeout_s * 1000),
        )

    async def start(self) -> None:
        if not await self._try_connect():
            self._connector = asyncio.create_task(self._connect_until_up())

    async def _try_connect(self) -> bool:
        producer = self._new_producer()
        try:
            await producer.start()
        except KafkaError as error:
            log.warning("kafka_unreachable", error=str(error))
            await producer.stop()
            return False
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
            # Flushes what is in flight before closing.
            await self._producer.stop()

    @property
    def connected(self) -> bool:
        return self._producer is not None

    async def append(self, events: list[PageViewEvent]) -> None:
        if self._producer is None:
            raise LogUnavailable("not connected to Kafka")
        topic = self._settings.pageviews_topic
        try:
            async with asyncio.timeout(self._send_timeout_s):
                sends = [await self._producer.send(topic, event.to_json(), key=event.key) for event in events]
                await asyncio.gather(*sends)
        except (KafkaError, TimeoutError) as error:
            raise LogUnavailable(str(error) or type(error).__name__) from error
