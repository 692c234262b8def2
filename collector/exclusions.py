"""The collector's copy of the sites' exclusions (storage/exclusions.py): read at start and
refreshed in the background every `every_s` seconds, like the site registry
(collector/known_sites.py), so the hot path never queries the store. Checking an event is a
dictionary look-up for sites without exclusions; otherwise a set look-up (country), a few
network containment tests (IP) and glob matches (path).

An exclusion therefore takes effect within one refresh (2 s by default) of `tally sites
exclude` returning, and so does its removal.
"""

from __future__ import annotations

import asyncio
import ipaddress
from dataclasses import dataclass, field

import structlog
from clickhouse_connect.driver.client import Client

from storage.exclusions import Exclusion, all_exclusions
from tally.client_ip import parse_ip

log = structlog.get_logger()

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class SiteRules:
    """One site's exclusions, compiled for the hot path."""

    networks: tuple[Network, ...] = ()
    paths: tuple[tuple[str, ...], ...] = ()  # each pattern split at its wildcards
    countries: frozenset[str] = field(default_factory=frozenset)

    def rule_matching(self, client_ip: str, path: str, country: str) -> str | None:
        """Which kind of exclusion the event falls under (ip, path, country), or None."""
        address = parse_ip(client_ip) if self.networks else None
        if address is not None and any(
            address in network for network in self.networks if network.version == address.version
        ):
            return "ip"
        if any(glob_matches(parts, path) for parts in self.paths):
            return "path"
        if country and country in self.countries:
            return "country"
        return None


def compile_rules(exclusions: list[Exclusion]) -> dict[str, SiteRules]:
    by_site: dict[str, list[Exclusion]] = {}
    for exclusion in exclusions:
        by_site.setdefault(exclusion.site, []).append(exclusion)
    return {site: _site_rules(found) for site, found in by_site.items()}


def _site_rules(exclusions: list[Exclusion]) -> SiteRules:
    networks = tuple(ipaddress.ip_network(e.value, strict=False) for e in exclusions if e.kind == "ip")
    paths = tuple(tuple(e.value.split("*")) for e in exclusions if e.kind == "path")
    countries = frozenset(e.value for e in exclusions if e.kind == "country")
    return SiteRules(networks, paths, countries)


def glob_matches(parts: tuple[str, ...], path: str) -> bool:
    """Whether `path` is one the pattern `"*".join(parts)` names (storage/page_patterns.py's rule:
    `*` any run of characters). Each literal part is found leftmost after the previous one,
    which is exact for `*` globs and linear in the path: no backtracking on the hot path."""
    if len(parts) == 1:
        return path == parts[0]
    first, *middle, last = parts
    if not path.startswith(first) or len(path) < len(first) + len(last):
        return False
    position, end = len(first), len(path) - len(last)
    for part in middle:
        found = path.find(part, position, end)
        if found < 0:
            return False
        position = found + len(part)
    return path.endswith(last)


class SiteExclusions:
    def __init__(self, client: Client) -> None:
        self._client = client
        self._rules: dict[str, SiteRules] = {}

    def rule_matching(self, site: str, client_ip: str, path: str, country: str) -> str | None:
        rules = self._rules.get(site)
        return None if rules is None else rules.rule_matching(client_ip, path, country)

    def refresh(self) -> None:
        self._rules = compile_rules(all_exclusions(self._client))

    async def refresh_forever(self, every_s: float = 2.0) -> None:
        while True:
            await asyncio.sleep(every_s)
            try:
                await asyncio.to_thread(self.refresh)
            except Exception as error:  # keep applying the exclusions we know
                log.warning("exclusions_refresh_failed", error=str(error)[:200])
