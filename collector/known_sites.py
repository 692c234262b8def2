"""The collector's copy of the site registry: read at start, refreshed in the background,
so checking a known site on the hot path is a set lookup, never a query.

A site is accepted from the moment `tally sites add` returns: an event for a site the copy
does not know waits for a re-read of the registry that starts after the event arrived (so it
sees every registration made before). Those re-reads are shared and rate-limited — at most
one per `recheck_interval_s`, all the unknown-site events waiting meanwhile sharing it — so a
flood of events for made-up sites costs the store a few queries a second, not one each.
"""

from __future__ import annotations

import asyncio

import structlog
from clickhouse_connect.driver.client import Client

from storage.sites import list_sites

log = structlog.get_logger()


class KnownSites:
    def __init__(self, client: Client, recheck_interval_s: float = 0.25) -> None:
        self._client = client
        self._domains: frozenset[str] = frozenset()
        self.recheck_interval_s = recheck_interval_s
        # Re-read state belongs to the event loop serving requests: made anew when another
        # loop serves the same registry (tests do).
        self._loop: asyncio.AbstractEventLoop | None = None
        # One read at a time: re-reads and the background refresh share one client.
        self._reading = asyncio.Lock()
        self._next_reread: asyncio.Task[None] | None = None
        self._last_reread_at = float("-inf")
        self.rereads = 0

    def __contains__(self, site: str) -> bool:
        return site.lower().removeprefix("www.") in self._domains

    def refresh(self) -> None:
        self._domains = frozenset(list_sites(self._client))

    async def refresh_forever(self, every_s: float = 2.0) -> None:
        while True:
            await asyncio.sleep(every_s)
            await self._read_registry()

    async def confirm(self, site: str) -> None:
        """Return once the copy is current for `site`: at once for a known site, after a
        re-read that started after this call for an unknown one."""
        if site in self:
            return
        self._bind_to_running_loop()
        if self._next_reread is None:
            self._next_reread = asyncio.create_task(self._scheduled_reread())
        # Shielded: one waiter going away (a client hanging up) must not cancel the others' read.
        await asyncio.shield(self._next_reread)

    async def _scheduled_reread(self) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, self._last_reread_at + self.recheck_interval_s - loop.time()))
        async with self._reading:
            # From here on the read is under way: later arrivals wait for the next one.
            self._next_reread = None
            self._last_reread_at = loop.time()
            self.rereads += 1
            await self._refresh_in_thread()

    async def _read_registry(self) -> None:
        self._bind_to_running_loop()
        async with self._reading:
            await self._refresh_in_thread()

    async def _refresh_in_thread(self) -> None:
        try:
            await asyncio.to_thread(self.refresh)
        except Exception as error:  # keep serving with the sites we know
            log.warning("sites_refresh_failed", error=str(error)[:200])

    def _bind_to_running_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop = loop
            self._reading = asyncio.Lock()
            self._next_reread = None
            self._last_reread_at = float("-inf")
