"""Exclusions per site: client IP ranges, page path patterns and countries whose traffic a
site's owner does not want counted (`tally sites exclude`).

They are applied by the collector (collector/exclusions.py), before an event reaches the log,
so the archive never holds excluded traffic: an exclusion is not a filter on reports and is not
retroactive. Values are checked here, once, so the collector only compiles what is valid.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal

from clickhouse_connect.driver.client import Client

from storage import definitions
from storage.page_patterns import BadPattern, validate_pattern
from storage.site_settings_rows import SettingsTable
from storage.sites import list_sites, normalise, registered
from tally.refusal import Refused

Kind = Literal["ip", "path", "country"]
KINDS: tuple[Kind, ...] = ("ip", "path", "country")
MAX_PER_SITE = 1000
# An exclusion is its key (site, kind, value): it is there or removed.
TABLE = SettingsTable("site_exclusions", keys=("site", "kind", "value"))


class InvalidExclusion(Refused):
    """An exclusion Tally cannot apply; the message names the option and says why."""


@dataclass(frozen=True, order=True)
class Exclusion:
    site: str
    kind: Kind
    value: str


def clean_value(kind: Kind, value: str) -> str:
    """The value in its one stored spelling (a network's canonical CIDR, an upper-case
    country), or InvalidExclusion naming the option."""
    value = value.strip()
    if kind == "ip":
        try:
            # strict=False: `10.1.2.3/8` means the /8 it lies in, as firewalls read it.
            return str(ipaddress.ip_network(value, strict=False))
        except ValueError:
            raise InvalidExclusion(f"--ip: {value!r} is not an IP address or CIDR range") from None
    if kind == "path":
        try:
            return validate_pattern(value)
        except BadPattern as bad:
            raise InvalidExclusion(f"--path: {bad}") from None
    if kind == "country":
        if len(value) != 2 or not value.isascii() or not value.isalpha():
            raise InvalidExclusion(f"--country: {value!r} is not an ISO 3166 two-letter code (e.g. DE)")
        return value.upper()
    raise InvalidExclusion(f"kind: one of {', '.join(KINDS)}")


def make_exclusions(site: str, ips: list[str], paths: list[str], countries: list[str]) -> list[Exclusion]:
    """The exclusions the options name, checked (before the store is asked)."""
    site = normalise(site)
    wanted: list[tuple[Kind, str]] = [
        *(("ip", value) for value in ips),
        *(("path", value) for value in paths),
        *(("country", value) for value in countries),
    ]
    if not wanted:
        raise InvalidExclusion("name at least one --ip, --path or --country")
    return sorted({Exclusion(site, kind, clean_value(kind, value)) for kind, value in wanted})


def add_exclusions(client: Client, exclusions: list[Exclusion]) -> None:
    sites = {exclusion.site for exclusion in exclusions}
    for site in sorted(sites):
        registered(client, site, InvalidExclusion)
    for site in sites:
        if len(list_exclusions(client, site)) + len(exclusions) > MAX_PER_SITE:
            raise InvalidExclusion(f"site: at most {MAX_PER_SITE} exclusions per site")
    _write(client, exclusions, removed=0)
    _record(client, "added", exclusions)


def remove_exclusions(client: Client, exclusions: list[Exclusion]) -> list[Exclusion]:
    """Remove those that exist; returns the ones that did not (nothing to remove)."""
    sites = {exclusion.site for exclusion in exclusions}
    existing = {e for site in sites for e in list_exclusions(client, site)}
    _write(client, [e for e in exclusions if e in existing], removed=1)
    _record(client, "removed", [e for e in exclusions if e in existing])
    return [e for e in exclusions if e not in existing]


def _record(client: Client, verb: str, changed: list[Exclusion]) -> None:
    """Every exclusion change is a definitions version: 'exclusion added on example.com: ip …'."""
    for site in sorted({e.site for e in changed}):
        values = ", ".join(f"{e.kind} {e.value}" for e in changed if e.site == site)
        definitions.record_rules(client, f"exclusion {verb} on {site}: {values}")


def list_exclusions(client: Client, site: str) -> list[Exclusion]:
    rows = TABLE.newest(client, "site = {site:String}", {"site": normalise(site)}, order=TABLE.keys)
    return [Exclusion(*row) for row in rows]


def all_exclusions(client: Client) -> list[Exclusion]:
    """Every site's exclusions: the collector's copy, read in one query."""
    return [Exclusion(*row) for row in TABLE.newest(client, order=TABLE.keys)]


def _write(client: Client, exclusions: list[Exclusion], removed: int) -> None:
    TABLE.write(client, [[e.site, e.kind, e.value] for e in exclusions], removed)


# --- what a definitions version holds (storage/definitions.py: RULE_KINDS) --------------------


def contents(client: Client) -> dict[str, list[dict[str, str]]]:
    """Every registered site's exclusions (a site without any: an empty list), for a version."""
    by_site: dict[str, list[dict[str, str]]] = {site: [] for site in list_sites(client)}
    for exclusion in all_exclusions(client):
        if exclusion.site in by_site:
            by_site[exclusion.site].append({"kind": exclusion.kind, "value": exclusion.value})
    return by_site


def restore(client: Client, stored: dict[str, list[dict[str, str]]]) -> None:
    """Each site `stored` names gets exactly its exclusions there (no version recorded)."""
    for site, items in stored.items():
        wanted = {Exclusion(site, item["kind"], item["value"]) for item in items}  # type: ignore[arg-type]
        have = set(list_exclusions(client, site))
        _write(client, sorted(have - wanted), removed=1)
        _write(client, sorted(wanted - have), removed=0)
