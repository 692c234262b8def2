"""The blocklist as a table: the compacted Kafka topic `blocklist` (key ip_hash, value
{"until", "count"}, a tombstone lifts the block) consumed from the beginning into memory —
stream-table duality. The collector answers 429 to a client whose block has not expired."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime

import orjson
import structlog
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError

from tally.settings import Settings

log = structlog.get_logger()


class Blocklist:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._blocked_until: dict[str, datetime] = {}
        self._task: asyncio.Task[None] | None = None

    def is_blocked(self, ip_hash: str, now: datetime | None = None) -> bool:
        until = self._blocked_until.get(ip_hash)
        return until is not None and until > (now or datetime.now(UTC))

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """One record of the topic: a block, or a tombstone lifting one."""
        if not key:
            return
        ip_hash = key.decode(errors="replace")
        if value is None:
            self._blocked_until.pop(ip_hash, None)
            return
        try:
            until = datetime.fromisoformat(orjson.loads(value)["until"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            log.warning("blocklist_record_ignored", key=ip_hash)
            return
        self._blocked_until[ip_hash] = until if until.tzinfo else until.replace(tzinfo=UTC)

    @property
    def size(self) -> int:
        return len(self._blocked_until)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._follow())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _follow(self) -> None:
        """Read the topic from the start, forever; reconnect if the broker goes away."""
        while True:
            consumer = AIOKafkaConsumer(
                self._settings.blocklist_topic,
                bootstrap_servers=self._settings.kafka_bootstrap,
                group_id=None,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
            )
            try:
                # Re-reading from the start re-applies blocks and their tombstones, so the
                # table converges without being cleared (no window where all are unblocked).
                await consumer.start()
                async for record in consumer:
                    self.apply(record.key, record.value)
            except KafkaError as error:
                log.warning("blocklist_consumer_error", error=str(error)[:200])
                await asyncio.sleep(2)
            finally:
                with contextlib.suppress(Exception):
                    await consumer.stop()
