"""The site registry: which domains the collector accepts events for."""

from __future__ import annotations

import re

from clickhouse_connect.driver.client import Client

# A hostname: labels of letters, digits and hyphens (DESIGN: `data-site="example.com"`).
LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
DOMAIN = re.compile(rf"^(?=.{{1,253}}$)({LABEL}\.)*{LABEL}$")


class InvalidDomain(ValueError):
    pass


def normalise(domain: str) -> str:
    cleaned = domain.strip().lower().removeprefix("www.")
    if not DOMAIN.match(cleaned):
        raise InvalidDomain(f"not a domain name: {domain!r}")
    return cleaned


def add_site(client: Client, domain: str) -> str:
    domain = normalise(domain)
    client.insert("sites", [[domain, 0]], column_names=["domain", "removed"])
    return domain


def remove_site(client: Client, domain: str) -> bool:
    domain = normalise(domain)
    if domain not in list_sites(client):
        return False
    client.insert("sites", [[domain, 1]], column_names=["domain", "removed"])
    return True


def list_sites(client: Client) -> list[str]:
    rows = client.query(
        "SELECT domain FROM sites GROUP BY domain HAVING argMax(removed, changed_at) = 0 ORDER BY domain"
    ).result_rows
    return [row[0] for row in rows]
