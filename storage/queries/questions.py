"""One place that turns a question into a StatsQuery, whichever door asks it.

A question is a site, a range [start, end) of UTC instants (a door works out the range: the
dashboard's and the API's presets in the site's zone, dashboard/periods.py; an email report's
whole local days, storage/report_subscriptions.py), the site's zone (where its days start), the
definitions in force (what a visit is, when it bounces: storage/definitions.py) and filters:
the dashboard's and the API's dimension → value, an expression, and a saved segment.

Every door builds its StatsQuery here, so the definitions, the zone and a segment are applied
the same way everywhere: the dashboard's Overview, Explore, Funnel, provenance line and what-if
panel, `/api/v1`, Plausible's v1 and v2, the CLI and email reports. Before, a door that forgot
the engaged-bounce threshold or the zone answered its own number for the same question.

Saved segments are written in Plausible's v2 filter syntax (storage/segments.py); they are
checked by Plausible's parser when saved (dashboard/segments.py) and translated here when a
question applies one, with the names in PLAUSIBLE_NAMES.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

from clickhouse_connect.driver.client import Client

from storage.calendar import UTC_NAME
from storage.queries.contract import (
    ENGAGED_BOUNCE_MS,
    FILTER_OPERATORS,
    GOAL_FILTER,
    MAX_FILTER_VALUES,
    PROPS_FILTER,
    SESSION_GAP_S,
    Condition,
    Expression,
    Logic,
    StatsQuery,
    UnsupportedQuery,
    validate_expression,
)
from storage.segments import find_segment

# The dashboard's filters may name a saved segment: {"segment": NAME} (dashboard/segments.py).
SEGMENT_FILTER = "segment"
# Tally's filter names → Plausible's (a segment's syntax); props.KEY is event:props:KEY and the
# goal filter event:goal. Device type and language have no Plausible name: no segment holds them.
PLAUSIBLE_NAMES = {
    "path": "event:page",
    "country": "visit:country",
    "screen_size": "visit:device",
    "browser": "visit:browser",
    "os": "visit:os",
    "referrer_domain": "visit:source",
    "utm_source": "visit:utm_source",
    "utm_medium": "visit:utm_medium",
    "utm_campaign": "visit:utm_campaign",
    "utm_content": "visit:utm_content",
    "utm_term": "visit:utm_term",
    "entry_path": "visit:entry_page",
    "exit_path": "visit:exit_page",
    "channel": "visit:channel",
    GOAL_FILTER: "event:goal",
}
TALLY_NAMES = {plausible: tally for tally, plausible in PLAUSIBLE_NAMES.items()}
PLAUSIBLE_PROPS = "event:props:"
MAX_DEPTH = 10


class VisitDefinitions(Protocol):
    """What a visit is and when it bounces: Settings, or the current definitions version's."""

    @property
    def session_gap_s(self) -> int: ...

    @property
    def engaged_bounce_ms(self) -> int: ...


@dataclass(frozen=True)
class Defined:
    """Definitions given as numbers (the built-in ones by default): a door handed the gap and threshold."""

    session_gap_s: int = SESSION_GAP_S
    engaged_bounce_ms: int = ENGAGED_BOUNCE_MS


def question(
    site: str,
    start: datetime,
    end: datetime,
    defined: VisitDefinitions | None = None,
    *,
    timezone: str = UTC_NAME,
    filters: dict[str, str] | None = None,
    where: Expression | None = None,
) -> StatsQuery:
    """The StatsQuery every door asks: `site` over [start, end) in `timezone`, with the
    definitions in force (the built-in ones without `defined`) and the filters given."""
    defined = defined or Defined()
    return StatsQuery(
        site,
        start,
        end,
        filters=dict(filters or {}),
        session_gap_s=defined.session_gap_s,
        engaged_bounce_ms=defined.engaged_bounce_ms,
        where=where,
        timezone=timezone,
    )


def over(q: StatsQuery, span: tuple[datetime, datetime]) -> StatsQuery:
    """The same question over another range: the one a comparison reads."""
    return replace(q, start=span[0], end=span[1])


@dataclass(frozen=True)
class SegmentFilters:
    """A segment's filters in Tally's terms: the events' expression and the goal (or None)."""

    where: Expression | None
    goal: str | None


def with_segment(q: StatsQuery, segment: SegmentFilters) -> StatsQuery:
    """`q` restricted by `segment` too: its expression joins `q`'s by and, its goal is the goal filter."""
    filters = {name: value for name, value in q.filters.items() if name != SEGMENT_FILTER}
    if segment.goal:
        filters[GOAL_FILTER] = segment.goal
    where = segment.where
    if q.where is not None and where is not None:
        where = Logic("and", (q.where, where))
    return replace(q, filters=filters, where=where if where is not None else q.where)


def with_saved_segment(client: Client, q: StatsQuery) -> StatsQuery:
    """`q` with the saved segment its filters name ({"segment": NAME}) applied; `q` without one."""
    name = q.filters.get(SEGMENT_FILTER)
    if name is None:
        return q
    return with_segment(q, segment_filters(find_segment(client, q.site, name).filters))


def segment_filters(items: list[Any]) -> SegmentFilters:
    """A segment's Plausible filter list as Tally's expression and goal, joined by and; a visit
    property restricts the events of the visits that came that way (contract.py). UnsupportedQuery
    naming the filter Tally cannot apply."""
    goal, conditions = None, []
    for item in items:
        if isinstance(item, list) and len(item) == 3 and item[:2] == ["is", PLAUSIBLE_NAMES[GOAL_FILTER]]:
            values = item[2]
            if goal is not None or not isinstance(values, list) or len(values) != 1:
                raise UnsupportedQuery(f"segment filter {shown(item)}: one goal per segment")
            goal = str(values[0])
            continue
        conditions.append(segment_expression(item, 0))
    if not conditions:
        return SegmentFilters(None, goal)
    where = conditions[0] if len(conditions) == 1 else Logic("and", tuple(conditions))
    validate_expression(where)  # e.g. a pattern past the bounds
    return SegmentFilters(where, goal)


def segment_expression(item: Any, depth: int) -> Expression:
    if not isinstance(item, list) or not item or depth > MAX_DEPTH:
        raise UnsupportedQuery(f"segment filter {shown(item)}: not a filter")
    operator = item[0]
    if operator in ("and", "or") and len(item) == 2 and isinstance(item[1], list) and item[1]:
        return Logic(operator, tuple(segment_expression(operand, depth + 1) for operand in item[1]))
    if operator == "not" and len(item) == 2:
        return Logic("not", (segment_expression(item[1], depth + 1),))
    if (
        operator in FILTER_OPERATORS
        and len(item) in (3, 4)
        and isinstance(item[1], str)
        and isinstance(item[2], list)
        and 0 < len(item[2]) <= MAX_FILTER_VALUES
        and all(isinstance(value, str) for value in item[2])
        and (len(item) == 3 or item[3] in ({}, {"case_sensitive": True}))
    ):
        return Condition(operator, tally_name(item[1], item), tuple(item[2]))
    raise UnsupportedQuery(f"segment filter {shown(item)}: not a filter Tally applies")


def tally_name(plausible: str, item: Any) -> str:
    """Tally's dimension for Plausible's name in a segment's condition."""
    if plausible.startswith(PLAUSIBLE_PROPS) and plausible != PLAUSIBLE_PROPS:
        return PROPS_FILTER + plausible.removeprefix(PLAUSIBLE_PROPS)
    name = TALLY_NAMES.get(plausible)
    if name is None or name == GOAL_FILTER:  # a goal only as a top-level `is`
        raise UnsupportedQuery(f"segment filter {shown(item)}: {plausible} is not a filter Tally applies")
    return name


def shown(item: Any) -> str:
    return json.dumps(item)[:200]
