"""A Plausible query (dashboard.http_api.plausible.query) answered through Tally's query layer.

No SQL here: each kind of query is one or two storage.queries calls — aggregate (+ custom
events, or the goal's row), breakdown (+ engagement for pages), timeseries, goals, properties —
and the numbers are Tally's (contract.py), converted to Plausible's units: percentages 0-100
(bounce_rate a whole number, conversion rates 1 place), visit_duration whole seconds,
views_per_visit 2 places. Rows are then ordered and paginated as Plausible does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from clickhouse_connect.driver.client import Client

from dashboard.http_api.plausible import conversions as plausible_conversions
from dashboard.http_api.plausible import engine as plausible_engine
from dashboard.http_api.plausible.money import money
from dashboard.http_api.plausible.query import (
    AGGREGATE_METRICS,
    BLANK_SHOWN,
    DIMENSIONS,
    GOAL_DIMENSION,
    NAME_DIMENSION,
    PAGE_DIMENSION,
    SESSION_DIMENSIONS,
    PlausibleQuery,
    QueryError,
    props_key,
    shown_value,
)
from storage import queries
from storage.queries import GOAL_FILTER, GoalRow, Interval, Source, StatsQuery, questions
from storage.queries.contract import PROPS_FILTER, Condition, Logic, conversion_rate
from storage.sites import InvalidDomain, list_sites, normalise
from tally.refusal import Refused

ALL_ROWS = 10_000  # a breakdown is read whole (up to this), then ordered and paginated
MAX_TIME_BUCKETS = queries.MAX_BUCKETS


@dataclass(frozen=True)
class Row:
    dimensions: tuple[object, ...]
    metrics: dict[str, object]


@dataclass(frozen=True)
class Report:
    rows: list[Row]  # every row, ordered; the caller paginates
    source: Source  # the source that answered (a filtered query reads the archive)
    time_labels: list[str]


class SiteNotFound(Refused, LookupError):
    """A site_id Tally does not serve."""

    kind = "not_found"


def site_of(client: Client, site_id: str) -> str:
    """The registered site `site_id` names (as `tally sites add` stored it)."""
    try:
        site = normalise(site_id)
    except InvalidDomain:
        site = ""
    if not site or site not in list_sites(client):
        raise SiteNotFound(
            f"Site could not be found: {site_id!r} is not a site of this Tally (tally sites add)."
        )
    return site


def run(
    client: Client, query: PlausibleQuery, source: Source, session_gap_s: int, engaged_bounce_ms: int
) -> Report:
    if query.engine is not None:  # what only the stats engine answers, from the source its planner picks
        found, labels, by = plausible_engine.rows(client, query, source, session_gap_s, engaged_bounce_ms)
        found = plausible_conversions.added(client, query, found, source, session_gap_s, engaged_bounce_ms)
        return Report(ordered([Row(values, metrics) for values, metrics in found], query), by, labels)
    defined = questions.Defined(session_gap_s, engaged_bounce_ms)
    q = questions.question(
        query.site, query.start, query.end, defined, timezone=query.timezone, where=query.where
    )
    goal_q = replace(q, filters={GOAL_FILTER: query.goal}) if query.goal else q
    answered: Source = queries.answered_source(client, goal_q, source)
    labels: list[str] = []
    if query.visits is not None:  # sessions by their properties: the archive answers
        by = DIMENSIONS[query.dimension] if query.dimension else None
        visits = queries.session_totals(client, goal_q, query.visits, by, ALL_ROWS)
        rows, answered = [Row((row.value,) if by else (), visit_metrics(row.totals)) for row in visits], "raw"
    elif query.dimension is None:
        rows = [Row((), aggregate(client, query, q, goal_q, source))]
    elif query.dimension == GOAL_DIMENSION:
        rows = goal_rows(client, goal_q, source)
    elif query.dimension == NAME_DIMENSION:
        rows = event_name_rows(client, goal_q, source)
    elif props_key(query.dimension):
        rows = property_rows(client, goal_q, props_key(query.dimension), source)
    elif query.time_bucket:
        rows, labels = time_rows(client, goal_q, query.time_bucket, source, query.metrics)
    else:
        rows = breakdown_rows(client, goal_q, query.dimension, source)
    return Report(ordered(rows, query), answered, labels)


def aggregate(
    client: Client, query: PlausibleQuery, q: StatsQuery, goal_q: StatsQuery, source: Source
) -> dict[str, object]:
    """With a goal filter, visitors, events and conversion_rate are the goal's (unique and total
    conversions, Plausible's meaning); the other metrics those of the converted visitors."""
    asked = set(query.metrics)
    result: dict[str, object] = {}
    if asked & set(AGGREGATE_METRICS):
        totals = queries.aggregate(client, goal_q, source=source)
        result |= visit_metrics(totals)
        if "events" in asked and not query.goal:
            custom = queries.custom_events(client, q, ALL_ROWS, source=source)
            result["events"] = int(totals["pageviews"]) + sum(row.events for row in custom)
    if query.goal:
        goal = goal_row(client, q, query.goal, source)
        rate = conversion_percents(client, q, [goal], source)[0]
        # without a dimension, the group is everything: group_conversion_rate is conversion_rate
        result |= {"visitors": goal.visitors, "events": goal.events, "conversion_rate": rate}
        result |= {"group_conversion_rate": rate, **revenue_metrics(goal)}
    return result


def revenue_metrics(goal: GoalRow) -> dict[str, object]:
    """A revenue goal's total and average revenue in its currency, as Plausible shows money;
    null for a goal without a currency (Plausible's value without a currency to format it in)."""
    if not goal.currency:
        return {"total_revenue": None, "average_revenue": None}
    return {
        "total_revenue": money(goal.revenue_total, goal.currency),
        "average_revenue": money(goal.revenue_average, goal.currency),
    }


def conversion_base(q: StatsQuery) -> StatsQuery:
    """The query whose visitors a conversion rate divides by: Plausible's, `q` without its goal
    filter and its top-level property filters (special_metrics.ex: "X / Y where Y is the same
    … without goal or props filters"): a goal with `plan is pro` converts some of the site's
    visitors, not all of the few page views that carry a plan."""
    where = q.where
    if isinstance(where, Condition) and where.dimension.startswith(PROPS_FILTER):
        where = None
    elif isinstance(where, Logic) and where.operator == "and":
        kept = tuple(
            part
            for part in where.operands
            if not (isinstance(part, Condition) and part.dimension.startswith(PROPS_FILTER))
        )
        where = (kept[0] if len(kept) == 1 else Logic("and", kept)) if kept else None
    filters = {name: value for name, value in q.filters.items() if name != GOAL_FILTER}
    return replace(q, where=where, filters=filters, goal=None)


def conversion_percents(client: Client, q: StatsQuery, goals: list[GoalRow], source: Source) -> list[float]:
    """The goals' conversion rates in percent (2 places) over conversion_base(q)'s visitors; the
    goal report's own rates where `q` has no filter that the base leaves out."""
    base = conversion_base(q)
    if base == q:
        return [percent(goal.conversion_rate) for goal in goals]
    visitors = int(queries.aggregate(client, base, source=source)["visitors"])
    return [percent(conversion_rate(goal.visitors, visitors)) for goal in goals]


def visit_metrics(totals: dict[str, float]) -> dict[str, object]:
    """Tally's aggregate numbers (contract.metrics) in Plausible's names and units."""
    sessions = int(totals["sessions"])
    return {
        "visitors": int(totals["visitors"]),
        "visits": sessions,
        "pageviews": int(totals["pageviews"]),
        "views_per_visit": round(totals["pageviews"] / sessions, 2) if sessions else 0.0,
        "bounce_rate": round(totals["bounce_rate"] * 100),
        "visit_duration": round(totals["avg_session_duration_s"]),
    }


def goal_row(client: Client, q: StatsQuery, name: str, source: Source) -> GoalRow:
    for row in queries.goals(client, q, source=source):
        if row.goal == name:
            return row
    raise QueryError(f"The goal `{name}` is not configured for this site (tally goals add).")


def goal_rows(client: Client, q: StatsQuery, source: Source) -> list[Row]:
    """Each goal with conversions in the range (Plausible leaves out goals without)."""
    converted = [row for row in queries.goals(client, q, source=source) if row.visitors or row.events]
    return [
        Row(
            (row.goal,),
            {"visitors": row.visitors, "events": row.events, "conversion_rate": rate, **revenue_metrics(row)},
        )
        for row, rate in zip(converted, conversion_percents(client, q, converted, source), strict=True)
    ]


def event_name_rows(client: Client, q: StatsQuery, source: Source) -> list[Row]:
    """Events by name, `pageview` among them (Plausible's event:name; engagement events are
    none of Plausible's events)."""
    rows = [
        Row((row.value,), {"visitors": row.visitors, "events": row.events})
        for row in queries.custom_events(client, q, ALL_ROWS, source=source)
    ]
    totals = queries.aggregate(client, q, source=source)
    if totals["pageviews"]:
        rows.insert(
            0, Row(("pageview",), {"visitors": int(totals["visitors"]), "events": int(totals["pageviews"])})
        )
    return rows


def property_rows(client: Client, q: StatsQuery, key: str, source: Source) -> list[Row]:
    rows = queries.properties(client, q, key, limit=ALL_ROWS, source=source)
    return [Row((row.value,), {"visitors": row.visitors, "events": row.events}) for row in rows]


def breakdown_rows(client: Client, q: StatsQuery, dimension: str, source: Source) -> list[Row]:
    if dimension in SESSION_DIMENSIONS:
        by = DIMENSIONS[dimension]
        rows_of_sessions = queries.session_breakdown(client, q, by, ALL_ROWS, source=source)
        return [Row((row.value,), visit_metrics(row.totals)) for row in rows_of_sessions]
    rows = queries.breakdown(client, q, DIMENSIONS[dimension], ALL_ROWS, source=source)
    engaged = {}
    if dimension == PAGE_DIMENSION and rows:
        engaged = queries.engagement(client, q, [row.value for row in rows], source=source)
    result = []
    for row in rows:
        page = engaged.get(row.value)
        metrics: dict[str, object] = {
            "visitors": row.visitors,
            "pageviews": row.pageviews,
            "time_on_page": round(page.time_on_page_s) if page else None,
            "scroll_depth": round(page.scroll_depth) if page else None,
        }
        result.append(Row((row.value,), metrics))
    return result


def time_rows(
    client: Client, q: StatsQuery, bucket: str, source: Source, metrics: tuple[str, ...]
) -> tuple[list[Row], list[str]]:
    """Per bucket of the site's zone: page views and visitors by event time, visits, bounces and
    durations of the sessions starting in it (read only when asked). The query layer counts each
    bucket itself, weeks and months too: a local day's visitors are (UTC day, visitor) pairs, so
    local days do not add up to a week exactly (contract.py). Buckets without page views or
    visits are left out of the rows, as Plausible does; `time_labels` lists them all. The hour a
    clock repeats (autumn) is one label, its two hours added."""
    interval: Interval = bucket  # type: ignore[assignment]
    if queries.bucket_count(q.start, q.end, interval) > MAX_TIME_BUCKETS:
        raise QueryError(
            f"Invalid dimensions: time:{bucket} over this date_range is over {MAX_TIME_BUCKETS:,} buckets."
        )
    label = bucket_label(q.start, bucket, q.timezone)
    # per label: pageviews, visitors, sessions, bounces, duration_ms
    counts: dict[str, list[int]] = {}
    for point in queries.timeseries(client, q, interval, source=source):
        total = counts.setdefault(label(point.t), [0] * 5)
        total[0] += point.pageviews
        total[1] += point.visitors
    if set(metrics) & {"visits", "views_per_visit", "bounce_rate", "visit_duration"}:
        for session_point in queries.session_timeseries(client, q, interval, source=source):
            total = counts.setdefault(label(session_point.t), [0] * 5)
            total[2] += session_point.sessions
            total[3] += session_point.bounces
            total[4] += session_point.duration_ms
    rows = [
        Row(
            (name,),
            visit_metrics(queries.metrics_from_totals(*numbers[:5])),
        )
        for name, numbers in counts.items()
        if numbers[0] or numbers[1] or numbers[2]
    ]
    return rows, list(counts)


def bucket_label(start: datetime, bucket: str, timezone: str = "UTC") -> Callable[[datetime], str]:
    """A bucket's label on the site's wall clock: `2026-11-10 09:00:00` for hours, its first day
    for days, weeks (from Monday) and months; a week or month begun before the range is
    labelled with the range's first day."""
    tz = queries.zone(timezone)
    first_day = start.astimezone(tz).date()

    def label(moment: datetime) -> str:
        local = moment.astimezone(tz)
        if bucket == "hour":
            return local.strftime("%Y-%m-%d %H:00:00")
        day = local.date()
        if bucket == "week":
            day = max(day - timedelta(days=day.weekday()), first_day)
        elif bucket == "month":
            day = max(day.replace(day=1), first_day)
        return day.isoformat()

    return label


def shown(report: Report, query: PlausibleQuery) -> Report:
    """`report` with blank values named as Plausible's results name them ("Direct / None" for a
    visit without referrer, "(not set)" for a blank UTM), ordered again by those names."""
    dimensions = query.body.dimensions
    if not any(name in BLANK_SHOWN for name in dimensions):
        return report
    rows = [
        Row(tuple(shown_value(name, value) for name, value in zip(dimensions, row.dimensions, strict=True)),
            row.metrics)
        for row in report.rows
    ]  # fmt: skip
    return replace(report, rows=ordered(rows, query))


def ordered(rows: list[Row], query: PlausibleQuery) -> list[Row]:
    """Sorted by the order_by entries, the first deciding (a stable sort, last key first)."""
    dimensions = query.body.dimensions
    result = list(rows)
    for name, descending in reversed(query.order_by):
        if name in dimensions:
            index = dimensions.index(name)
            result.sort(key=lambda row: str(row.dimensions[index]), reverse=descending)
        else:
            result.sort(key=lambda row: _number(row.metrics.get(name)), reverse=descending)
    return result


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else -1.0


def percent(rate: float) -> float:
    """A 0-1 rate with 4 places (contract.py) as Plausible's percentage with 1 place
    (special_metrics.ex: `round(x / y * 100, 1)`)."""
    return round(rate * 100, 1)
