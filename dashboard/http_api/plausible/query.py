"""Plausible's Stats API v2 request (`POST /api/v2/query`), parsed and checked: pure, no I/O.

The body is read with pydantic in Plausible's own shape; what Tally can answer becomes a
`PlausibleQuery` in Tally's vocabulary (storage.queries' dimensions and filter expressions);
everything else is refused with `QueryError`, worded as Plausible words its own errors
(`Unknown metric 'x'.`, `Invalid date_range "…"`) and naming the part Tally does not support.
docs/plausible-api.md lists what is supported and how each name maps onto Tally's definitions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dashboard.http_api.plausible import conversions as plausible_conversions
from dashboard.http_api.plausible import engine as plausible_engine
from dashboard.http_api.plausible.engine import EngineParts
from stats import catalogue
from storage.calendar import UTC_NAME, local_date, local_midnight, zone
from storage.queries.contract import (
    FILTER_OPERATORS,
    MAX_FILTER_VALUES,
    MAX_PROPERTY_KEY,
    PROPS_FILTER,
    Condition,
    Expression,
    FilterOperator,
    Logic,
    UnsupportedQuery,
    check_patterns,
    dimensions_of,
)
from storage.queries.contract import (
    SESSION_DIMENSIONS as TALLY_SESSION_DIMENSIONS,
)
from tally.refusal import Refused

MAX_LIMIT = 10_000  # Plausible's default and largest page
PROPS_DIMENSION = "event:props:"
GOAL_DIMENSION = "event:goal"
PAGE_DIMENSION = "event:page"
NAME_DIMENSION = "event:name"
TIME_DIMENSIONS = {
    "time": "day",
    "time:hour": "hour",
    "time:day": "day",
    "time:week": "week",
    "time:month": "month",
}
# Plausible's name → Tally's dimension (the catalogue's, stats/catalogue.py). visit:device is
# Plausible's screen-size class (Mobile < 576 px, Tablet < 992, Laptop < 1440, Desktop), which
# is Tally's screen_size with the same thresholds, not the user agent's device type.
DIMENSIONS = catalogue.breakdowns()
# Those a filter may name: the event-level ones (a filter restricts events; contract.py).
FILTER_DIMENSIONS = {
    name: DIMENSIONS[name]
    for name in ("event:page", "visit:country", "visit:device", "visit:browser", "visit:os")
}
# Plausible's names Tally knows but cannot answer (it does not record them, or not this way).
UNSUPPORTED_DIMENSIONS = frozenset({
    "visit:referrer", "visit:region", "visit:city",
    "visit:country_name", "visit:region_name", "visit:city_name", "visit:device_type",
    "visit:browser_version", "visit:os_version", "visit:entry_page_hostname", "visit:exit_page_hostname",
})  # fmt: skip
METRICS = (
    "visitors", "visits", "pageviews", "views_per_visit", "bounce_rate", "visit_duration", "events",
    "conversion_rate", "group_conversion_rate", "total_revenue", "average_revenue", "time_on_page",
    "scroll_depth",
)  # fmt: skip
UNSUPPORTED_METRICS = frozenset({"percentage", "exit_rate"})  # the engine's, with other metrics
# With a goal filter: the converted visitors over all visitors of the same query without its goal
# and top-level property filters (conversion_rate), or over those of the row's dimension values
# (group_conversion_rate); revenue metrics: the goal's revenue (report.py).
CONVERSION_METRICS = ("conversion_rate", "group_conversion_rate")
REVENUE_METRICS = ("total_revenue", "average_revenue")
UTC_ZONE = ZoneInfo(UTC_NAME)
# Plausible's relative ranges (its ApiQueryParser): day, month, year, all, any "Nd" (the N whole days
# before the reference day, 1 <= N <= 5000) and any "Nmo" (the N whole months before the
# reference day's month, 1 <= N <= 100); the reference day itself (its month) is left out.
LAST_N = re.compile(r"([0-9]{1,5})(d|mo)")
MOST_LAST_N = {"d": 5000, "mo": 100}
RELATIVE_RANGE_PATTERN = r"^(day|month|year|all|[0-9]+d|[0-9]+mo)$"  # dashboard/http_api/openapi.py's
# How Plausible's results name a blank value, by dimension, and the names its filters take for one.
NO_REFERRER, NOT_SET = "Direct / None", "(not set)"
UTM_DIMENSIONS = (
    "visit:utm_source",
    "visit:utm_medium",
    "visit:utm_campaign",
    "visit:utm_content",
    "visit:utm_term",
)
BLANK_SHOWN = {"visit:source": NO_REFERRER, **dict.fromkeys(UTM_DIMENSIONS, NOT_SET)}
BLANK_NAMES = {
    "visit:source": (NO_REFERRER, NOT_SET),
    **dict.fromkeys(UTM_DIMENSIONS, (NO_REFERRER, NOT_SET)),
}
UNSUPPORTED_OPERATORS = frozenset({"matches_wildcard", "matches_wildcard_not", "has_done", "has_not_done"})
MAX_FILTER_DEPTH = 10
# Tally's names of the sessions' properties (channel: storage/channels.py)
VISIT_COLUMNS = frozenset({*TALLY_SESSION_DIMENSIONS, "channel"})


class QueryError(Refused):
    """A request Tally refuses (400), the message in Plausible's wording."""


class Include(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    imports: bool = False
    time_labels: bool = False
    total_rows: bool = False
    comparisons: Any = None


class Pagination(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    limit: int = Field(default=MAX_LIMIT, ge=1, le=MAX_LIMIT)
    offset: int = Field(default=0, ge=0)


class QueryBody(BaseModel):
    """The request body as Plausible documents it (https://plausible.io/docs/stats-api)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    site_id: str = Field(min_length=1, max_length=253)
    metrics: list[str] = Field(min_length=1, max_length=len(METRICS))
    date_range: str | list[str]
    date: str | None = None
    dimensions: list[str] = Field(default_factory=list, max_length=10)
    filters: list[Any] = Field(default_factory=list, max_length=50)
    order_by: list[list[str]] | None = None
    include: Include = Field(default_factory=Include)
    pagination: Pagination = Field(default_factory=Pagination)


@dataclass(frozen=True)
class PlausibleQuery:
    """What Tally answers: one site, [start, end) as UTC instants, at most one dimension (Tally's
    name, a time bucket, `goal` or `props.KEY`), the filters as Tally's expression plus a goal;
    days, weeks and months of the site's `timezone`."""

    body: QueryBody
    site: str
    start: datetime
    end: datetime
    metrics: tuple[str, ...]
    dimension: str | None  # the Plausible name, e.g. event:page or time:day
    where: Expression | None
    goal: str | None
    order_by: tuple[tuple[str, bool], ...]  # (metric or dimension, descending)
    visits: Expression | None = None  # filters on the sessions' properties
    timezone: str = UTC_NAME
    engine: EngineParts | None = (
        None  # what only the stats engine answers (dashboard/http_api/plausible/engine.py)
    )

    @property
    def time_bucket(self) -> str | None:
        return TIME_DIMENSIONS.get(self.dimension or "")


def parse_body(raw: bytes) -> QueryBody:
    """The JSON body as a QueryBody, or QueryError naming the field at fault."""
    try:
        document = json.loads(raw or b"null")
    except (ValueError, RecursionError):
        raise QueryError("Invalid request body: not JSON.") from None
    if not isinstance(document, dict):
        raise QueryError("Invalid request body: expected a JSON object with site_id, metrics and date_range.")
    return validated(document)


def validated(document: dict[str, Any]) -> QueryBody:
    """`document` as a QueryBody, or QueryError naming the field at fault (`#/field: problem`)."""
    try:
        return QueryBody.model_validate(document)
    except ValidationError as invalid:
        first = invalid.errors()[0]
        where = "/".join(str(part) for part in first["loc"])
        raise QueryError(f"#/{where}: {first['msg']}") from None


def plan(body: QueryBody, now: datetime, first_day: date | None, timezone: str = UTC_NAME) -> PlausibleQuery:
    """The query in Tally's terms; `first_day` is the site's first day with events (for "all"),
    `timezone` the site's (its "day" starts at its midnight)."""
    check_views_per_visit(body)
    parsed = body.model_copy(update={"filters": stored_values(body.filters)})  # `body` stays the echo
    if plausible_engine.needs_engine(parsed) or plausible_conversions.by_dimension(parsed):
        return engine_plan(body, parsed, now, first_day, timezone)
    for metric in body.metrics:
        if metric not in METRICS:
            detail = " (not supported by Tally)" if metric in UNSUPPORTED_METRICS else ""
            raise QueryError(f"Unknown metric '{metric}'{detail}.")
    if len(set(body.metrics)) != len(body.metrics):
        raise QueryError(f"Metrics cannot be queried multiple times: {body.metrics}.")
    start, end = time_range(body.date_range, body.date, now, first_day, timezone)
    dimension = single_dimension(body.dimensions)
    chosen = filters(parsed.filters)
    if body.include.time_labels and dimension not in TIME_DIMENSIONS:
        raise QueryError("Invalid include.time_labels: requires a time dimension.")
    order_by = orders(body.order_by, body.metrics, body.dimensions)
    query = PlausibleQuery(
        body, body.site_id, start, end, tuple(body.metrics), dimension, chosen.where, chosen.goal, order_by,
        chosen.visits, timezone,
    )  # fmt: skip
    check_metrics(query)
    return query


def engine_plan(
    body: QueryBody, parsed: QueryBody, now: datetime, first_day: date | None, timezone: str
) -> PlausibleQuery:
    """A query only the stats engine answers (dashboard/http_api/plausible/engine.py), checked by it;
    `parsed` is `body` with Plausible's display values in filters as Tally stores them."""
    start, end = time_range(body.date_range, body.date, now, first_day, timezone)
    if body.include.time_labels and not any(name in TIME_DIMENSIONS for name in body.dimensions):
        raise QueryError("Invalid include.time_labels: requires a time dimension.")
    order_by = orders(body.order_by, body.metrics, body.dimensions)
    engine = plausible_engine.parts(parsed, QueryError)
    if plausible_conversions.by_dimension(parsed):
        engine = plausible_conversions.engine_parts(engine)
    query = PlausibleQuery(
        body, body.site_id, start, end, tuple(body.metrics), None, None, None, order_by, timezone=timezone,
        engine=engine,
    )  # fmt: skip
    plausible_engine.check(query, QueryError)
    return query


def check_views_per_visit(body: QueryBody) -> None:
    """Plausible refuses views_per_visit with a filter on event:page anywhere in the filters (but
    inside has_done / has_not_done): the page views of the matching pages per visit is no metric."""
    if "views_per_visit" in body.metrics and any(page_filtered(item) for item in body.filters):
        raise QueryError("Metric `views_per_visit` cannot be queried with a filter on `event:page`.")


def page_filtered(item: Any) -> bool:
    if not is_list(item) or len(item) < 2 or not isinstance(item[0], str):
        return False
    if item[0] in ("and", "or") and is_list(item[1]):
        return any(page_filtered(operand) for operand in item[1])
    if item[0] == "not":
        return page_filtered(item[1])
    return item[0] not in ("has_done", "has_not_done") and item[1] == PAGE_DIMENSION


def stored_values(items: list[Any]) -> list[Any]:
    """The filters with Plausible's names of a blank value ("Direct / None", "(not set)") as Tally
    stores it, "", for `is` / `is_not` (Plausible's WhereBuilder maps them the same way)."""
    return [stored_value(item) for item in items]


def stored_value(item: Any) -> Any:
    if not is_list(item) or len(item) < 2 or not isinstance(item[0], str):
        return item
    if item[0] in ("and", "or") and is_list(item[1]):
        return [item[0], stored_values(item[1]), *item[2:]]
    if item[0] in ("not", "has_done", "has_not_done"):
        return [item[0], stored_value(item[1]), *item[2:]]
    blanks = BLANK_NAMES.get(item[1]) if isinstance(item[1], str) else None
    if item[0] not in ("is", "is_not") or blanks is None or len(item) < 3 or not is_list(item[2]):
        return item
    return [item[0], item[1], ["" if value in blanks else value for value in item[2]], *item[3:]]


def shown_value(dimension: str, value: object) -> object:
    """A dimension's value as Plausible's results name it: a blank source "Direct / None", a
    blank UTM "(not set)" (Plausible's SQL.Expression); everything else as stored."""
    return BLANK_SHOWN.get(dimension, value) if value == "" else value


FIRST_YEAR, END_YEAR = 1970, 2200  # the dates a query may name (and a custom range may span)


def time_range(
    date_range: str | list[str],
    reference: str | None,
    now: datetime,
    first_day: date | None,
    timezone: str = UTC_NAME,
) -> tuple[datetime, datetime]:
    """[start, end) as UTC instants, days being the site's (`timezone`): "day" is today there."""
    tz = zone(timezone)
    today = local_date(now, tz)
    if reference is not None:
        try:
            today = date.fromisoformat(reference)
        except ValueError:
            raise QueryError(f"Invalid date '{reference}'.") from None
        if not FIRST_YEAR <= today.year < END_YEAR:  # the engine's dates: year 2 is a 503 there
            raise QueryError(f"Invalid date '{reference}': it must be within {FIRST_YEAR}-{END_YEAR - 1}.")
    if isinstance(date_range, list):
        return custom_range(date_range, tz)
    if date_range == "day":
        first, last = today, today
    elif date_range == "month":
        first, last = months_back(today, 0), month_end(today)
    elif date_range == "year":
        first, last = today.replace(month=1, day=1), today.replace(month=12, day=31)
    elif date_range == "all":
        first, last = min(first_day or today, today), today
    else:
        first, last = last_n(date_range, today)
    return local_midnight(first, tz), local_midnight(last + timedelta(days=1), tz)


def last_n(date_range: str, reference: date) -> tuple[date, date]:
    """First and last day of "Nd" (the N days before `reference`) or "Nmo" (the N whole months
    before `reference`'s month), Plausible's {:last_n_days, N} and {:last_n_months, N};
    QueryError in Plausible's words for anything else."""
    found = LAST_N.fullmatch(date_range)
    if found is None or not 1 <= int(found[1]) <= MOST_LAST_N[found[2]]:
        raise QueryError(f"Invalid date_range {json.dumps(date_range, ensure_ascii=False)}")
    n = int(found[1])
    if found[2] == "d":
        return last_n_days(n, reference)
    return months_back(reference, n), months_back(reference, 0) - timedelta(days=1)


def last_n_days(days: int, reference: date) -> tuple[date, date]:
    """The `days` whole days before `reference`, that day left out (v1's 7d and 30d come here too)."""
    return reference - timedelta(days=days), reference - timedelta(days=1)


def custom_range(pair: list[str], tz: ZoneInfo = UTC_ZONE) -> tuple[datetime, datetime]:
    """Two dates (both days included) or two date-times (both moments included, to the second);
    dates and date-times without an offset are the site's local ones."""
    if len(pair) != 2:
        raise QueryError(f"Invalid date_range '{json.dumps(pair)}'.")
    try:
        if all(len(text) == 10 for text in pair):
            first, last = (date.fromisoformat(text) for text in pair)
            start, end = local_midnight(first, tz), local_midnight(last + timedelta(days=1), tz)
        else:
            start, last_moment = (as_utc(datetime.fromisoformat(text), tz) for text in pair)
            end = last_moment + timedelta(seconds=1)
    except (ValueError, OverflowError):  # OverflowError: year 1 moved across an offset
        raise QueryError(f"Invalid date_range '{json.dumps(pair)}'.") from None
    if not datetime(FIRST_YEAR, 1, 1, tzinfo=UTC) <= start < end <= datetime(END_YEAR, 1, 1, tzinfo=UTC):
        raise QueryError(f"Invalid date_range '{json.dumps(pair)}': the end must not be before the start.")
    return start, end


def single_dimension(dimensions: list[str]) -> str | None:
    for name in dimensions:
        if name in UNSUPPORTED_DIMENSIONS:
            raise QueryError(
                f"Invalid dimensions '{json.dumps(dimensions)}': {name} is not supported by Tally."
            )
        if not (
            name in DIMENSIONS
            or name in TIME_DIMENSIONS
            or name in (GOAL_DIMENSION, NAME_DIMENSION)
            or props_key(name)
        ):
            raise QueryError(f"Invalid dimensions '{json.dumps(dimensions)}'.")
    if len(dimensions) > 1:
        raise QueryError(
            f"Invalid dimensions '{json.dumps(dimensions)}': Tally answers one dimension per query."
        )
    return dimensions[0] if dimensions else None


def props_key(name: str) -> str:
    """KEY of event:props:KEY ('' if `name` is no property dimension)."""
    key = name.removeprefix(PROPS_DIMENSION) if name.startswith(PROPS_DIMENSION) else ""
    return key if len(key) <= MAX_PROPERTY_KEY else ""


@dataclass(frozen=True)
class Filters:
    """Plausible's filters in Tally's terms: `where` restricts events (page, country, device,
    browser, OS, properties), `visits` restricts sessions by their properties (source, campaign,
    entry and exit page), `goal` names Tally's goal filter."""

    where: Expression | None
    visits: Expression | None
    goal: str | None


def filters(items: list[Any]) -> Filters:
    """The top-level filters joined by and, each wholly on events or wholly on visits, and the
    goal a top-level `["is", "event:goal", [NAME]]` names (one goal, at the top level)."""
    goal, conditions, visit_conditions = None, [], []
    for item in items:
        if is_list(item) and len(item) >= 3 and item[:2] == ["is", GOAL_DIMENSION]:
            if (
                goal is not None
                or not is_list(item[2])
                or len(item[2]) != 1
                or not isinstance(item[2][0], str)
            ):
                raise QueryError(f"Invalid filter '{json.dumps(item)}': Tally filters by one goal per query.")
            goal = item[2][0]
            continue
        parsed = expression(item, 0)
        named = dimensions_of(parsed)
        if named <= VISIT_COLUMNS:
            visit_conditions.append(parsed)
        elif named & VISIT_COLUMNS:
            raise QueryError(
                f"Invalid filter '{json.dumps(item)[:200]}': Tally cannot combine visit properties (source, "
                "utm, entry or exit page) with other dimensions in one filter; give them as separate filters."
            )
        else:
            conditions.append(parsed)
    where, visits = joined(conditions), joined(visit_conditions)
    try:  # regular expressions are bounded per query, over both kinds of filter together
        check_patterns(where, visits)
    except UnsupportedQuery as refused:
        raise QueryError(f"Invalid filters: {refused}.") from None
    return Filters(where, visits, goal)


def joined(conditions: list[Expression]) -> Expression | None:
    if not conditions:
        return None
    return conditions[0] if len(conditions) == 1 else Logic("and", tuple(conditions))


def expression(item: Any, depth: int) -> Expression:
    shown = json.dumps(item)[:200]
    if not is_list(item) or not item or not isinstance(item[0], str) or depth > MAX_FILTER_DEPTH:
        raise QueryError(f"Invalid filter '{shown}'.")
    operator = item[0]
    if operator in ("and", "or"):
        if len(item) != 2 or not is_list(item[1]) or not item[1]:
            raise QueryError(f"Invalid filter '{shown}'.")
        return Logic(operator, tuple(expression(operand, depth + 1) for operand in item[1]))
    if operator == "not":
        if len(item) != 2:
            raise QueryError(f"Invalid filter '{shown}'.")
        return Logic("not", (expression(item[1], depth + 1),))
    if operator in UNSUPPORTED_OPERATORS:
        raise QueryError(f"Invalid filter '{shown}': operator {operator} is not supported by Tally.")
    if operator not in FILTER_OPERATORS:
        raise QueryError(f"Unknown operator for filter '{shown}'.")
    return condition(operator, item, shown)  # type: ignore[arg-type]


def condition(operator: FilterOperator, item: list[Any], shown: str) -> Condition:
    if len(item) not in (3, 4) or not isinstance(item[1], str) or not is_list(item[2]):
        raise QueryError(f"Invalid filter '{shown}'.")
    name, values = item[1], item[2]
    if not values or len(values) > MAX_FILTER_VALUES or not all(isinstance(value, str) for value in values):
        raise QueryError(f"Invalid filter '{shown}': 1 to {MAX_FILTER_VALUES} string values.")
    if len(item) == 4 and item[3] not in ({}, {"case_sensitive": True}):
        raise QueryError(f"Invalid filter '{shown}': only case-sensitive matching is supported by Tally.")
    if name == GOAL_DIMENSION:
        raise QueryError(f"Invalid filter '{shown}': Tally filters by a goal only with a top-level `is`.")
    if name in FILTER_DIMENSIONS:
        return Condition(operator, FILTER_DIMENSIONS[name], tuple(values))
    if name in SESSION_DIMENSIONS:
        return Condition(operator, DIMENSIONS[name], tuple(values))
    if props_key(name):
        return Condition(operator, PROPS_FILTER + props_key(name), tuple(values))
    if name in DIMENSIONS or name in UNSUPPORTED_DIMENSIONS:
        raise QueryError(
            f"Invalid filter '{shown}': {name} is not supported by Tally (docs/plausible-api.md lists "
            "the filters it supports)."
        )
    raise QueryError(f"Invalid filter '{shown}'.")


def orders(
    order_by: list[list[str]] | None, metrics: list[str], dimensions: list[str]
) -> tuple[tuple[str, bool], ...]:
    """Plausible's default when none: time ascending, else the first metric descending."""
    if order_by is None:
        if dimensions and dimensions[0] in TIME_DIMENSIONS:
            return ((dimensions[0], False),)
        return ((metrics[0], True),)
    result = []
    for entry in order_by:
        if len(entry) != 2 or entry[1] not in ("asc", "desc"):
            raise QueryError(f"Invalid order_by entry '{json.dumps(entry)}'.")
        if entry[0] not in metrics and entry[0] not in dimensions:
            raise QueryError(
                f"Invalid order_by entry '{json.dumps(entry)}'. Entry is not a queried metric or dimension."
            )
        result.append((entry[0], entry[1] == "desc"))
    return tuple(result)


# Which metrics Tally answers for each kind of dimension (the report that answers it).
PAGE_METRICS = ("visitors", "pageviews", "time_on_page", "scroll_depth")
BREAKDOWN_METRICS = ("visitors", "pageviews")
# A session dimension's rows are its sessions' (storage.queries.session_breakdown); a time
# bucket's, the sessions starting in it (storage.queries.session_timeseries).
SESSION_METRICS = ("visitors", "pageviews", "visits", "views_per_visit", "bounce_rate", "visit_duration")
SESSION_DIMENSIONS = frozenset({
    "visit:entry_page", "visit:exit_page", "visit:source", "visit:utm_source", "visit:utm_medium",
    "visit:utm_campaign", "visit:utm_content", "visit:utm_term", "visit:channel",
})  # fmt: skip
GOAL_METRICS = ("visitors", "events", "conversion_rate")
PROPS_METRICS = ("visitors", "events")
AGGREGATE_METRICS = (
    "visitors",
    "visits",
    "pageviews",
    "views_per_visit",
    "bounce_rate",
    "visit_duration",
    "events",
)


def allowed_metrics(query: PlausibleQuery) -> tuple[str, ...]:
    dimension = query.dimension
    converting = CONVERSION_METRICS if query.goal else ()
    if dimension is None:
        return AGGREGATE_METRICS + (converting + REVENUE_METRICS if query.goal else ())
    if dimension == GOAL_DIMENSION:
        return GOAL_METRICS + REVENUE_METRICS
    if dimension in TIME_DIMENSIONS:
        return SESSION_METRICS
    if props_key(dimension) or dimension == NAME_DIMENSION:
        return PROPS_METRICS + converting
    if dimension == PAGE_DIMENSION:
        return PAGE_METRICS + converting
    if dimension in SESSION_DIMENSIONS:
        return SESSION_METRICS + converting
    return BREAKDOWN_METRICS + converting


def check_metrics(query: PlausibleQuery) -> None:
    allowed = allowed_metrics(query)
    if query.visits is not None:
        if query.dimension is not None and query.dimension not in SESSION_DIMENSIONS:
            raise QueryError(
                f"Invalid filters: with a filter on visit properties Tally answers no dimension or one of "
                f"{', '.join(sorted(SESSION_DIMENSIONS))}, not {query.dimension}."
            )
        allowed = tuple(name for name in SESSION_METRICS if name in allowed or query.dimension is None)
    for metric in query.metrics:
        if metric in allowed:
            continue
        goal_asked = query.goal or query.dimension == GOAL_DIMENSION
        if metric in CONVERSION_METRICS + REVENUE_METRICS and not goal_asked:
            raise QueryError(f"Metric `{metric}` can only be queried with event:goal filters or dimensions.")
        with_what = f"dimension `{query.dimension}`" if query.dimension else "no dimension"
        raise QueryError(
            f"Metric `{metric}` cannot be queried with {with_what} in Tally; with it Tally answers "
            f"{', '.join(allowed)}."
        )


def as_utc(moment: datetime, tz: ZoneInfo = UTC_ZONE) -> datetime:
    """`moment` as a UTC instant; without an offset it is a wall-clock time in `tz`."""
    return (moment.replace(tzinfo=tz) if moment.tzinfo is None else moment).astimezone(UTC)


def months_back(day: date, months: int) -> date:
    """The first day of the month `months` before `day`'s."""
    index = day.year * 12 + day.month - 1 - months
    return date(index // 12, index % 12 + 1, 1)


def month_end(day: date) -> date:
    return months_back(day, -1) - timedelta(days=1)


def is_list(value: object) -> bool:
    return isinstance(value, list)
