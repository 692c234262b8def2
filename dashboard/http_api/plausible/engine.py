"""Plausible's v2 queries that Tally's fixed reports refuse, translated into the stats engine's
query model (stats/query.py) and answered through its planner (stats/planner.py): from the
stream jobs' `sessions` where it holds every metric asked (meta.source "agg"), else from the
archive (stats/raw_sql.py; meta.source "raw").

The reports (dashboard/http_api/plausible/report.py) answer one dimension at a time from a fixed menu.
What they refuse and the engine answers: two or three dimensions, visit metrics by an event
dimension (bounce rate by page), a visit property inside `or` / `not` together with an event
property, `has_done` / `has_not_done`, `matches_wildcard`, case-insensitive matching
(`{"case_sensitive": false}`), `percentage`, `exit_rate`, a visit-property filter with an event or
time dimension, and a dimension or filter only the catalogue names (`event:hostname`, a filter on
`event:name`, a goal inside `or`/`not`/`has_done`). Everything the reports answer still goes
their way. The engine's refusals are reworded as Plausible words its own (`Invalid filter '…'`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stats import catalogue, planner
from stats import query as model
from storage.calendar import bucket_starts, zone

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

    from dashboard.http_api.plausible.query import PlausibleQuery, QueryBody

# What only the engine answers (the reports refuse it).
ENGINE_METRICS = frozenset({"percentage", "exit_rate"})
ENGINE_OPERATORS = frozenset({"has_done", "has_not_done", "matches_wildcard", "matches_wildcard_not"})
VISIT_METRICS = frozenset({"visits", "bounce_rate", "visit_duration", "views_per_visit"})
# Dimensions whose rows the reports count as visits (the visit properties and time).
VISIT_DIMENSIONS = frozenset({
    "visit:entry_page", "visit:exit_page", "visit:source", "visit:utm_source", "visit:utm_medium",
    "visit:utm_campaign", "visit:utm_content", "visit:utm_term", "visit:channel",
})  # fmt: skip
GOAL = "event:goal"
# What the engine does not answer: the goals breakdown (the reports' goal report), and the
# metrics only the reports compute, and a top-level goal filter (the reports' conversions). A goal
# named inside has_done / has_not_done, or / not, the engine answers as an event filter (the goal's
# events), as Plausible does.
NOT_ENGINE_METRICS = frozenset({
    "conversion_rate", "group_conversion_rate", "total_revenue", "average_revenue", "time_on_page",
    "scroll_depth",
})  # fmt: skip


@dataclass(frozen=True)
class EngineParts:
    """A Plausible query in the model's terms, less its range (the PlausibleQuery holds it, so a
    compared range is the same query over other dates)."""

    metrics: tuple[str, ...]
    dimensions: tuple[str, ...]
    filters: model.Filter | None


# What the reports break down by, and filter by (the rest of the catalogue the engine answers).
REPORT_DIMENSIONS = frozenset({*catalogue.breakdowns(), "time", GOAL, "event:name"}) | {
    key for key in (model.key(entry) for entry in catalogue.DIMENSIONS) if key.startswith("time:")
}
REPORT_FILTERS = VISIT_DIMENSIONS | {
    entry.plausible
    for entry in catalogue.DIMENSIONS
    if entry.plausible and entry.rollup and entry.scope == "event"
}


def _reports_know(name: str, filtering: bool) -> bool:
    return bool(model.props_key(name)) or name in (REPORT_FILTERS if filtering else REPORT_DIMENSIONS)


def needs_engine(body: QueryBody) -> bool:
    """Whether `body` asks what only the engine answers (and nothing it cannot)."""
    if set(body.metrics) & NOT_ENGINE_METRICS or GOAL in body.dimensions:
        return False
    if any(_is_goal_filter(item) for item in body.filters):
        return False  # the reports' goal filter (conversions of the converted visitors) keeps its meaning
    named = {*body.dimensions, *(name for item in body.filters for name in _dimensions(item))}
    if not all(_known(name) for name in named):  # the reports' refusal names what Tally lacks
        return False
    if len(body.dimensions) > 1 or set(body.metrics) & ENGINE_METRICS:
        return True
    filtered = {name for item in body.filters if not _is_goal_filter(item) for name in _dimensions(item)}
    if not all(_reports_know(name, False) for name in body.dimensions) or not all(
        _reports_know(name, True) for name in filtered
    ):
        return True  # a catalogue dimension only the engine reads (event:hostname, an event:name filter)
    if any(_engine_filter(item) for item in body.filters):
        return True
    time_or_visit = (
        not body.dimensions or body.dimensions[0] in VISIT_DIMENSIONS or _is_time(body.dimensions[0])
    )
    if set(body.metrics) & VISIT_METRICS and not time_or_visit:
        return True  # visit metrics by an event dimension
    # a filter on visit properties with an event or time dimension
    visit_filter = any(_dimensions(item) and _dimensions(item) <= VISIT_DIMENSIONS for item in body.filters)
    return visit_filter and bool(body.dimensions) and body.dimensions[0] not in VISIT_DIMENSIONS


def _is_goal_filter(item: Any) -> bool:
    """The reports' goal filter: a top-level `["is", "event:goal", [NAME]]`."""
    return isinstance(item, list) and item[:2] == ["is", GOAL]


def _known(name: str) -> bool:
    return model.dimension_entry(name) is not None or bool(model.props_key(name))


def _is_time(name: str) -> bool:
    return name == "time" or name.startswith("time:")


def _dimensions(item: Any) -> set[str]:
    """The dimensions a Plausible filter names (nothing for a malformed one)."""
    if not isinstance(item, list) or len(item) < 2 or not isinstance(item[0], str):
        return set()
    if item[0] in ("and", "or") and isinstance(item[1], list):
        return set().union(*(_dimensions(operand) for operand in item[1]))
    if item[0] in ("not", "has_done", "has_not_done"):
        return _dimensions(item[1])
    return {item[1]} if isinstance(item[1], str) else set()


def _engine_filter(item: Any) -> bool:
    """Whether a filter uses what only the engine answers: a behavioural or wildcard operator,
    case-insensitive matching, or visit properties mixed with event properties in one filter."""
    if not isinstance(item, list) or not item or not isinstance(item[0], str):
        return False
    if item[0] in ENGINE_OPERATORS:
        return True
    if item[0] in ("and", "or") and len(item) == 2 and isinstance(item[1], list):
        named = _dimensions(item)
        mixed = bool(named & VISIT_DIMENSIONS) and bool(named - VISIT_DIMENSIONS)
        return mixed or any(_engine_filter(operand) for operand in item[1])
    if item[0] == "not" and len(item) == 2:
        named = _dimensions(item)
        return (bool(named & VISIT_DIMENSIONS) and bool(named - VISIT_DIMENSIONS)) or _engine_filter(item[1])
    return len(item) == 4 and isinstance(item[3], dict) and item[3].get("case_sensitive") is False


def parts(body: QueryBody, error: type[ValueError]) -> EngineParts:
    """The body in the model's terms, or `error` (QueryError) in Plausible's wording."""
    filters = [_filter(item, error, 0) for item in body.filters]
    joined = None if not filters else filters[0] if len(filters) == 1 else model.Logic("and", tuple(filters))
    dimensions = tuple(catalogue.TIME_ALIASES.get(name, name) for name in body.dimensions)
    return EngineParts(tuple(body.metrics), dimensions, joined)


def _filter(item: Any, error: type[ValueError], depth: int) -> model.Filter:
    shown = json.dumps(item)[:200]
    if not isinstance(item, list) or not item or not isinstance(item[0], str) or depth > model.MAX_DEPTH:
        raise error(f"Invalid filter '{shown}'.")
    operator = item[0]
    if operator in ("and", "or"):
        if len(item) != 2 or not isinstance(item[1], list) or not item[1]:
            raise error(f"Invalid filter '{shown}'.")
        return model.Logic(operator, tuple(_filter(operand, error, depth + 1) for operand in item[1]))
    if operator in ("not", "has_done", "has_not_done"):
        if len(item) != 2:
            raise error(f"Invalid filter '{shown}'.")
        inner = _filter(item[1], error, depth + 1)
        return model.Logic("not", (inner,)) if operator == "not" else model.Behaviour(operator, inner)
    if operator not in model.OPERATORS:
        raise error(f"Unknown operator for filter '{shown}'.")
    if len(item) not in (3, 4) or not isinstance(item[1], str) or not isinstance(item[2], list):
        raise error(f"Invalid filter '{shown}'.")
    if not all(isinstance(value, str) for value in item[2]):
        raise error(f"Invalid filter '{shown}': values are strings.")
    modifiers = item[3] if len(item) == 4 else {}
    if not isinstance(modifiers, dict) or set(modifiers) - {"case_sensitive"}:
        raise error(f"Invalid filter '{shown}': the only modifier is case_sensitive.")
    sensitive = modifiers.get("case_sensitive", True)
    if not isinstance(sensitive, bool):
        raise error(f"Invalid filter '{shown}': case_sensitive is true or false.")
    return model.Condition(operator, item[1], tuple(item[2]), sensitive)


def stats_query(
    query: PlausibleQuery, session_gap_s: int, engaged_bounce_ms: int, source: model.Source = "raw"
) -> model.Query:
    engine = query.engine
    assert engine is not None
    aliases = catalogue.TIME_ALIASES
    order_by = tuple((aliases.get(name, name), descending) for name, descending in query.order_by)
    return model.Query(
        query.site, query.start, query.end, engine.metrics, engine.dimensions, engine.filters,
        timezone=query.timezone, order_by=order_by, session_gap_s=session_gap_s,
        engaged_bounce_ms=engaged_bounce_ms, source=source,
    )  # fmt: skip


def check(query: PlausibleQuery, error: type[ValueError]) -> None:
    """`error` in Plausible's wording unless the engine would answer `query`."""
    try:
        model.validate(stats_query(query, 1800, 10_000))
    except model.InvalidQuery as refused:
        raise error(plausible_wording(refused, query.body)) from None


def plausible_wording(refused: model.InvalidQuery, body: QueryBody) -> str:
    """The engine's refusal as Plausible's parser words its own."""
    if refused.field.startswith("metrics[") and refused.problem.startswith("unknown metric"):
        return f"Unknown metric '{body.metrics[int(refused.field[8:-1])]}'."
    if refused.field.startswith("dimensions"):
        return f"Invalid dimensions '{json.dumps(body.dimensions)}': {refused.problem}."
    if refused.field == "filters":
        return f"Invalid filters: {refused.problem}."
    if refused.field.startswith("order_by"):
        return f"Invalid order_by entry: {refused.problem}."
    return f"Invalid {refused.field}: {refused.problem}."


def rows(
    client: Client, query: PlausibleQuery, source: model.Source, session_gap_s: int, engaged_bounce_ms: int
) -> tuple[list, list[str], model.Source]:
    """The engine's rows as (dimension values, metrics) pairs, time buckets labelled on the
    site's wall clock as the reports label them, every bucket's label (include.time_labels), and
    the source that answered (`source` asked: the planner's choice)."""
    from dashboard.http_api.plausible.query import QueryError
    from dashboard.http_api.plausible.report import bucket_label

    stats = stats_query(query, session_gap_s, engaged_bounce_ms, source)
    time = next((name for name in stats.dimensions if model.is_time(name)), None)
    bucket = model.dimension_entry(time).raw_sql if time else "day"  # type: ignore[union-attr]
    label = bucket_label(query.start, bucket, query.timezone)
    try:
        found = planner.answer(client, stats)
    except model.InvalidQuery as refused:  # what only the store knows: the site's goals
        raise QueryError(plausible_wording(refused, query.body)) from None
    answered = []
    for row in found.rows:
        values = tuple(
            label(value) if name == time else value
            for name, value in zip(stats.dimensions, row.dimensions, strict=True)
        )
        answered.append((values, row.metrics))
    labels = []
    if time:
        starts = bucket_starts(query.start, query.end, bucket, zone(query.timezone))  # type: ignore[arg-type]
        labels = list(dict.fromkeys(label(start) for start in starts))
    return answered, labels, found.source
