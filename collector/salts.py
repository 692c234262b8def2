"""The day's salt, shared by every collector instance through the store.

Off the hot path: read at start and refreshed in the background. Tomorrow's salt is
created a day ahead, so instances agree at midnight without racing; where two instances
do race (first ever start), both settle on the smallest salt for the day.
"""

from __future__ import annotations

import asyncio
import secrets
from datetime import UTC, date, datetime, timedelta

import structlog
from clickhouse_connect.driver.client import Client

from storage.salts import add_salts, forget_salts_before, load_salts

log = structlog.get_logger()

KEEP_DAYS = 2


class DailySalts:
    def __init__(self, client: Client) -> None:
        self._client = client
        self._by_day: dict[date, bytes] = {}

    def for_time(self, moment: datetime) -> bytes:
        day = moment.astimezone(UTC).date()
        try:
            return self._by_day[day]
        except KeyError:
            # Only reachable if the refresher fell behind: use the latest salt we have.
            return self._by_day[max(self._by_day)]

    def refresh(self) -> None:
        """Ensure today's and tomorrow's salts exist, load them, drop expired ones (blocking I/O)."""
        today = datetime.now(UTC).date()
        wanted = [today, today + timedelta(days=1)]
        existing = load_salts(self._client, wanted)
        missing = [day for day in wanted if day not in existing]
        if missing:
            add_salts(self._client, {day: secrets.token_hex(32) for day in missing})
            existing = load_salts(self._client, wanted)
        self._by_day = {day: bytes.fromhex(salt) for day, salt in existing.items()}
        forget_salts_before(self._client, today - timedelta(days=KEEP_DAYS - 1))

    async def refresh_forever(self, every_s: float = 300.0) -> None:
        while True:
            await asyncio.sleep(every_s)
            try:
                await asyncio.to_thread(self.refresh)
            except Exception as error:  # the collector keeps serving with the salts it has
                log.warning("salt_refresh_failed", error=str(error))
