"""The stats API's query-string parameters: parsed into typed values or refused with the
name of the parameter at fault (answered as 400 by dashboard.http_api.stats)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta

from dashboard import periods
from storage import queries
from storage.calendar import UTC_NAME, shift_local, zone
from storage.page_patterns import BadPattern, validate_pattern
from storage.queries import Condition, Expression, FunnelStep, Interval, Logic, Source, StatsQuery, questions
from storage.queries.contract import FILTER_OPERATORS, PROPS_FILTER
from storage.queries.journeys import DIRECTIONS, MAX_PATTERNS, MAX_STEPS, JourneyQuestion
from storage.queries.realtime_breakdowns import REALTIME_BREAKDOWNS
from storage.queries.retention import DEFAULT_WEEKS, MAX_WEEKS, report_weeks
from storage.queries.vitals import PROPERTIES as VITALS_PROPERTIES
from tally.refusal import Refused

PARAMETERS = (
    "site", "from", "to", "period", "compare", "interval", "by", "limit", "source", "filters", "steps",
    "goal", "breakdown", "meta", "funnel", "id", "property", "page", "direction", "group",
    "min_visitors", "weeks", "until",
)  # fmt: skip
SOURCES: tuple[Source, ...] = ("agg", "raw")
INTERVALS: tuple[Interval, ...] = ("minute", "hour", "day", "week", "month")
DEFAULT_RANGE = timedelta(days=30)
MAX_BUCKETS = queries.MAX_BUCKETS  # the query layer's cap, shared with the dashboard's chart
MAX_LIMIT = 1000
MAX_SITE_LENGTH = 253  # the longest domain name
# Eight steps of the longest page pattern (500 characters) with their JSON, and then some.
MAX_STEPS_LENGTH = 8192
STEPS_EXAMPLE = '[{"page": "/product/*"}, {"event": "Signup"}, {"page": "/thanks"}]'
# DateTime64 holds 1900-2299; refusing dates far outside any traffic keeps the range sane.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)


class BadParameter(Refused):
    """A parameter the API cannot use; the message starts with the parameter's name."""

    def __init__(self, parameter: str, problem: str) -> None:
        super().__init__(f"{parameter}: {problem}", field=parameter)
        self.parameter = parameter


@dataclass(frozen=True)
class Arguments:
    """The query string with every parameter given at most once."""

    values: dict[str, str]

    @classmethod
    def parse(cls, args: Mapping[str, Sequence[str]]) -> Arguments:
        unknown = sorted(set(args) - set(PARAMETERS))
        if unknown:
            raise BadParameter(unknown[0], f"unknown parameter; known: {', '.join(PARAMETERS)}")
        repeated = sorted(name for name, values in args.items() if len(values) > 1)
        if repeated:
            raise BadParameter(repeated[0], "given more than once")
        return cls({name: values[0] for name, values in args.items()})

    def get(self, name: str) -> str | None:
        return self.values.get(name)


def site(arguments: Arguments) -> str:
    value = (arguments.get("site") or "").strip()
    if not value:
        raise BadParameter("site", "required, e.g. site=example.com")
    if len(value) > MAX_SITE_LENGTH or not value.isprintable():
        raise BadParameter("site", "not a site name")
    return value


def source(arguments: Arguments) -> Source:
    value = arguments.get("source")
    if value is None:
        return "agg"
    if value not in SOURCES:
        raise BadParameter("source", f"must be one of {', '.join(SOURCES)}")
    return value  # type: ignore[return-value]


def moment(text: str, parameter: str, timezone: str = UTC_NAME) -> datetime:
    """An ISO-8601 date or date-time; without an offset it is the site's local time (UTC for a
    site without a zone), with one it is converted."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise BadParameter(
            parameter, "not an ISO-8601 date or date-time, e.g. 2026-11-10 or 2026-11-10T09:00:00Z"
        ) from None
    # the year first: converting year 1 or 9999 across an offset would overflow
    if not EARLIEST.year <= parsed.year < LATEST.year:
        raise BadParameter(parameter, f"out of range ({EARLIEST.year}-{LATEST.year - 1})")
    local = parsed.replace(tzinfo=zone(timezone)) if parsed.tzinfo is None else parsed
    moment_utc = local.astimezone(UTC)
    if not EARLIEST <= moment_utc < LATEST:
        raise BadParameter(parameter, f"out of range ({EARLIEST.year}-{LATEST.year - 1})")
    return moment_utc


@dataclass(frozen=True)
class Window:
    """The range asked for, [start, end), and the one it is compared with (None: no compare)."""

    start: datetime
    end: datetime
    compared: tuple[datetime, datetime] | None = None


def window(
    arguments: Arguments, now: datetime, timezone: str = UTC_NAME, first_day: date | None = None
) -> Window:
    """`period` (a preset in the site's zone) or `from`/`to`, and `compare`'s range."""
    compare = arguments.get("compare")
    if compare is not None and compare not in periods.COMPARISONS:
        raise BadParameter("compare", f"must be one of {', '.join(periods.COMPARISONS)}")
    preset = arguments.get("period")
    if preset is None:
        start, end = date_range(arguments, now, timezone)
        if compare == "year_over_year":
            tz = zone(timezone)
            return Window(start, end, (shift_local(start, tz, months=-12), shift_local(end, tz, months=-12)))
        return Window(start, end, (start - (end - start), start) if compare else None)
    if arguments.get("from") is not None or arguments.get("to") is not None:
        raise BadParameter("period", "give either period or from/to, not both")
    if preset == "custom":
        raise BadParameter("period", "a custom range is from and to (e.g. from=2026-11-01&to=2026-11-08)")
    try:
        chosen = periods.period(
            preset, now, timezone=timezone, compare=compare or periods.DEFAULT_COMPARISON, first_day=first_day
        )
    except periods.UnknownPeriod as refused:
        raise BadParameter("period", str(refused)) from None
    return Window(chosen.start, chosen.end, (chosen.previous_start, chosen.previous_end) if compare else None)


def date_range(arguments: Arguments, now: datetime, timezone: str = UTC_NAME) -> tuple[datetime, datetime]:
    """[from, to): `to` defaults to now, `from` to 30 days before `to`."""
    # A parameter given empty is refused, not taken as absent: `from=` is no date.
    given_to, given_from = arguments.get("to"), arguments.get("from")
    end = now if given_to is None else moment(given_to, "to", timezone)
    start = end - DEFAULT_RANGE if given_from is None else moment(given_from, "from", timezone)
    if end <= start:
        raise BadParameter("to", "must be after from")
    return start, end


FILTERS_EXAMPLE = '{"path": "/pricing"} or [["contains", "channel", ["Search"]]]'
MAX_FILTER_DEPTH = 10


def filters(arguments: Arguments) -> tuple[dict[str, str], Expression | None]:
    """A JSON object of dimension → value (equality), e.g. filters={"path":"/pricing","country":"DE"},
    or a JSON list of Plausible-style filters with Tally's dimension names, joined by and:
    [OPERATOR, DIMENSION, [VALUES]] (is, is_not, contains, contains_not, matches, matches_not),
    ["and" | "or", [FILTERS]], ["not", FILTER]."""
    text = arguments.get("filters")
    if not text:
        return {}, None
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: arrays nested thousands deep
        raise BadParameter("filters", f"not JSON; expected e.g. {FILTERS_EXAMPLE}") from None
    if isinstance(parsed, list) and parsed:
        items = tuple(filter_expression(item, 0) for item in parsed)
        return {}, items[0] if len(items) == 1 else Logic("and", items)
    if not isinstance(parsed, dict) or not all(
        isinstance(name, str) and isinstance(value, str) for name, value in parsed.items()
    ):
        raise BadParameter(
            "filters", f"expected a JSON object of strings or a list of filters, e.g. {FILTERS_EXAMPLE}"
        )
    return parsed, None


def filter_expression(item: object, depth: int) -> Expression:
    """One filter of the list form; which dimensions exist is the query layer's to say."""
    shown = json.dumps(item)[:200]
    if not isinstance(item, list) or not item or depth > MAX_FILTER_DEPTH:
        raise BadParameter("filters", f"not a filter: {shown}; expected e.g. {FILTERS_EXAMPLE}")
    operator = item[0]
    if operator in ("and", "or") and len(item) == 2 and isinstance(item[1], list) and item[1]:
        return Logic(operator, tuple(filter_expression(operand, depth + 1) for operand in item[1]))
    if operator == "not" and len(item) == 2:
        return Logic("not", (filter_expression(item[1], depth + 1),))
    if (
        operator in FILTER_OPERATORS
        and len(item) == 3
        and isinstance(item[1], str)
        and isinstance(item[2], list)
        and all(isinstance(value, str) for value in item[2])
    ):
        return Condition(operator, item[1], tuple(item[2]))
    raise BadParameter("filters", f"not a filter: {shown}; expected e.g. {FILTERS_EXAMPLE}")


def stats_query(
    arguments: Arguments, now: datetime, defined: questions.VisitDefinitions, timezone: str = UTC_NAME,
    first_day: date | None = None,
) -> StatsQuery:  # fmt: skip
    return window_queries(arguments, now, defined, timezone, first_day)[0]


def window_queries(
    arguments: Arguments, now: datetime, defined: questions.VisitDefinitions, timezone: str = UTC_NAME,
    first_day: date | None = None,
) -> tuple[StatsQuery, StatsQuery | None]:  # fmt: skip
    """The report asked for, and the same report over the compared range (None without compare):
    the question (storage/queries/questions.py) the API's and the CLI's parameters ask."""
    asked = window(arguments, now, timezone, first_day)
    equal, where = filters(arguments)
    q = questions.question(
        site(arguments), asked.start, asked.end, defined, timezone=timezone, filters=equal, where=where
    )
    try:
        queries.validate(q)  # the query layer's own vocabulary decides which filters exist
    except queries.UnsupportedQuery as refused:
        raise BadParameter("filters", str(refused)) from None
    return q, questions.over(q, asked.compared) if asked.compared else None


def interval(arguments: Arguments, q: StatsQuery) -> Interval:
    """The interval asked for, or one that gives a readable chart for the range."""
    value = arguments.get("interval")
    if value is None:
        value = default_interval(q.end - q.start)
    if value not in INTERVALS:
        raise BadParameter("interval", f"must be one of {', '.join(INTERVALS)}")
    count = bucket_count(q, value)  # type: ignore[arg-type]
    if count > MAX_BUCKETS:
        raise BadParameter(
            "interval",
            f"the range has {count:,} {value}s, more than {MAX_BUCKETS:,}: use a longer interval",
        )
    return value  # type: ignore[return-value]


def default_interval(length: timedelta) -> Interval:
    if length <= timedelta(hours=6):
        return "minute"
    if length <= timedelta(days=7):
        return "hour"
    return "day"


def bucket_count(q: StatsQuery, value: Interval) -> int:
    return queries.bucket_count(q.start, q.end, value)


# Breakdowns of custom events: by event name, by a property's value.
EVENT_NAME_BREAKDOWN = "event:name"
PROP_BREAKDOWN = "prop:"


def dimension(arguments: Arguments) -> str:
    """A dimension, `event:name`, or `prop:KEY` (a custom property's key)."""
    value = arguments.get("by")
    dimensions = ", ".join([*queries.DIMENSIONS, queries.CHANNEL])
    choices = f"one of {dimensions}, {EVENT_NAME_BREAKDOWN} or {PROP_BREAKDOWN}KEY"
    if not value:
        raise BadParameter("by", f"required, {choices}")
    key = value.removeprefix(PROP_BREAKDOWN)
    if value.startswith(PROP_BREAKDOWN) and not 0 < len(key) <= queries.MAX_PROPERTY_KEY:
        raise BadParameter("by", f"a property key has 1 to {queries.MAX_PROPERTY_KEY} characters")
    if (
        value not in queries.DIMENSIONS
        and value != queries.CHANNEL
        and value != EVENT_NAME_BREAKDOWN
        and not value.startswith(PROP_BREAKDOWN)
    ):
        raise BadParameter("by", f"must be {choices}")
    return value


def goal(arguments: Arguments, by: str) -> str:
    """The goal a property breakdown is restricted to ('' for all custom events)."""
    value = arguments.get("goal")
    if value is None:
        return ""
    if not by.startswith(PROP_BREAKDOWN):
        raise BadParameter("goal", f"only with by={PROP_BREAKDOWN}KEY")
    if not value.strip() or len(value) > 200 or not value.isprintable():
        raise BadParameter("goal", "a goal's name, e.g. Signup or Visit /checkout/*")
    return value


def vitals_property(arguments: Arguments) -> str | None:
    """The Web Vitals report's breakdown (Plausible's property names); None for the whole site."""
    value = arguments.get("property")
    if value is not None and value not in VITALS_PROPERTIES:
        raise BadParameter("property", f"must be one of {', '.join(VITALS_PROPERTIES)}")
    return value


def limit(arguments: Arguments, default: int) -> int:
    text = arguments.get("limit")
    if text is None:
        return default
    if not (text.isascii() and text.isdigit() and len(text) <= 4 and 1 <= int(text) <= MAX_LIMIT):
        raise BadParameter("limit", f"must be a whole number from 1 to {MAX_LIMIT}")
    return int(text)


def realtime_breakdown(arguments: Arguments) -> str | None:
    """The realtime view's breakdown (pages, sources, countries), or None for the live counts."""
    value = arguments.get("breakdown")
    if value is not None and value not in REALTIME_BREAKDOWNS:
        raise BadParameter("breakdown", f"must be one of {', '.join(REALTIME_BREAKDOWNS)}")
    return value


def funnel_steps(arguments: Arguments) -> list[FunnelStep]:
    """A JSON array of 2-8 steps, each {"page": PATTERN} or {"event": NAME}; the query layer
    decides what a valid pattern or name is."""
    text = arguments.get("steps")
    if not text:
        raise BadParameter("steps", f"required, a JSON array of steps, e.g. {STEPS_EXAMPLE}")
    if len(text) > MAX_STEPS_LENGTH:
        raise BadParameter("steps", f"too long: at most {MAX_STEPS_LENGTH:,} characters")
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: arrays nested thousands deep
        raise BadParameter("steps", f"not JSON; expected e.g. {STEPS_EXAMPLE}") from None
    if not isinstance(parsed, list):
        raise BadParameter("steps", f"expected a JSON array, e.g. {STEPS_EXAMPLE}")
    steps = [funnel_step(index, item) for index, item in enumerate(parsed, start=1)]
    try:
        return queries.checked_steps(steps)
    except queries.UnsupportedQuery as refused:
        raise BadParameter("steps", str(refused)) from None


def funnel_step(index: int, item: object) -> FunnelStep:
    if not isinstance(item, dict) or len(item) != 1:
        raise BadParameter(
            "steps", f'step {index}: expected one key, {{"page": "/x/*"}} or {{"event": "Signup"}}'
        )
    ((kind, value),) = item.items()
    if kind not in ("page", "event"):
        raise BadParameter("steps", f"step {index}: unknown key {kind!r}; a step is a page or an event")
    if not isinstance(value, str):
        raise BadParameter("steps", f"step {index}: the {kind} must be a string")
    return FunnelStep(kind, value)


# --- the events behind a figure (GET /api/v1/export/events, `tally export --figure`) ---------
# The question is the aggregate's (the parameters above); these say which figure, which row of a
# breakdown, and the file's format.
EXPORT_PARAMETERS = ("metric", "format", "property", "value")
EXPORT_FORMATS = ("parquet", "csv")


@dataclass(frozen=True)
class FigureChoice:
    """Which figure's events, in which format; `breakdown`: one row of a breakdown (property, value)."""

    metric: str
    output_format: str
    breakdown: tuple[str, str] | None = None


def export_arguments(args: Mapping[str, Sequence[str]]) -> tuple[Arguments, FigureChoice]:
    """The question's arguments (every other parameter, as the aggregate reads them) and the choice."""
    own = {name: values for name, values in args.items() if name in EXPORT_PARAMETERS}
    arguments = Arguments.parse(
        {name: values for name, values in args.items() if name not in EXPORT_PARAMETERS}
    )
    repeated = sorted(name for name, values in own.items() if len(values) > 1)
    if repeated:
        raise BadParameter(repeated[0], "given more than once")
    given = {name: values[0] for name, values in own.items()}
    metric = given.get("metric")
    if not metric:
        raise BadParameter(
            "metric", "required, e.g. metric=pageviews (pageviews, visitors, events, conversions)"
        )
    output_format = given.get("format", "parquet")
    if output_format not in EXPORT_FORMATS:
        raise BadParameter("format", f"must be one of {', '.join(EXPORT_FORMATS)}")
    breakdown = None
    if "property" in given or "value" in given:
        if not given.get("property") or "value" not in given:
            raise BadParameter(
                "property", "a breakdown's row is property and value, e.g. property=path&value=/pricing"
            )
        breakdown = (given["property"], given["value"])
    return arguments, FigureChoice(metric, output_format, breakdown)


def breakdown_row(q: StatsQuery, breakdown: tuple[str, str] | None) -> StatsQuery:
    """`q` narrowed to one row of a breakdown by `property`: its value as one more filter (the
    dimension's events with that value: what the row counts)."""
    if breakdown is None:
        return q
    name, value = breakdown
    # The custom events' breakdowns (by=prop:KEY, by=event:name) are no filter: say which is.
    if name.startswith(PROP_BREAKDOWN):
        key = name.removeprefix(PROP_BREAKDOWN)
        raise BadParameter("property", f"a row of by={name} is property={PROPS_FILTER}{key}")
    if name == EVENT_NAME_BREAKDOWN:
        raise BadParameter("property", f"a row of by={name} is its goal's events: goal=NAME, metric=events")
    if name in q.filters and q.filters[name] != value:
        raise BadParameter("property", f"the filters already ask {name} = {q.filters[name]!r}")
    narrowed = replace(q, filters={**q.filters, name: value})
    try:
        queries.validate(narrowed)
    except queries.UnsupportedQuery as refused:
        raise BadParameter("property", str(refused)) from None
    return narrowed


def export_goal(arguments: Arguments) -> str:
    """The goal whose events (metric=events) or converted visitors (metric=conversions) are
    exported ('' for none: the custom events, or the page views)."""
    value = arguments.get("goal")
    if value is None:
        return ""
    if not value.strip() or len(value) > 200 or not value.isprintable():
        raise BadParameter("goal", "a goal's name, e.g. Signup or Visit /checkout/*")
    return value


DEFAULT_JOURNEY_STEPS = 3
MAX_MIN_VISITORS = 1_000_000


def journey_question(arguments: Arguments) -> JourneyQuestion:
    """`page` (a path, or one of the `group` patterns; none: the visit's entry or exit),
    `direction` next|previous, `steps` 1-5, `group` comma-separated page patterns each drawn as
    one node (/blog/*), `min_visitors` under which a path is folded into "(other)", `limit` the
    most paths kept (the others folded too; none: all). Filters are the query's (window_queries);
    the query layer refuses one on an event, naming `filters`."""
    direction = arguments.get("direction")
    direction = "next" if direction is None else direction
    if direction not in DIRECTIONS:
        raise BadParameter("direction", f"must be one of {', '.join(DIRECTIONS)}")
    steps = _whole_number(arguments, "steps", DEFAULT_JOURNEY_STEPS, MAX_STEPS)
    min_visitors = _whole_number(arguments, "min_visitors", 1, MAX_MIN_VISITORS)
    patterns = tuple(part for part in (arguments.get("group") or "").split(",") if part.strip())
    if len(patterns) > MAX_PATTERNS:
        raise BadParameter("group", f"at most {MAX_PATTERNS} page patterns")
    try:
        patterns = tuple(validate_pattern(pattern) for pattern in patterns)
    except BadPattern as refused:
        raise BadParameter("group", str(refused)) from None
    page = arguments.get("page")
    if page is not None and (
        not page.startswith("/") or len(page) > MAX_STEPS_LENGTH or not page.isprintable()
    ):
        raise BadParameter("page", "a path starting with /, e.g. page=/pricing (or a group's pattern)")
    most = limit(arguments, 0) or None
    return JourneyQuestion(page, direction, steps, patterns, min_visitors, most)  # type: ignore[arg-type]


RETENTION_PARAMETERS = ("site", "weeks", "until", "source")


def retention_weeks(arguments: Arguments, today: date) -> tuple[date, ...]:
    """The Mondays of the retention report's weeks: `weeks` (1-12) of them, the last holding
    `until` (a date, YYYY-MM-DD, in the site's calendar; default `today`, the site's today).
    Another report's parameter (a period, filters…) is refused, naming it: the report has none."""
    others = sorted(set(arguments.values) - set(RETENTION_PARAMETERS))
    if others:
        raise BadParameter(
            others[0], f"not taken by the retention report (it takes {', '.join(RETENTION_PARAMETERS)})"
        )
    count = _whole_number(arguments, "weeks", DEFAULT_WEEKS, MAX_WEEKS)
    text = arguments.get("until")
    if text is None:
        return report_weeks(today, count)
    try:
        until = date.fromisoformat(text) if len(text) == 10 else None
    except ValueError:
        until = None
    if until is None or not EARLIEST.date() <= until < LATEST.date():
        raise BadParameter("until", "a date, YYYY-MM-DD (a day of the last week shown)")
    return report_weeks(until, count)


def _whole_number(arguments: Arguments, name: str, default: int, most: int) -> int:
    text = arguments.get(name)
    if text is None:
        return default
    if not (text.isascii() and text.isdigit() and len(text) <= 7 and 1 <= int(text) <= most):
        raise BadParameter(name, f"must be a whole number from 1 to {most:,}")
    return int(text)
