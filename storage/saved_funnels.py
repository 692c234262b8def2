"""Saved funnels: named step lists per site (migration 0047), as Plausible keeps funnels per site.

A saved funnel is only its steps: the range and the filters are the report's. Its closed days are
computed in the background (`precompute`, run by the dashboard's process), so that its first
request reads stored days, not the archive (storage/queries/funnel_days.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from clickhouse_connect.driver.client import Client

from storage import site_caps
from storage.queries import funnel_days
from storage.queries.contract import StatsQuery
from storage.queries.funnels import FunnelStep, UnsupportedQuery, checked_steps
from storage.site_settings_rows import SettingsTable
from storage.sites import normalise, registered
from tally.refusal import Refused

SAVED_FUNNELS = "saved_funnels"
TABLE = SettingsTable(SAVED_FUNNELS, keys=("site", "name"), values=("steps",))
MAX_NAME = 120
# How many closed days back a background pass keeps computed for each saved funnel: a month
# and its neighbour, the dashboard's longest everyday periods.
PRECOMPUTE_DAYS = 62


class InvalidFunnel(Refused):
    """A funnel Tally cannot save, find or remove; the message names what is wrong."""


@dataclass(frozen=True)
class SavedFunnel:
    site: str
    name: str
    steps: list[FunnelStep]


def parse_step(text: str) -> FunnelStep:
    """A step as typed: a path (starts with /, * any run of characters) or a custom event's name."""
    text = text.strip()
    return FunnelStep("page" if text.startswith("/") else "event", text)


def add_funnel(client: Client, site: str, name: str, steps: Sequence[FunnelStep]) -> SavedFunnel:
    site, name = normalise(site), _checked_name(name)
    try:
        checked = checked_steps(steps)
    except UnsupportedQuery as refused:
        raise InvalidFunnel(str(refused)) from None
    registered(client, site, InvalidFunnel)
    existing = list_funnels(client, site)
    if any(funnel.name == name for funnel in existing):
        raise InvalidFunnel(f"{site} already has a funnel {name!r}")
    site_caps.FUNNELS.check(len(existing), InvalidFunnel)
    funnel = SavedFunnel(site, name, checked)
    _write(client, funnel, removed=0)
    return funnel


def remove_funnel(client: Client, site: str, name: str) -> SavedFunnel:
    funnel = find_funnel(client, site, name)
    _write(client, funnel, removed=1)
    return funnel


def list_funnels(client: Client, site: str | None = None) -> list[SavedFunnel]:
    """The saved funnels of `site` (of every site without one), by site and name."""
    rows = TABLE.newest(
        client,
        "{every:UInt8} OR site = {site:String}",
        {"site": normalise(site) if site else "", "every": int(site is None)},
        order=("site", "name"),
    )
    return [SavedFunnel(site_, name, _steps(steps)) for site_, name, steps in rows]


def find_funnel(client: Client, site: str, name: str) -> SavedFunnel:
    """The site's funnel of this name, or InvalidFunnel."""
    for funnel in list_funnels(client, site):
        if funnel.name == name.strip():
            return funnel
    raise InvalidFunnel(f"{normalise(site)} has no funnel {name!r} (see 'tally funnels list {site}')")


def precompute(client: Client, now: datetime, days: int = PRECOMPUTE_DAYS) -> int:
    """One background pass: every saved funnel's closed days of the last `days` computed where
    missing or stale (one query per funnel at most, over those days only); returns how many
    days were computed. Unfiltered: a filtered report stores days of its own on first request."""
    computed = 0
    last = datetime.combine(now.astimezone(UTC).date(), time(), UTC) - timedelta(
        days=funnel_days.OPEN_DAYS - 1
    )
    for funnel in list_funnels(client):
        q = StatsQuery(funnel.site, last - timedelta(days=days), last)
        read = funnel_days.funnel(client, q, funnel.steps, now).days
        computed += read.computed_days if read is not None else 0
    return computed


def _checked_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > MAX_NAME or not name.isprintable():
        raise InvalidFunnel(f"a funnel's name has 1 to {MAX_NAME} printable characters")
    return name


def _steps(text: str) -> list[FunnelStep]:
    return [FunnelStep(kind, value) for step in json.loads(text) for kind, value in step.items()]


def _write(client: Client, funnel: SavedFunnel, removed: int) -> None:
    steps = json.dumps([{step.kind: step.value} for step in funnel.steps])
    TABLE.write(client, [[funnel.site, funnel.name, steps]], removed)
