"""The archive compiler: any query of the model (stats/query.py) as one ClickHouse query over
`events`, with Plausible's semantics (DESIGN.md, "Definitions").

The rows every answer is counted from are the site's events, each carrying its visit: per
visitor, the page views in time order (same millisecond: by event_id) split where a gap exceeds
the session gap, as storage/queries/raw.py sessionises them; every other event (custom,
engagement) belongs to the visit whose [first page view, last page view + gap] holds it (the
contract's rule for engaged sessions), or to none. Each row has the event's own columns (path,
country, props, …) and its visit's: visit_start, duration_ms, visit_pageviews, is_bounce and the
visit dimensions (`visit_<name>`: entry and exit page, source, UTMs, channel). A filter is then a
condition on a row, whatever it names, so visit properties work inside `or` and `not`.

- event metrics (visitors, pageviews, events) count the matching events in [start, end)
  (engagement events are never counted; visitors are distinct (UTC day, visitor));
- visit metrics (visits, bounce_rate, visit_duration, views_per_visit) count the WHOLE visits
  starting in [start, end) that contain a matching event: by an event dimension, a visit counts
  once for each value among its matching events (bounce rate by page: the visits that viewed it);
  by a time dimension, in the bucket its start falls in; with visit metrics alone, a combination
  is a row only where such a visit has it (otherwise where a matching event or visit has it);
- has_done / has_not_done: the events of the visitors (UTC day, visitor) who have / have not an
  event in the range passing the inner filter;
- percentage: visitors over all visitors matching the filters (no dimension), in percent;
- exit_rate (by event:page or visit:exit_page): the matching visits leaving from the page over
  the page's matching page views, in percent.

Values travel as query parameters only; identifiers come from the catalogue (an allow-list).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from clickhouse_connect.driver.client import Client

from stats import catalogue
from stats.query import (
    Behaviour,
    Condition,
    Filter,
    InvalidQuery,
    Logic,
    Query,
    dimension_entry,
    is_time,
    props_key,
    validate,
    wildcard_regex,
)
from storage.calendar import bucket_sql
from storage.channel_rules import list_rules
from storage.channels import channel_sql, rules_parameters
from storage.goals import Goal, list_goals
from storage.page_patterns import pattern_regex
from storage.tables import EVENTS

# What every row carries: time and event_id's number first (they order a visitor's events), its
# name and engaged time, and the path (the visit's entry and exit pages); then the columns the
# query's dimensions and filters read (catalogue.archive_columns), so the arrays carry no more.
BASE_COLUMNS = ("ts", "event_num", "name", "engagement_ms", "path")
ROW_COLUMNS = tuple(dict.fromkeys((*BASE_COLUMNS, *catalogue.archive_columns(), "props")))
_READ = {"event_num": "UUIDToNum(event_id)", "engagement_ms": "toUInt64(engagement_ms)"}


def columns_read(names: set[str]) -> tuple[str, ...]:
    """The archive columns rows need for dimensions and filters `names` (ROW_COLUMNS' order)."""
    needed = set(BASE_COLUMNS)
    for name in names:
        if props_key(name):
            needed.add("props")
            continue
        entry = dimension_entry(name)
        if entry is not None and entry.tally == catalogue.CHANNEL:
            needed |= {catalogue.by_tally(input_).archive_column for input_ in catalogue.CHANNEL_INPUTS}  # type: ignore[misc]
        elif entry is not None and entry.archive_column:
            needed.add(entry.archive_column)
    return tuple(column for column in ROW_COLUMNS if column in needed)


def _visit_fields(columns: tuple[str, ...]) -> list[tuple[str, str]]:
    """(name, SQL over one visit `s` and its number `k`) of what each row learns of its visit:
    start, duration, page views, engaged time, and each visit dimension whose column it carries."""
    fields = [
        ("visit_start", "s[1].1"),
        ("duration_ms", "dateDiff('millisecond', s[1].1, s[-1].1)"),
        ("visit_pageviews", "length(s)"),
        ("engaged_ms", "engaged[k]"),
    ]
    for entry in catalogue.DIMENSIONS:
        if entry.scope == "session" and entry.tally != catalogue.CHANNEL and entry.raw_sql in columns:
            fields.append((f"visit_{entry.tally}", f"s[{entry.view}].{columns.index(entry.raw_sql) + 1}"))
    return fields


# Per visitor: its events in time order (`timeline`), its page views split into visits
# (`sessions`), each other event's visit number (`others_visit`), each visit's engaged time.
_TIMELINES = """
    SELECT
        visitor_key,
        arraySort(e -> (e.1, e.2), groupArray(({read}))) AS timeline,
        arrayFilter(e -> e.3 = 'pageview', timeline) AS views,
        arrayFilter(e -> e.3 != 'pageview', timeline) AS others,
        arraySplit(
            (view, i) -> i > 1 AND dateDiff('millisecond', views[i - 1].1, view.1) > {{gap_ms:UInt64}},
            views, arrayEnumerate(views)
        ) AS sessions,
        arrayMap(o -> toUInt32(arrayFirstIndex(
            s -> length(s) > 0 AND o.1 >= s[1].1
                 AND dateDiff('millisecond', s[-1].1, o.1) <= {{gap_ms:UInt64}},
            sessions)), others) AS others_visit,
        arrayMap(k -> arraySum(arrayMap((o, j) -> if(j = k AND o.3 = 'engagement', o.{engagement}, 0),
                                        others, others_visit)),
                 arrayEnumerate(sessions)) AS engaged,
        arrayMap((s, k) -> ({visit_tuple}), sessions, arrayEnumerate(sessions)) AS visits,
        arrayMap(t -> (t.1, t.2, visits[t.1]), arrayConcat(
            arrayFlatten(arrayMap((s, k) -> arrayMap(v -> (toUInt32(k), v), s),
                                  sessions, arrayEnumerate(sessions))),
            arrayZip(others_visit, others)
        )) AS events_with_visit
    FROM {events}
    WHERE {around}{prefilter}
    GROUP BY visitor_key
"""

# One row per event of the site around the range (the day before its first and after its last:
# a visit may start before midnight, and visitor ids live one UTC day), with its visit. Each
# visitor's events are one array of (visit number, event, visit) tuples before the ARRAY JOIN, so
# nothing else (the visits' page views) is copied into every row.
_ROWS = """
SELECT
    visitor_key,
    {event_columns},
    tagged.1 AS visit_no,
    if(visit_no = 0, toUInt64(0), cityHash64(visitor_key, visit_no)) AS visit_id,
    {visit_columns},
    visit_pageviews = 1 AND engaged_ms < {{engaged_bounce_ms:UInt64}} AS is_bounce{channel}
FROM
(
{timelines}
)
ARRAY JOIN events_with_visit AS tagged
"""


# The site's events around the range (rows_sql's), as a condition on `events`.
AROUND = (
    "site = {site:String} "
    "AND ts >= toStartOfDay({start:DateTime64(3, 'UTC')}) - INTERVAL 1 DAY "
    "AND ts < toStartOfDay({end:DateTime64(3, 'UTC')} - INTERVAL 1 MILLISECOND) + INTERVAL 2 DAY"
)


def rows_sql(names: set[str], prefilter: str = "") -> str:
    """One row per event with its visit, carrying the columns dimensions and filters `names` read;
    with `prefilter` (a condition on `events`), only the visitors with an event passing it."""
    columns = columns_read(names)
    fields = _visit_fields(columns)
    channel = ""
    if "visit:channel" in names:
        inputs = (f"visit_{name}" for name in catalogue.CHANNEL_INPUTS)
        channel = f",\n    {channel_sql(*inputs)} AS visit_{catalogue.CHANNEL}"
    arguments = _row_arguments(columns, prefilter)
    arguments.update(
        event_columns=",\n    ".join(f"tagged.2.{index + 1} AS {name}" for index, name in enumerate(columns)),
        visit_columns=",\n    ".join(
            f"tagged.3.{index + 1} AS {name}" for index, (name, _) in enumerate(fields)
        ),
        visit_tuple=", ".join(sql for _, sql in fields),
        channel=channel,
    )
    return _ROWS.format(timelines=_TIMELINES.format(**arguments), **arguments)


def _row_arguments(columns: tuple[str, ...], prefilter: str) -> dict[str, str]:
    """_TIMELINES' fields: the columns read, and the visitors (all, or those passing `prefilter`)."""
    return dict(
        read=", ".join(_READ.get(name, name) for name in columns),
        engagement=str(columns.index("engagement_ms") + 1),
        events=EVENTS,
        around=AROUND,
        prefilter=(
            f"\n      AND visitor_key IN (SELECT visitor_key FROM {EVENTS} WHERE {AROUND} AND {COUNTED} "
            f"AND {prefilter})"
            if prefilter
            else ""
        ),
        visit_tuple="0",
    )


# The visit side of an unfiltered query by time and event dimensions (visits_alone): one row per
# visit starting in the range and value combination among its counted events (page views and
# custom events, read into the timeline as `values`), the time dimensions by the bucket of its
# start; no event is copied into a row. Answers compile_query's columns (kind 'visit').
_VALUES = """arrayDistinct(arrayConcat(
            arrayMap(v -> tuple({view}), s),
            arrayMap(o -> tuple({other}),
                     arrayFilter((o, j) -> j = k AND o.3 != 'engagement', others, others_visit))
        ))"""
_VISITS = """
SELECT 'visit' AS kind{keys}, 0, 0, 0, count(),
    countIf(visit_views = 1 AND engaged_ms < {{engaged_bounce_ms:UInt64}}),
    sum(duration_ms), sum(visit_views), 0
FROM
(
    SELECT visit.1 AS visit_start, visit.2 AS duration_ms, visit.3 AS visit_views, visit.4 AS engaged_ms,
        visit.5 AS visit_values
    FROM
    (
{timelines}
    )
    ARRAY JOIN arrayMap((s, k) -> (s[1].1, dateDiff('millisecond', s[1].1, s[-1].1), length(s), engaged[k],
        {visit_values}), sessions, arrayEnumerate(sessions)) AS visit
){per_value}
WHERE visit_start >= {{start:DateTime64(3, 'UTC')}} AND visit_start < {{end:DateTime64(3, 'UTC')}}{group}
"""


def visits_alone(query: Query) -> bool:
    """Whether the visit side is each visit starting in the range, once per value combination
    among its events: no filter (every event but engagement matches), no visit dimension, no
    exit_rate (which counts pages' page views besides)."""
    return (
        query.filters is None
        and "exit_rate" not in query.metrics
        and all(props_key(name) or dimension_entry(name).scope != "session" for name in query.dimensions)  # type: ignore[union-attr]
    )


def compile_visits(query: Query) -> Compiled:
    """The visit side of a query visits_alone answers, as compile_query's rows of kind 'visit'."""
    parameters = _Parameters()
    read = [*BASE_COLUMNS]  # each event dimension's value joins the events read, after the base
    keys = []
    for i, name in enumerate(query.dimensions):
        if is_time(name):
            keys.append(f"{column_sql(name, parameters, 'visit')} AS d{i}")
        else:
            read.append(column_sql(name, parameters))
            keys.append(f"value.{len(read) - len(BASE_COLUMNS)} AS d{i}")
    positions = range(len(BASE_COLUMNS) + 1, len(read) + 1)
    visit_values = _VALUES.format(
        view=", ".join(f"v.{index}" for index in positions),
        other=", ".join(f"o.{index}" for index in positions),
    )
    arguments = _row_arguments(BASE_COLUMNS, "")
    arguments["read"] = ", ".join([arguments["read"], *read[len(BASE_COLUMNS) :]])
    names = [f"d{i}" for i in range(len(keys))]
    sql = _VISITS.format(
        keys="".join(f", {key}" for key in keys),
        timelines=_TIMELINES.format(**arguments),
        visit_values=visit_values if positions else "[]",
        per_value="\nARRAY JOIN visit_values AS value" if len(read) > len(BASE_COLUMNS) else "",
        group=f"\nGROUP BY {', '.join(names)}" if names else "",
    )
    return Compiled(sql, {**_base(query, ()), **parameters.values}, ["kind", *names, *COUNTS])


# The rows of a query that needs no visit (events_alone): the site's events in the range, with
# no visit (visit_id 0: no visit side counts), so nothing is sessionised.
_FLAT_ROWS = """
SELECT visitor_key, {columns}, toUInt64(0) AS visit_id, toDateTime64(0, 3, 'UTC') AS visit_start,
    toInt64(0) AS duration_ms, toUInt64(0) AS visit_pageviews, false AS is_bounce, '' AS visit_exit_path
FROM {events}
WHERE site = {{site:String}} AND ts >= {{start:DateTime64(3, 'UTC')}} AND ts < {{end:DateTime64(3, 'UTC')}}
"""


def flat_rows_sql(names: set[str]) -> str:
    """The site's events in the range with the columns `names` read, and no visit."""
    columns = (column for column in columns_read(names) if column != "event_num")
    return _FLAT_ROWS.format(
        columns=", ".join(f"{_READ[name]} AS {name}" if name in _READ else name for name in columns),
        events=EVENTS,
    )


IN_RANGE = "ts >= {start:DateTime64(3, 'UTC')} AND ts < {end:DateTime64(3, 'UTC')}"
VISIT_IN_RANGE = (
    "visit_id != 0 AND visit_start >= {start:DateTime64(3, 'UTC')} "
    "AND visit_start < {end:DateTime64(3, 'UTC')}"
)
COUNTED = "name != 'engagement'"  # engagement events are never counted, nor matched
VISITOR = catalogue.VISITOR
COUNTS = ("pageviews", "events", "visitors", "visits", "bounces", "duration_ms", "visit_pageviews", "exits")
GOAL_DIMENSION = "event:goal"


@dataclass(frozen=True)
class Compiled:
    """The SQL and its parameters, and the names of the columns the SQL answers."""

    sql: str
    parameters: dict[str, object]
    columns: list[str]


class _Parameters:
    """Collects a query's parameters, each under a fresh name (`prefix` and a number: two
    collections in one SQL take two prefixes); `goals` are the site's, by name."""

    def __init__(self, goals: dict[str, Goal] | None = None, prefix: str = "p") -> None:
        self.values: dict[str, object] = {}
        self.goals = goals or {}
        self.prefix = prefix

    def add(self, value: object, kind: str) -> str:
        name = f"{self.prefix}{len(self.values)}"
        self.values[name] = value
        return f"{{{name}:{kind}}}"


def column_sql(name: str, parameters: _Parameters, side: str = "event") -> str:
    """The SQL of dimension `name` on a row: an event's column, its visit's (`visit_<name>`),
    a time bucket (of the event's time, or of the visit's start on the visit side), or a
    property (`(none)` where the event has none, as Plausible shows it)."""
    key = props_key(name)
    if key:
        parameter = parameters.add(key, "String")
        return f"if(mapContains(props, {parameter}), props[{parameter}], '(none)')"
    entry = dimension_entry(name)
    if entry is None:  # validate() has refused it already
        raise ValueError(f"unknown dimension {name!r}")
    if entry.scope == "time":
        return bucket_sql(entry.raw_sql, "visit_start" if side == "visit" else "ts")  # type: ignore[arg-type]
    if entry.scope == "session":
        return f"visit_{entry.tally}"
    return entry.raw_sql


def condition_sql(expression: Filter, parameters: _Parameters) -> str:
    """The filter as a condition on a row (rows_sql's columns); values are parameters."""
    if isinstance(expression, Behaviour):
        inner = condition_sql(expression.inner, parameters)
        negation = "NOT " if expression.operator == "has_not_done" else ""
        # an inner filter on the event alone is read from the archive, not from the sessionised rows
        rows = "visit_events WHERE"
        if event_only(expression.inner):
            rows = f"{EVENTS} WHERE site = {{site:String}} AND"
        done = f"SELECT {VISITOR} FROM {rows} {COUNTED} AND {IN_RANGE} AND {inner}"
        return f"{VISITOR} {negation}IN ({done})"
    if isinstance(expression, Logic):
        parts = [condition_sql(operand, parameters) for operand in expression.operands]
        if expression.operator == "not":
            return f"NOT ({parts[0]})"
        return "(" + f" {expression.operator.upper()} ".join(parts) + ")"
    return _condition_sql(expression, parameters)


def event_only(expression: Filter) -> bool:
    """Whether the filter reads the event alone (no visit dimension): it can then be tested on
    `events` as on the rows."""
    if isinstance(expression, Behaviour):
        return event_only(expression.inner)
    if isinstance(expression, Logic):
        return all(event_only(operand) for operand in expression.operands)
    entry = dimension_entry(expression.dimension)
    return entry is None or entry.scope != "session"


def visitor_prefilter(expression: Filter | None, parameters: _Parameters) -> str:
    """A condition on `events` that every visitor with a matching event has an event passing:
    the filter itself if it reads the event alone, else its conjuncts that do ('' if none). Only
    those visitors need sessionising; the others have no matching row."""
    if expression is None:
        return ""
    if event_only(expression):
        return condition_sql(expression, parameters)
    if isinstance(expression, Logic) and expression.operator == "and":
        parts = [visitor_prefilter(operand, parameters) for operand in expression.operands]
        return " AND ".join(part for part in parts if part)
    return ""


def _goal_sql(condition: Condition, parameters: _Parameters) -> str:
    """The events of the goals named (storage/goals.py): a custom event's name, or page views whose
    path matches the goal's pattern; its name and pattern are parameters."""
    parts = []
    for name in condition.values:
        goal = parameters.goals.get(name)
        if goal is None:
            raise InvalidQuery("filters", f"the goal {name!r} is not configured for this site")
        if goal.kind == "page":
            regex = parameters.add(pattern_regex(goal.page_pattern), "String")
            parts.append(f"(name = 'pageview' AND match(path, {regex}))")
        else:
            parts.append(f"name = {parameters.add(goal.event_name, 'String')}")
    test = "(" + " OR ".join(parts) + ")"
    return f"NOT {test}" if condition.operator == "is_not" else test


def _condition_sql(condition: Condition, parameters: _Parameters) -> str:
    if condition.dimension == GOAL_DIMENSION:
        return _goal_sql(condition, parameters)
    key = props_key(condition.dimension)
    column = f"props[{parameters.add(key, 'String')}]" if key else column_sql(condition.dimension, parameters)
    positive = condition.operator.removesuffix("_not")
    insensitive = not condition.case_sensitive
    values = list(condition.values)
    if positive == "matches_wildcard":
        values, positive = [wildcard_regex(value) for value in values], "matches"
    if insensitive and positive == "matches":
        values = [f"(?i){value}" for value in values]
    if insensitive and positive == "is":
        values = [value.lower() for value in values]
    array = parameters.add(values, "Array(String)")
    test = {
        "is": f"has({array}, lowerUTF8({column}))" if insensitive else f"has({array}, {column})",
        "contains": (
            f"arrayExists(part -> positionCaseInsensitiveUTF8({column}, part) > 0, {array})"
            if insensitive
            else f"arrayExists(part -> position({column}, part) > 0, {array})"
        ),
        "matches": f"arrayExists(pattern -> match({column}, pattern), {array})",
    }[positive]
    if key:  # a missing property is no value: it never is, contains or matches one
        test = f"(mapContains(props, {parameters.add(key, 'String')}) AND {test})"
    return f"NOT {test}" if condition.operator.endswith("_not") else test


EVENT_METRICS = ("visitors", "pageviews", "events", "percentage")
VISIT_METRICS = ("visits", "bounce_rate", "visit_duration", "views_per_visit")


def events_alone(query: Query) -> bool:
    """Whether the query's numbers are counts of its matching events in the range, with neither a
    visit metric, a visit or (under a filter) time dimension, nor a visit property in the filter:
    the visits only add the value combinations of matching events after the range in visits
    starting inside it (a row with no visitor), which `rows="after"` finds."""
    # unfiltered by time alone: a visit's start bucket holds its first page view, a counted event
    time_alone = query.filters is None and all(is_time(name) for name in query.dimensions)
    by_events = all(props_key(name) or dimension_entry(name).scope == "event" for name in query.dimensions)  # type: ignore[union-attr]
    return all(name in EVENT_METRICS for name in query.metrics) and (
        time_alone or (by_events and (query.filters is None or event_only(query.filters)))
    )


def compile_query(
    query: Query, channel_rules: tuple = (), goals: dict[str, Goal] | None = None, rows: str = "visits"
) -> Compiled:
    """One SQL answering `query`, reading the rows once: one aggregation with a grouping set per
    side — the matching events by the dimensions' event values (`event`), each matching visit by
    its values (`visit`, summed per value in the outer query), the page views by path for
    exit_rate (`page`), all matching visitors for percentage (`total`). Answers (kind, d0…, counts).

    `rows`: "visits", every event with its visit; "flat", the events in the range with none (for
    a query events_alone answers); "after", only the visitors with a matching event after the
    range, sessionised (their `visit` side completes a "flat" answer); otherwise the SQL of the
    rows itself (the planner's: stats/sessions_sql.py tagged_rows_sql)."""
    validate(query)
    parameters = _Parameters(goals)
    matched = COUNTED
    if query.filters is not None:
        matched += f" AND {condition_sql(query.filters, parameters)}"
    if rows == "flat":
        source = flat_rows_sql(_names(query))
    elif rows not in ("visits", "after"):
        source = rows
    else:
        prefilter = visitor_prefilter(query.filters, parameters)
        if rows == "after":
            prefilter = " AND ".join(filter(None, ["ts >= {end:DateTime64(3, 'UTC')}", prefilter]))
        source = rows_sql(_names(query), prefilter)
    dims = query.dimensions
    event_keys = [f"{column_sql(name, parameters)} AS e{i}" for i, name in enumerate(dims)]
    visit_keys = [f"{column_sql(name, parameters, 'visit')} AS v{i}" for i, name in enumerate(dims)]
    sets = [
        "(" + ", ".join(f"e{i}" for i in range(len(dims))) + ")",
        "(" + ", ".join(["visit_id", *(f"v{i}" for i in range(len(dims)))]) + ")",
    ]
    kinds = ["grouping(visit_id) = 0, 'visit'"]
    if "exit_rate" in query.metrics:  # the page's page views, whatever visit they are in
        sets.append("(page)")  # identity(path): a key of its own, not the same expression as path
        kinds.append("grouping(page) = 0, 'page'")
    if "percentage" in query.metrics and dims:  # all the matching visitors
        sets.append("()")
        kinds.append("grouping(e0) = 1, 'total'")
    pages = "exit_rate" in query.metrics
    # each combination's value: the visit's on the visit side, the page's on the page side
    value = [f"multiIf(kind = 'visit', v{i}, e{i}) AS d{i}" for i in range(len(dims))]
    if pages:  # the page's page views are keyed by the page
        value[0] = "multiIf(kind = 'visit', v0, kind = 'page', page, e0) AS d0"
    of_visit = "kind = 'visit' AND counts"
    exits = "0"
    if pages:  # validate(): the one dimension is event:page or visit:exit_page
        exits = (
            f"countIf({of_visit} AND exit_path = v0)" if dims == ("event:page",) else f"countIf({of_visit})"
        )
    grouped = [*event_keys, *visit_keys, "visit_id", *(["identity(path) AS page"] if pages else [])]
    per_set = (
        f"SELECT {', '.join(grouped)}, "
        f"multiIf({', '.join(kinds)}, 'event') AS kind, "
        f"countIf(name = 'pageview' AND {IN_RANGE}) AS pageviews, countIf({IN_RANGE}) AS events, "
        f"uniqExactIf({VISITOR}, {IN_RANGE}) AS visitors, any({VISIT_IN_RANGE}) AS counts, "
        "any(is_bounce) AS bounce, any(duration_ms) AS duration, any(visit_pageviews) AS views, "
        "any(visit_exit_path) AS exit_path "
        f"FROM visit_events WHERE {matched} AND ({IN_RANGE} OR {VISIT_IN_RANGE}) "
        f"GROUP BY GROUPING SETS ({', '.join(sets)})"
    )
    keys = [f"d{i}" for i in range(len(dims))]
    sql = (
        f"WITH visit_events AS ({source}) "
        f"SELECT {', '.join(['kind', *value])}, sum(pageviews), sum(events), sum(visitors), "
        f"countIf({of_visit}), countIf({of_visit} AND bounce), sumIf(duration, {of_visit}), "
        f"sumIf(views, {of_visit}), {exits} "
        f"FROM ({per_set}) GROUP BY {', '.join(['kind', *keys])}"
    )
    base = _base(query, channel_rules)
    columns = ["kind", *keys, *COUNTS]
    return Compiled(sql, {**base, **parameters.values}, columns)


def _base(query: Query, channel_rules: tuple) -> dict[str, object]:
    """The parameters every compiled query has."""
    return {
        "site": query.site,
        "start": query.start,
        "end": query.end,
        "gap_ms": query.session_gap_s * 1000,
        "engaged_bounce_ms": query.engaged_bounce_ms,
        "tz": query.timezone,
        **rules_parameters(channel_rules),
    }


def _names(query: Query) -> set[str]:
    return set(query.dimensions) | _filter_dimensions(query.filters)


@dataclass(frozen=True)
class Row:
    """One combination of dimension values and its metrics, in Plausible's units."""

    dimensions: tuple[object, ...]
    metrics: dict[str, object]


def _filter_dimensions(expression: Filter | None) -> set[str]:
    if expression is None:
        return set()
    if isinstance(expression, Behaviour):
        return _filter_dimensions(expression.inner)
    if isinstance(expression, Logic):
        return set().union(*(_filter_dimensions(operand) for operand in expression.operands))
    return {expression.dimension}


def answer(client: Client, query: Query) -> list[Row]:
    """Every row of `query` from the archive, ordered (query.order_by, then Plausible's default:
    the first metric descending, time ascending) and paginated."""
    validate(query)
    named = _names(query)
    rules = tuple(list_rules(client, query.site)) if "visit:channel" in named else ()
    goals = {goal.name: goal for goal in list_goals(client, query.site)} if GOAL_DIMENSION in named else {}
    return paginated(
        ordered(merged(query, answer_columns(query), counted(client, query, rules, goals)), query), query
    )


def answer_columns(query: Query) -> list[str]:
    """What every compiled query of `query` answers."""
    return ["kind", *(f"d{i}" for i in range(len(query.dimensions))), *COUNTS]


def counted(client: Client, query: Query, rules: tuple, goals: dict[str, Goal]) -> list[tuple]:
    """The counts' rows (compile_query's columns) by the cheapest exact way: the events flat and
    the visits from the visits alone (visits_alone), the events flat and the visits of the visitors
    active after the range (events_alone), or every event with its visit."""
    if events_alone(query):
        flat = _rows(client, compile_query(query, rules, goals, rows="flat"), lambda kind: kind != "visit")
        return flat + _rows(
            client, compile_query(query, rules, goals, rows="after"), lambda kind: kind == "visit"
        )
    if visits_alone(query):
        flat = _rows(client, compile_query(query, rows="flat"), lambda kind: kind != "visit")
        return flat + _rows(client, compile_visits(query), lambda kind: True)
    return _rows(client, compile_query(query, rules, goals), lambda kind: True)


def _rows(client: Client, compiled: Compiled, keep: Callable[[str], bool]) -> list[tuple]:
    """The compiled query's rows whose kind (event, visit, page, total) `keep` keeps."""
    kind = compiled.columns.index("kind")
    return [
        row
        for row in client.query(compiled.sql, parameters=compiled.parameters).result_rows
        if keep(row[kind])
    ]


EVENT_COUNTS = ("pageviews", "events", "visitors")
VISIT_COUNTS = ("visits", "bounces", "duration_ms", "visit_pageviews", "exits")


def merged(query: Query, columns: list[str], rows: list[tuple]) -> list[Row]:
    """Each combination's counts from the sides' rows (compile_query), as metrics."""
    width = len(query.dimensions)
    counts: dict[tuple, dict[str, int]] = {}
    pages: dict[object, int] = {}
    total = 0
    for row in rows:
        named = dict(zip(columns, row, strict=True))
        key = tuple(_utc(named[f"d{i}"]) for i in range(width))
        kind = named["kind"]
        if kind == "page":
            pages[key[0]] = int(named["pageviews"])
        elif kind == "total":
            total = int(named["visitors"])
        else:
            wanted = EVENT_COUNTS if kind == "event" else VISIT_COUNTS
            into = counts.setdefault(key, dict.fromkeys(COUNTS, 0))
            into.update({name: int(named[name]) for name in wanted})
    result = []
    for key, numbers in counts.items():
        if not counts_any(query.metrics, numbers):
            continue
        numbers["total_visitors"] = total if width else numbers["visitors"]
        numbers["page_pageviews"] = pages.get(key[0], 0) if width else 0
        result.append(Row(key, {name: metric_value(name, numbers) for name in query.metrics}))
    return result


def counts_any(metrics: tuple[str, ...], numbers: dict[str, int]) -> bool:
    """Whether a combination is a row: with visit metrics alone, a visit starting in the range
    has it (as `sessions` counts them: stats/sessions_sql.py; no row of zeros for a source whose
    visits all started before the range); otherwise a matching event or visit has it."""
    if set(metrics) <= set(VISIT_METRICS):
        return bool(numbers["visits"])
    return bool(numbers["visitors"] or numbers["events"] or numbers["visits"])


def _utc(value: object) -> object:
    """A time bucket's start as an aware UTC instant (ClickHouse answers naive UTC)."""
    return value.replace(tzinfo=UTC) if isinstance(value, datetime) and value.tzinfo is None else value


def metric_value(name: str, n: dict[str, int]) -> object:
    """A metric from the counts, in Plausible's units: percentages 0-100, whole seconds."""
    visits = n["visits"]
    if name in ("visitors", "pageviews", "events", "visits"):
        return n[name]
    if name == "bounce_rate":
        return round(n["bounces"] / visits * 100) if visits else 0
    if name == "visit_duration":
        return round(n["duration_ms"] / visits / 1000) if visits else 0
    if name == "views_per_visit":
        return round(n["visit_pageviews"] / visits, 2) if visits else 0.0
    if name == "percentage":
        return round(n["visitors"] / n["total_visitors"] * 100, 1) if n["total_visitors"] else 0.0
    if name == "exit_rate":
        return round(n["exits"] / n["page_pageviews"] * 100, 1) if n["page_pageviews"] else None
    raise ValueError(f"no engine metric {name!r}")


def ordered(rows: list[Row], query: Query) -> list[Row]:
    """Sorted by the order_by entries, the first deciding; without any, time ascending if a
    time dimension is asked, else the first metric descending (Plausible's defaults)."""
    order = query.order_by
    if not order:
        time = [name for name in query.dimensions if is_time(name)]
        order = ((time[0], False),) if time else ((query.metrics[0], True),)
    result = sorted(rows, key=lambda row: tuple(str(value) for value in row.dimensions))
    for name, descending in reversed(order):
        if name in query.dimensions:
            index = query.dimensions.index(name)
            result.sort(key=lambda row: str(row.dimensions[index]), reverse=descending)
        else:
            result.sort(key=lambda row: _number(row.metrics.get(name)), reverse=descending)
    return result


def paginated(rows: list[Row], query: Query) -> list[Row]:
    return rows[query.offset : query.offset + query.limit]


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else -1.0
