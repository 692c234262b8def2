"""The salts the collector hashes with, shared by every collector instance through the store, and
each site's visitor identity (storage/site_identity.py): which salt its visitor ids take.

Off the hot path: read at start and refreshed in the background. Every rotation's current and
next period's salts are created ahead (the daily one a day ahead, a weekly one a week ahead…),
so instances agree when a period turns without racing; where two instances do race (first ever
start), both settle on the smallest salt for the period. A salt is deleted the day after its
period is over, as the daily ones always were: ids hashed in different periods cannot be linked.

`ip_hash` (rate limits, blocks) always takes the day's salt; `visitor_id` the salt of the site's
rotation. Sites' rotations are re-read every few seconds, so a change (`tally sites identity`)
reaches every instance within seconds; a site that never chose one is daily.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Callable
from datetime import UTC, date, datetime

import structlog
from clickhouse_connect.driver.client import Client

from storage.salts import Period, add_salts, forget_salts_ended_before, load_salts
from storage.site_identity import ROTATIONS, Rotation, next_period, period_start, rotations
from tally.clock import utc_now

log = structlog.get_logger()


class Salts:
    def __init__(self, client: Client, clock: Callable[[], datetime] = utc_now) -> None:
        self._client = client
        self._clock = clock
        self._by_period: dict[Period, bytes] = {}
        self._rotations: dict[str, Rotation] = {}  # sites whose ids are not daily
        # The two refreshers run in threads and share one client, which takes one query at a time.
        self._reading = threading.Lock()

    def for_time(self, moment: datetime) -> bytes:
        """The day's salt (ip_hash; the visitor id of a site with daily ids)."""
        return self._salt("daily", moment)

    def for_visitor(self, site: str, moment: datetime) -> bytes:
        """The salt of `site`'s visitor ids at `moment`: its rotation's period's."""
        return self._salt(self._rotations.get(site, "daily"), moment)

    def _salt(self, rotation: Rotation, moment: datetime) -> bytes:
        day = moment.astimezone(UTC).date()
        try:
            return self._by_period[(rotation, period_start(rotation, day))]
        except KeyError:
            # Only reachable if the refresher fell behind: the rotation's latest salt we have.
            return self._by_period[max(p for p in self._by_period if p[0] == rotation)]

    def refresh(self) -> None:
        """Ensure every rotation's current and next salts exist, load them, drop those over,
        and read the sites' rotations (blocking I/O)."""
        today = self._clock().astimezone(UTC).date()
        wanted = [period for rotation in ROTATIONS for period in _current_and_next(rotation, today)]
        with self._reading:
            existing = load_salts(self._client, wanted)
            missing = [period for period in wanted if period not in existing]
            if missing:
                add_salts(self._client, {period: secrets.token_hex(32) for period in missing})
                existing = load_salts(self._client, wanted)
            self._by_period = {period: bytes.fromhex(salt) for period, salt in existing.items()}
            forget_salts_ended_before(self._client, today)
        self.refresh_rotations()

    def refresh_rotations(self) -> None:
        with self._reading:
            self._rotations = rotations(self._client)

    async def refresh_forever(self, every_s: float = 300.0) -> None:
        while True:
            await asyncio.sleep(every_s)
            try:
                await asyncio.to_thread(self.refresh)
            except Exception as error:  # the collector keeps serving with the salts it has
                log.warning("salt_refresh_failed", error=str(error))

    async def refresh_rotations_forever(self, every_s: float = 2.0) -> None:
        while True:
            await asyncio.sleep(every_s)
            try:
                await asyncio.to_thread(self.refresh_rotations)
            except Exception as error:  # keep the rotations we know
                log.warning("identity_refresh_failed", error=str(error)[:200])


def _current_and_next(rotation: Rotation, today: date) -> list[Period]:
    current = period_start(rotation, today)
    return [(rotation, current), (rotation, next_period(rotation, current))]


def salt_holding(salts: dict[Period, bytes]) -> Salts:
    """Salts that never read the store, holding `salts` (benchmarks and unit tests)."""
    held = Salts(client=None)  # type: ignore[arg-type]
    held._by_period = dict(salts)
    return held


def todays_periods(today: date) -> list[Period]:
    """Every rotation's period holding `today` (for salt_holding)."""
    return [(rotation, period_start(rotation, today)) for rotation in ROTATIONS]
