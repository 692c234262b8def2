"""The site registry: which domains the collector accepts events for, and each one's time zone
(where its days start in reports; storage/queries/calendar.py)."""

from __future__ import annotations

import re
from collections.abc import Callable

from clickhouse_connect.driver.client import Client

from storage.calendar import UTC_NAME, InvalidTimezone, zone
from tally.refusal import Refused

# A hostname: labels of letters, digits and hyphens (DESIGN: `data-site="example.com"`).
LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
DOMAIN = re.compile(rf"^(?=.{{1,253}}$)({LABEL}\.)*{LABEL}$")


class InvalidDomain(Refused):
    """Not a domain name Tally can register or look up."""


def normalise(domain: str) -> str:
    cleaned = domain.strip().lower().removeprefix("www.")
    if not DOMAIN.match(cleaned):
        raise InvalidDomain(f"not a domain name: {domain!r}")
    return cleaned


COLUMNS = ["domain", "removed", "timezone"]


def add_site(client: Client, domain: str, timezone: str | None = None) -> str:
    """Registers `domain`; with a zone, sets it (InvalidTimezone if it is none), without one a
    site added again keeps its zone, a new one is UTC."""
    domain = normalise(domain)
    chosen = checked_timezone(timezone) if timezone is not None else site_timezone(client, domain)
    client.insert("sites", [[domain, 0, chosen]], column_names=COLUMNS)
    return domain


def remove_site(client: Client, domain: str) -> bool:
    domain = normalise(domain)
    if domain not in list_sites(client):
        return False
    client.insert("sites", [[domain, 1, site_timezone(client, domain)]], column_names=COLUMNS)
    return True


def set_timezone(client: Client, domain: str, timezone: str) -> bool:
    """Sets a registered site's zone; False if `domain` is not registered."""
    domain = normalise(domain)
    chosen = checked_timezone(timezone)
    if domain not in list_sites(client):
        return False
    client.insert("sites", [[domain, 0, chosen]], column_names=COLUMNS)
    return True


def checked_timezone(name: str) -> str:
    """`name` if it is an IANA zone, else InvalidTimezone saying so."""
    zone(name.strip())
    return name.strip()


def site_timezone(client: Client, domain: str) -> str:
    """The site's zone: UTC for a site never given one, or not registered (events of a site
    removed since still have a calendar). A zone the database no longer knows reads as UTC."""
    rows = client.query(
        "SELECT argMax(timezone, changed_at) FROM sites WHERE domain = {domain:String}",
        parameters={"domain": domain},
    ).result_rows
    name = rows[0][0] if rows and rows[0][0] else UTC_NAME
    try:
        zone(name)
    except InvalidTimezone:
        return UTC_NAME
    return name


def list_timezones(client: Client) -> list[tuple[str, str]]:
    """(domain, zone) of every registered site."""
    rows = client.query(
        "SELECT domain, argMax(timezone, changed_at) FROM sites GROUP BY domain "
        "HAVING argMax(removed, changed_at) = 0 ORDER BY domain"
    ).result_rows
    return [(domain, name or UTC_NAME) for domain, name in rows]


def list_sites(client: Client) -> list[str]:
    rows = client.query(
        "SELECT domain FROM sites GROUP BY domain HAVING argMax(removed, changed_at) = 0 ORDER BY domain"
    ).result_rows
    return [row[0] for row in rows]


def not_registered(domain: str) -> str:
    """The one line a site that is not registered is refused with, wherever something is written
    for it: the site, where to find the right spelling, and how to add it."""
    return f"site: {domain} is not registered (see 'tally sites list'; to add it: 'tally sites add {domain}')"


def registered(client: Client, domain: str, refusal: Callable[[str], Exception]) -> str:
    """`domain` as the registry spells it (normalised) when it is registered and not removed
    since, else `refusal(not_registered(domain))`: each store passes its own refusal class, so
    every front door answers it as it answers that store's other refusals. Not a domain name at
    all: InvalidDomain, as `normalise`."""
    domain = normalise(domain)
    rows = client.query(
        "SELECT domain FROM sites WHERE domain = {domain:String} GROUP BY domain "
        "HAVING argMax(removed, changed_at) = 0",
        parameters={"domain": domain},
    ).result_rows
    if not rows:
        raise refusal(not_registered(domain))
    return domain
