"""Conversion rates of a goal-filtered breakdown, as Plausible computes them
(lib/plausible/stats/sql/special_metrics.ex), answered by the stats engine:

- conversion_rate: a row's converted visitors over ALL the visitors of the same query without its
  top-level goal and property filters and without dimensions, in percent with one place;
- group_conversion_rate: a row's converted visitors over the visitors of ITS dimension values in
  that same query without goal and property filters (the share of the page's visitors who
  converted), in percent with one place.

The rows themselves (visitors, events, …) are the engine's with the goal filter as an event filter
(the goal's events), so a custom event's page is the page it was sent from, as in Plausible.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from stats import query as model

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

    from dashboard.http_api.plausible.engine import EngineParts
    from dashboard.http_api.plausible.query import PlausibleQuery, QueryBody
    from stats.query import Source

CONVERSION_METRICS = ("conversion_rate", "group_conversion_rate")
GOAL = "event:goal"
PROPS = "event:props:"


def by_dimension(body: QueryBody) -> bool:
    """Whether `body` asks a conversion rate of a goal-filtered breakdown (not by goal: the goals
    report answers that)."""
    return (
        bool(set(body.metrics) & set(CONVERSION_METRICS))
        and bool(body.dimensions)
        and GOAL not in body.dimensions
        and any(isinstance(item, list) and item[:2] == ["is", GOAL] for item in body.filters)
    )


def engine_parts(parts: EngineParts) -> EngineParts:
    """`parts` with the conversion metrics left to this module and the visitors they divide."""
    metrics = tuple(name for name in parts.metrics if name not in CONVERSION_METRICS)
    return replace(parts, metrics=tuple(dict.fromkeys((*metrics, "visitors"))))


def added(
    client: Client,
    query: PlausibleQuery,
    rows: list[tuple[tuple[Any, ...], dict[str, Any]]],
    source: Source,
    session_gap_s: int,
    engaged_bounce_ms: int,
) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """`rows` (the engine's, with visitors) with the conversion metrics `query` asks."""
    from dashboard.http_api.plausible import engine as plausible_engine

    asked = set(query.metrics) & set(CONVERSION_METRICS)
    if not asked or query.engine is None:
        return rows
    base = replace(query.engine, metrics=("visitors",), filters=without_goal_and_props(query.engine.filters))

    def visitors(dimensions: tuple[str, ...]) -> dict[tuple[Any, ...], int]:
        parts = replace(base, dimensions=dimensions)
        asked = replace(query, engine=parts)
        found, _, _ = plausible_engine.rows(client, asked, source, session_gap_s, engaged_bounce_ms)
        return {values: int(metrics["visitors"]) for values, metrics in found}

    total = visitors(()).get((), 0) if "conversion_rate" in asked else 0
    groups = visitors(query.engine.dimensions) if "group_conversion_rate" in asked else {}
    result = []
    for values, metrics in rows:
        converted = int(metrics["visitors"])
        extra = {}
        if "conversion_rate" in asked:
            extra["conversion_rate"] = percent(converted, total)
        if "group_conversion_rate" in asked:
            extra["group_conversion_rate"] = percent(converted, groups.get(values, 0))
        result.append((values, {**metrics, **extra}))
    return result


def without_goal_and_props(filters: model.Filter | None) -> model.Filter | None:
    """The filters less their top-level goal and property conditions (special_metrics.ex's
    `remove_top_level_filters(["event:goal", "event:props"])`)."""
    top_level = isinstance(filters, model.Logic) and filters.operator == "and"
    operands = filters.operands if isinstance(filters, model.Logic) and top_level else (filters,)
    kept = tuple(part for part in operands if part is not None and not _goal_or_props(part))
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else model.Logic("and", kept)


def _goal_or_props(part: model.Filter) -> bool:
    return isinstance(part, model.Condition) and (part.dimension == GOAL or part.dimension.startswith(PROPS))


def percent(part: int, whole: int) -> float:
    """Plausible's `if(whole > 0, round(part / whole * 100, 1), 0)`."""
    return round(part / whole * 100, 1) if whole else 0.0
