"""The collector's sink: the Kafka topic `pageviews`, behind a small seam.

A 202 is only ever sent after `append` returned, i.e. after every in-sync replica
acknowledged the write (acks=all, idempotent producer).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from tally.event import PageViewEvent
from tally.settings import Settings


class LogUnavailable(Exception):
    """The log could not take the write; the client should retry later (503)."""


class EventLog(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def append(self, events: list[PageViewEvent]) -> None: ...


class KafkaEventLog:
    def __init__(self, settings: Settings, send_timeout_s: float = 10.0) -> None:
        self._settings = settings
        self._producer = AIOKafkaProducer(
            bootstrap_servers=settings.kafka_bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            max_batch_size=256 * 1024,
            compression_type="lz4",
            request_timeout_ms=int(send_timeout_s * 1000),
        )
        self._send_timeout_s = send_timeout_s

    async def start(self) -> None:
        await self._producer.start()

    async def stop(self) -> None:
        # Flushes what is in flight before closing.
        await self._producer.stop()

    async def append(self, events: list[PageViewEvent]) -> None:
        topic = self._settings.pageviews_topic
        try:
            async with asyncio.timeout(self._send_timeout_s):
                futures = [
                    await self._producer.send(topic, event.to_json(), key=event.key) for event in events
                ]
                await asyncio.gather(*futures)
        except (KafkaError, TimeoutError) as error:
            raise LogUnavailable(str(error) or type(error).__name__) from error
