"""The collector's copy of the site registry: read at start, refreshed in the background,
so checking a site on the hot path is a set lookup, never a query."""

from __future__ import annotations

import asyncio

import structlog
from clickhouse_connect.driver.client import Client

from storage.sites import list_sites

log = structlog.get_logger()


class KnownSites:
    def __init__(self, client: Client) -> None:
        self._client = client
        self._domains: frozenset[str] = frozenset()

    def __contains__(self, site: str) -> bool:
        return site.lower().removeprefix("www.") in self._domains

    def refresh(self) -> None:
        self._domains = frozenset(list_sites(self._client))

    async def refresh_forever(self, every_s: float = 2.0) -> None:
        while True:
            await asyncio.sleep(every_s)
            try:
                await asyncio.to_thread(self.refresh)
            except Exception as error:  # keep serving with the sites we know
                log.warning("sites_refresh_failed", error=str(error)[:200])
