"""Goals: what a site owner counts as a conversion (migration 0022, table `goals`).

A goal is an event goal (a custom event's name, e.g. "Signup") or a page goal (a path
pattern, e.g. `/checkout/*`, storage/page_patterns.py), optionally a revenue goal (an ISO-4217
currency). A page goal is named "Visit <pattern>", as Plausible names them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from clickhouse_connect.driver.client import Client

from storage import definitions, site_caps
from storage.page_patterns import BadPattern, validate_pattern
from storage.site_settings_rows import SettingsTable
from storage.sites import list_sites, normalise, registered
from tally.refusal import Refused

GoalKind = Literal["event", "page"]
MAX_GOAL_NAME = 120
CURRENCY = re.compile(r"^[A-Z]{3}$")
# Event names that are never goals: page views have page goals; engagement events are
# another feature's (scroll depth, engaged time).
RESERVED_EVENTS = frozenset({"pageview", "engagement"})
GOALS = SettingsTable(
    "goals", keys=("site", "goal"), values=("kind", "event_name", "page_pattern", "currency")
)


class InvalidGoal(Refused):
    """A goal Tally cannot add or remove; the message names what is wrong."""


@dataclass(frozen=True)
class Goal:
    site: str
    name: str
    kind: GoalKind
    event_name: str = ""
    page_pattern: str = ""
    currency: str = ""

    @property
    def is_revenue(self) -> bool:
        return bool(self.currency)


def page_goal_name(pattern: str) -> str:
    return f"Visit {pattern}"


def make_goal(site: str, event_name: str = "", page_pattern: str = "", currency: str = "") -> Goal:
    """A validated goal (no store needed): exactly one of event_name and page_pattern."""
    site = normalise(site)
    event_name, page_pattern = event_name.strip(), page_pattern.strip()
    if bool(event_name) == bool(page_pattern):
        raise InvalidGoal("a goal is either an event name or a page pattern (--page), not both or neither")
    currency = currency.strip().upper()
    if currency and not CURRENCY.match(currency):
        raise InvalidGoal(f"currency must be an ISO-4217 code of 3 letters, e.g. EUR (got {currency!r})")
    if page_pattern:
        try:
            pattern = validate_pattern(page_pattern)
        except BadPattern as error:
            raise InvalidGoal(f"page pattern {page_pattern!r}: {error}") from None
        return Goal(site, page_goal_name(pattern), "page", page_pattern=pattern, currency=currency)
    if len(event_name) > MAX_GOAL_NAME or not event_name.isprintable():
        raise InvalidGoal(f"an event name has at most {MAX_GOAL_NAME} printable characters")
    if event_name.lower() in RESERVED_EVENTS:
        raise InvalidGoal(f"{event_name!r} is not a custom event (use --page for page goals)")
    return Goal(site, event_name, "event", event_name=event_name, currency=currency)


def add_goal(client: Client, goal: Goal) -> Goal:
    apply_goals(client, goal.site, added=[goal], removed=[])
    return goal


def remove_goal(client: Client, site: str, name: str) -> Goal:
    site = normalise(site)
    goal = _existing(client, site, name.strip())
    apply_goals(client, site, added=[], removed=[goal.name])
    return goal


def apply_goals(client: Client, site: str, added: list[Goal], removed: list[str]) -> None:
    """Add and remove goals of one site together, as one definitions version (every path that
    changes goals comes here: the CLI, the dashboard, `tally whatif goals --apply`)."""
    site = normalise(site)
    current, _ = proposal(client, site, added, removed)
    gone = [goal for goal in current if goal.name in removed]
    readded = {goal.name for goal in added}
    for goal in gone:
        if goal.name not in readded:  # a goal removed and added again (another currency): one row
            _write(client, goal, removed=1)
    for goal in added:
        _write(client, goal, removed=0)
    definitions.record_rules(client, change_note(site, added, [goal.name for goal in gone]))


def proposal(
    client: Client, site: str, added: list[Goal], removed: list[str]
) -> tuple[list[Goal], list[Goal]]:
    """(the site's goals, the goals it would have with `added` and without `removed`), or
    InvalidGoal naming what cannot be done (an unknown site or goal, a name taken twice)."""
    site = registered(client, site, InvalidGoal)
    current = list_goals(client, site)
    names = {goal.name for goal in current}
    for name in removed:
        if name not in names:
            raise InvalidGoal(f"{site} has no goal {name!r} (see 'tally goals list {site}')")
    kept = [goal for goal in current if goal.name not in removed]
    taken = {goal.name for goal in kept}
    for goal in added:
        if goal.name in taken:
            raise InvalidGoal(f"{site} already has a goal {goal.name!r}")
        taken.add(goal.name)
    site_caps.GOALS.check(len(kept), InvalidGoal, adding=len(added))
    return current, sorted([*kept, *added], key=lambda goal: goal.name)


def change_note(site: str, added: list[Goal], removed: list[str]) -> str:
    """'goal added on example.com: Signup', or for several 'goals on example.com: +A -B'."""
    if len(added) + len(removed) == 1:
        verb, name = ("added", added[0].name) if added else ("removed", removed[0])
        return f"goal {verb} on {site}: {name}"
    return f"goals on {site}: " + " ".join([*(f"+{g.name}" for g in added), *(f"-{n}" for n in removed)])


def _existing(client: Client, site: str, name: str) -> Goal:
    for goal in list_goals(client, site):
        if goal.name == name:
            return goal
    raise InvalidGoal(f"{site} has no goal {name!r} (see 'tally goals list {site}')")


def list_goals(client: Client, site: str) -> list[Goal]:
    """The site's goals, by name."""
    rows = GOALS.newest(client, "site = {site:String}", {"site": site}, order=("goal",))
    return [
        Goal(site, name, kind, event, pattern, currency) for _, name, kind, event, pattern, currency in rows
    ]


def find_goal(client: Client, site: str, name: str) -> Goal:
    """The site's goal called `name`, or InvalidGoal."""
    for goal in list_goals(client, site):
        if goal.name == name:
            return goal
    raise InvalidGoal(f"{site} has no goal {name!r}")


def _write(client: Client, goal: Goal, removed: int) -> None:
    GOALS.write(
        client,
        [[goal.site, goal.name, goal.kind, goal.event_name, goal.page_pattern, goal.currency]],
        removed,
    )


# --- what a definitions version holds (storage/definitions.py: RULE_KINDS) --------------------

_FIELDS = ("name", "kind", "event_name", "page_pattern", "currency")


def contents(client: Client) -> dict[str, list[dict[str, str]]]:
    """Every registered site's goals (a site without goals: an empty list), for a version."""
    by_site: dict[str, list[dict[str, str]]] = {site: [] for site in list_sites(client)}
    rows = GOALS.newest(client, order=("site", "goal"))
    for site, *values in rows:
        if site in by_site:
            by_site[site].append(dict(zip(_FIELDS, values, strict=True)))
    return by_site


def restore(client: Client, stored: dict[str, list[dict[str, str]]]) -> None:
    """Each site `stored` names gets exactly its goals there (no version is recorded: the
    caller is switching to the version these come from)."""
    for site, items in stored.items():
        wanted = {item["name"]: Goal(site, **_goal_fields(item)) for item in items}
        have = {goal.name: goal for goal in list_goals(client, site)}
        for name, goal in have.items():
            if name not in wanted:
                _write(client, goal, removed=1)
        for name, goal in wanted.items():
            if have.get(name) != goal:
                _write(client, goal, removed=0)


def _goal_fields(item: dict[str, str]) -> dict[str, str]:
    return {field: item[field] for field in _FIELDS}
