"""A site's visitor identity: how long its visitor ids live, chosen by its owner.

The visitor id is HMAC(salt, site ‖ ip ‖ user agent) (collector/enrichment.py); the salt is
random, stored, and rotated, so an id lives as long as its salt: `daily` (the default, a visitor
is recognisable within one UTC day, Tally's behaviour before), `weekly` (one ISO week, Monday to
Sunday UTC) or `monthly` (one calendar month UTC; Umami's default). A longer period lets the
retention report recognise a returning visitor within it; it sets no cookie and reads nothing
more from the browser. Periods are UTC, as the daily salt's: every collector instance agrees on
them without knowing the site's time zone.

Each choice is a row of `site_identity` (migration 0073), never overwritten: the newest is in
force, and the ones before say which identity older events rest on (`identity_history`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Literal, cast, get_args

from clickhouse_connect.driver.client import Client

from storage.sites import list_sites, normalise
from storage.tables import SITE_IDENTITY
from tally.clock import as_utc
from tally.refusal import Refused

Rotation = Literal["daily", "weekly", "monthly"]
ROTATIONS: tuple[Rotation, ...] = get_args(Rotation)
DEFAULT_ROTATION: Rotation = "daily"


class InvalidRotation(Refused):
    """Not one of the rotations a visitor-id salt may have."""


@dataclass(frozen=True)
class IdentityChange:
    """From `since` on (None: the site's first event), visitor ids rotate `rotation`."""

    rotation: Rotation
    since: datetime | None


def checked_rotation(name: str) -> Rotation:
    """`name` (any case, spaces around) if it is a rotation, else InvalidRotation naming them."""
    cleaned = name.strip().lower()
    if cleaned not in ROTATIONS:
        raise InvalidRotation(
            f"rotation: {name!r} is not one of {', '.join(ROTATIONS)} (how long a visitor id lives)",
            field="rotation",
        )
    return cast(Rotation, cleaned)


def period_start(rotation: Rotation, day: date) -> date:
    """The first day of the salt period holding `day` (UTC): the day, its ISO week's Monday, or
    its month's 1st."""
    if rotation == "weekly":
        return day - timedelta(days=day.weekday())
    if rotation == "monthly":
        return day.replace(day=1)
    return day


def next_period(rotation: Rotation, start: date) -> date:
    """The first day of the period after the one starting on `start`."""
    if rotation == "weekly":
        return start + timedelta(days=7)
    if rotation == "monthly":
        return (start.replace(day=28) + timedelta(days=4)).replace(day=1)
    return start + timedelta(days=1)


def set_rotation(client: Client, domain: str, rotation: str, actor: str = "") -> bool:
    """Records `rotation` as the site's from now on; False if `domain` is not registered.
    InvalidRotation (before the store is asked) for a rotation that is none."""
    chosen = checked_rotation(rotation)
    domain = normalise(domain)
    if domain not in list_sites(client):
        return False
    client.insert(SITE_IDENTITY, [[domain, chosen, actor]], column_names=["site", "rotation", "actor"])
    return True


def site_rotation(client: Client, domain: str) -> Rotation:
    """The rotation in force for the site (daily for a site that never chose one)."""
    history = identity_history(client, domain)
    return history[-1].rotation


def identity_history(client: Client, domain: str) -> list[IdentityChange]:
    """The site's identities in time order, each from when it held: the first from the start
    (daily, unless the first choice was made before any), a change only where the rotation
    changed (a choice repeated is no change)."""
    rows = client.query(
        f"SELECT rotation, changed_at FROM {SITE_IDENTITY} WHERE site = {{site:String}} ORDER BY changed_at",
        parameters={"site": normalise(domain)},
    ).result_rows
    history = [IdentityChange(DEFAULT_ROTATION, None)]
    for rotation, changed_at in rows:
        if rotation in ROTATIONS and rotation != history[-1].rotation:
            history.append(IdentityChange(cast(Rotation, rotation), as_utc(changed_at)))
    return history


def rotations(client: Client) -> dict[str, Rotation]:
    """Every site whose identity in force is not the default, with its rotation (what the
    collector reads every few seconds: a short answer, since most sites keep daily ids)."""
    rows = client.query(
        f"SELECT site, argMax(rotation, changed_at) AS rotation FROM {SITE_IDENTITY} GROUP BY site "
        f"HAVING rotation != {{default:String}}",
        parameters={"default": DEFAULT_ROTATION},
    ).result_rows
    return {site: cast(Rotation, rotation) for site, rotation in rows if rotation in ROTATIONS}
