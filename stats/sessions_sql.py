"""The sessions compiler: the visit metrics of a query of the model (stats/query.py) from the
stream jobs' `sessions` table (migration 0020_rollups.sql: one row per visit, its newest version
per (site, session_start, visitor_id), tombstones is_deleted = 1), with the archive compiler's
semantics to the unit (stats/raw_sql.py).

What it answers (`answers`): visits, bounce_rate, visit_duration and views_per_visit of the
visits starting in [start, end), by the page and by dimensions and under filters that are
properties of the visit held in a `sessions` column (the catalogue's `sessions_column`: entry and exit page,
source, UTMs; `visit:channel` from its inputs' columns, with the site's rules) or the bucket of
the visit's start in the site's zone (time dimensions). Under such a filter every event of a
visit passes or none does, so "the visits containing a matching event" (raw_sql) are the visits
passing it. Filters on the page too (the catalogue's `sessions_array`: `paths`, the distinct
paths of the visit's page views): a visit counts when one of its paths passes the WHOLE filter,
raw_sql's rule for page views. By the page (event:page, alone or with visit and time
dimensions): raw_sql counts a visit once under each distinct page among its events passing the
filter, here the elements of `paths` passing the whole filter, ARRAY JOINed. Both are exact for
page views; custom events carry a path too, one the visit may never have viewed, so the planner
first checks whether one in the range's visits could pass the filter (other_events_sql; any
custom event there, by the page without a filter) and, if so, this compiler reads them too from
custom_events_by_page (migration 0064: the visits they keep under a page filter, the pages they
add by the page), rather than falling back to the archive. It never answers another event
dimension (country, browser, os, device are event scope: a visit may have several values), a
props, goal or behavioural filter, a filter on another event dimension, or an event metric
(visitors are distinct (UTC day, visitor) among the matching events, which a visit row cannot
give exactly).

The rows it reads carry raw_sql's names (`visit_start`, `visit_<dimension>`, duration_ms,
visit_pageviews, engaged_ms), so raw_sql's own expressions for dimensions, time buckets and
conditions run on them unchanged: the same SQL decides both answers. A visit's numbers are
raw_sql's: duration the milliseconds from first to last page view (`duration_s` is that / 1000,
rounded back), a bounce one page view with engaged time below the query's engaged_bounce_ms.
It answers raw_sql's counting rows of kind 'visit', which raw_sql.merged turns into metrics.
"""

from __future__ import annotations

from stats import catalogue, raw_sql
from stats.query import Behaviour, Condition, Filter, Logic, Query, dimension_entry, is_time, validate
from storage.calendar import Interval, bucket_sql
from storage.channels import channel_sql
from storage.queries.contract import SESSION_VISITORS, StatsQuery, dimensions_of, expression_sql
from storage.tables import CUSTOM_EVENTS_BY_PAGE, EVENTS, GOAL_EVENTS_MINUTE, SESSIONS

SESSION_METRICS = frozenset({"visits", "bounce_rate", "visit_duration", "views_per_visit"})
_OTHER_EVENTS_COLUMNS = frozenset({"path"})  # goal_events_minute's columns (migration 0022)


def _visit_column(name: str) -> str | None:
    """The `sessions` expression of the model's visit dimension `name` (None: not held)."""
    entry = dimension_entry(name)
    if entry is None or entry.scope != "session":
        return None
    if entry.tally == catalogue.CHANNEL:
        inputs = [catalogue.by_tally(input_).sessions_column for input_ in catalogue.CHANNEL_INPUTS]
        return channel_sql(*inputs) if all(inputs) else None  # type: ignore[arg-type]
    return entry.sessions_column


def answers_dimension(name: str) -> bool:
    """A time bucket, a visit property `sessions` holds, or an event dimension whose values a
    `sessions` array holds (event:page: `paths`, _array_entry)."""
    return is_time(name) or _visit_column(name) is not None or _array_entry(name) is not None


def _array_entry(name: str) -> catalogue.Dimension | None:
    """The event dimension `name` if `sessions` holds its values among a visit's page views (the
    catalogue's `sessions_array`: event:page in `paths`) and other events' values are in
    goal_events_minute under the same column name (`path`), so that other_events_sql can tell
    whether the array misses a matching one."""
    entry = dimension_entry(name)
    if entry is None or entry.scope != "event" or entry.sessions_array is None:
        return None
    return entry if entry.raw_sql in _OTHER_EVENTS_COLUMNS else None


def answers_filter(expression: Filter) -> bool:
    """Conditions on visit properties `sessions` holds and on the page (read from `paths`), in
    and / or / not (no behaviour)."""
    if isinstance(expression, Behaviour):
        return False
    if isinstance(expression, Logic):
        return all(answers_filter(operand) for operand in expression.operands)
    return _visit_column(expression.dimension) is not None or _array_entry(expression.dimension) is not None


def _arrays_named(expression: Filter | None) -> set[str]:
    """The event dimensions named in the filter whose values a `sessions` array holds."""
    return {name for name in _named(expression) if _array_entry(name) is not None}


def _arrays_grouped(query: Query) -> set[str]:
    """The query's dimensions whose values a `sessions` array holds (event:page)."""
    return {name for name in query.dimensions if _array_entry(name) is not None}


def answers(query: Query) -> bool:
    """Whether `sessions` answers the query's visit metrics exactly (its event metrics never),
    provided, when the filter or a dimension names the page, that no other event could pass the
    filter in the visits concerned, or the planner reads those events too (other_events_sql,
    Plan.custom_events). One array at most, in the filter and the dimensions together: the
    whole filter is tested on each element of ONE array, whose passing elements are then the
    visit's values of the dimension (an event has one value of each dimension)."""
    return (
        all(answers_dimension(name) for name in query.dimensions)
        and (query.filters is None or answers_filter(query.filters))
        and len(_arrays_named(query.filters) | _arrays_grouped(query)) <= 1
    )


# Columns that rows written before migrations 0062 / 0063 (the stream jobs' jar before them) do not
# fill: such a row reads '' / [] until `tally replay` rebuilds it. A row without `paths` is one of
# them (every visit has a page view), so it marks the ranges where these columns cannot be trusted.
COLUMNS_SINCE_PATHS = frozenset({"utm_content", "utm_term"})


def reads_columns_since_paths(query: Query) -> bool:
    """Whether the query reads `paths`, or a visit column added with it (COLUMNS_SINCE_PATHS)."""
    named = {*query.dimensions, *_named(query.filters)}
    return reads_paths(query) or any(_visit_column(name) in COLUMNS_SINCE_PATHS for name in named)


# One row if a visit starting in the range was written before `paths` existed (empty); over the
# parameters site, start, end (the engine's raw_sql._base, the reports' q.parameters()).
_VISITS_BEFORE_PATHS = f"""
SELECT 1 FROM {SESSIONS}
WHERE site = {{site:String}} AND is_deleted = 0 AND empty(paths)
  AND session_start >= {{start:DateTime64(3, 'UTC')}} AND session_start < {{end:DateTime64(3, 'UTC')}}
LIMIT 1
"""


def rows_before_paths_sql(query: Query) -> raw_sql.Compiled:
    """One row if a visit starting in the range was written before `paths` existed (empty)."""
    return raw_sql.Compiled(_VISITS_BEFORE_PATHS, raw_sql._base(query, ()), ["found"])


def reads_paths(query: Query) -> bool:
    """Whether the query's filter or one of its dimensions names the page, read from `paths`
    (page views only)."""
    return bool(_arrays_named(query.filters) | _arrays_grouped(query))


def _named(expression: Filter | None) -> set[str]:
    if expression is None:
        return set()
    if isinstance(expression, Logic):
        return set().union(*(_named(operand) for operand in expression.operands))
    if isinstance(expression, Behaviour):  # answers_filter() refuses them
        return _named(expression.inner)
    return {expression.dimension}


# The newest version of each visit starting in the range, with raw_sql's names and the filter's
# {columns}; tombstones are dropped by the queries reading it. Every read of `sessions` here picks
# the newest version with FINAL (ReplacingMergeTree(batch_id): the highest batch, ties to the last
# written): the engine merges only the key ranges that overlap across parts, in parallel, where
# ORDER BY … LIMIT 1 BY sorted every row read. At 10M events, the visits of a month: 85 ms
# against 426; by source x entry page 258 against 455; by page 287 against 538. A condition on
# the versions read (session_end, `paths`: a visit's versions only grow, its tombstone repeats its
# last version) holds for the newest whenever it holds for one, so it may be tested before or
# after the merge; everything else is tested outside, on the newest version.
_NEWEST_VISITS = """
    SELECT session_start AS visit_start, visitor_id, is_deleted, toUInt64(pageviews) AS visit_pageviews,
        toUInt64(engaged_ms) AS engaged_ms, toInt64(round(duration_s * 1000)) AS duration_ms{columns}
    FROM {sessions} FINAL
    WHERE site = {{site:String}}
      AND session_start >= {{start:DateTime64(3, 'UTC')}} AND session_start < {{end:DateTime64(3, 'UTC')}}
"""
# raw_sql's counting row of kind 'visit' over the visits read (raw_sql.COUNTS).
_VISIT_COUNTS = """
SELECT 'visit' AS kind{keys}, 0, 0, 0, count(),
    countIf(visit_pageviews = 1 AND engaged_ms < {{engaged_bounce_ms:UInt64}}),
    sum(duration_ms), sum(visit_pageviews), 0
"""
# The visits passing the filter, counted per combination.
_VISITS = _VISIT_COUNTS + "FROM\n(" + _NEWEST_VISITS + ")\nWHERE is_deleted = 0{condition}{group}\n"


# The custom events of the site whose path could pass the filter ({possible}), from the range's
# start up to its last visit end plus the gap (no later one is in a visit of the range).
_CUSTOM_EVENTS_OF_RANGE = """site = {{site:String}} AND ts >= {{start:DateTime64(3, 'UTC')}} AND {possible}
    AND ts <= (
        SELECT max(session_end) FROM {sessions}
        WHERE site = {{site:String}} AND session_start >= {{start:DateTime64(3, 'UTC')}}
          AND session_start < {{end:DateTime64(3, 'UTC')}}
    ) + toIntervalMillisecond({{gap_ms:UInt64}})"""


# The custom events (visit_start, visitor_id, path) of the visits of the range (newest versions)
# passing the filter with their visit's properties ({test}), each within its visit's [first page
# view, last page view + gap] (raw's rule): read from custom_events_by_page (migration 0064), only
# the events whose path could pass ({possible}) up to the range's last visit end plus the gap (no
# later one is in a visit of the range), and only their visitors' visits.
_CUSTOM_EVENTS_OF_VISITS = (
    """
        SELECT visit_start, visitor_id, path
        FROM
        (
            SELECT session_start AS visit_start, visitor_id, session_end, is_deleted{columns}
            FROM {sessions} FINAL
            WHERE site = {{site:String}} AND session_start >= {{start:DateTime64(3, 'UTC')}}
              AND session_start < {{end:DateTime64(3, 'UTC')}} AND visitor_id IN (
                  SELECT visitor_id FROM {custom_events}
                  WHERE site = {{site:String}} AND ts >= {{start:DateTime64(3, 'UTC')}} AND {possible})
        ) AS visit
        INNER JOIN
        (
            SELECT visitor_id, ts, path FROM {custom_events}
            WHERE """
    + _CUSTOM_EVENTS_OF_RANGE
    + """
        ) AS custom USING visitor_id
        WHERE is_deleted = 0 AND ts >= visit_start
          AND dateDiff('millisecond', session_end, ts) <= {{gap_ms:UInt64}} AND {test}"""
)
# The visits such an event keeps under a page filter (raw's rule: one event of the visit passes
# the whole filter).
_KEPT_BY_CUSTOM_EVENTS = "(visit_start, visitor_id) IN (SELECT visit_start, visitor_id FROM ({events}))"


def _custom_events_of_visits(
    query: Query, parameters: raw_sql._Parameters, visit_columns: str, test: str
) -> str:
    """_CUSTOM_EVENTS_OF_VISITS for `query`, the visits' columns the filter `test` reads."""
    possible = "1" if query.filters is None else _possible(query.filters, parameters)
    return _CUSTOM_EVENTS_OF_VISITS.format(
        columns=visit_columns,
        sessions=SESSIONS,
        custom_events=CUSTOM_EVENTS_BY_PAGE,
        possible=possible,
        test=test,
    )


# By an array's dimension (event:page): each visit once per value among its events passing the
# filter (raw_sql's visit side by an event dimension), the distinct values ARRAY JOINed under the
# event column's name (`path`), so raw_sql's key reads it. Its page views' values are those of
# `paths` passing the filter (`own_values`).
_VISITS_BY_VALUE = (
    _VISIT_COUNTS
    + "FROM\n(\n    SELECT *, own_values AS visit_values\n    FROM\n    ("
    + _NEWEST_VISITS
    + "    ) AS visit\n    WHERE is_deleted = 0\n)\nARRAY JOIN visit_values AS {value}{group}\n"
)
# With the custom events too: a visit's own values as above, and in a second branch, for the few
# visits of a visitor with a custom event that could pass, the values of its custom events that
# pass the whole filter inside the visit's [first page view, last page view + gap] (raw's rule)
# and are none of its own ({extra}): its own and those together are the distinct values of all
# its passing events. The second branch joins only those visitors' visits to their custom events
# (an inner join on a small table); joining every visit of the range to them, to concatenate,
# cost 12.9 s at 10M events, and 42 s once `paths` is LowCardinality (migration 0074).
_VISITS_BY_VALUE_AND_CUSTOM = (
    _VISIT_COUNTS
    + "FROM\n(\n    SELECT {listed}, own_values AS visit_values\n    FROM\n    ("
    + _NEWEST_VISITS
    + "    ) AS visit\n    WHERE is_deleted = 0\n    UNION ALL\n"
    + "    SELECT {listed}, {extra} AS visit_values\n    FROM\n    ("
    + _NEWEST_VISITS
    + """          AND visitor_id IN (
              SELECT visitor_id FROM {custom_events}
              WHERE site = {{site:String}} AND ts >= {{start:DateTime64(3, 'UTC')}} AND {possible})
    ) AS visit{custom}
    WHERE is_deleted = 0
)
ARRAY JOIN visit_values AS {value}{group}
"""
)
# The custom events of each visitor of the range whose path could pass the filter ({possible}),
# up to the range's last visit end plus the gap, as two arrays (path, ts), joined to each of its
# visits by visitor_id (a small hash table: custom events are few beside visits); _CUSTOM_PAGES
# then keeps the pages of those in the visit's [first page view, last page view + gap] passing the
# whole filter with its properties (raw's rule).
_CUSTOM_VALUES = (
    """
    INNER JOIN
    (
        SELECT visitor_id, groupArray(path) AS custom_paths, groupArray(ts) AS custom_ts
        FROM {custom_events}
        WHERE """
    + _CUSTOM_EVENTS_OF_RANGE
    + """
        GROUP BY visitor_id
    ) AS custom USING visitor_id"""
)
_CUSTOM_PAGES = """arrayFilter((path, ts) -> ts >= visit_start
            AND dateDiff('millisecond', session_end, ts) <= {{gap_ms:UInt64}} AND {test},
            custom_paths, custom_ts)"""
# The visit columns both branches select, in one order (UNION ALL pairs them by position).
_VISIT_COLUMNS = ("visit_start", "visitor_id", "is_deleted", "visit_pageviews", "engaged_ms", "duration_ms")


def compile_sessions(
    query: Query, channel_rules: tuple = (), custom_events: bool = False
) -> raw_sql.Compiled:
    """The visit side of `query` (answers() must hold) as raw_sql.compile_query's rows of kind
    'visit': (kind, d0…, raw_sql.COUNTS); with `custom_events`, a page filter also keeps the
    visits a custom event passing it belongs to, and a page dimension counts a visit under the
    pages of its custom events passing the filter too (the planner asks for it when
    other_events_sql finds one that could: `paths` holds page views only)."""
    validate(query)
    if _arrays_grouped(query):
        return _compile_by_value(query, channel_rules, custom_events)
    parameters = raw_sql._Parameters()
    arrays = _arrays_named(query.filters)
    names = [
        name
        for name in dict.fromkeys([*query.dimensions, *_named(query.filters)])
        if not is_time(name) and name not in arrays
    ]
    columns = "".join(
        f",\n        {_visit_column(name)} AS {raw_sql.column_sql(name, parameters)}" for name in names
    )
    keys = [
        f"{raw_sql.column_sql(name, parameters, 'visit')} AS d{i}" for i, name in enumerate(query.dimensions)
    ]
    condition = ""
    if query.filters is not None:
        test = raw_sql.condition_sql(query.filters, parameters)
        event_test, visit_columns = test, columns  # for the custom events: one event, its visit
        for name in arrays:  # answers(): one at most
            entry = _array_entry(name)
            assert entry is not None and entry.sessions_array is not None
            # raw_sql's rule: a visit counts when ONE of its events passes the WHOLE filter (the
            # visit's properties constant over its rows); with page views only, when one of its
            # paths does. The lambda's variable takes the event column's name (`path`), so
            # raw_sql's condition reads it unchanged; the inner select has no such column.
            columns += f",\n        {entry.sessions_array}"
            test = f"arrayExists({entry.raw_sql} -> {test}, {entry.sessions_array})"
            if custom_events:
                events = _custom_events_of_visits(query, parameters, visit_columns, event_test)
                kept = _KEPT_BY_CUSTOM_EVENTS.format(events=events)
                test = f"({test} OR {kept})"
        # Computed on the newest version (FINAL), as a flag the outer query tests.
        columns += f",\n        {test} AS passes"
        condition = " AND passes"
    grouped = [f"d{i}" for i in range(len(keys))]
    sql = _VISITS.format(
        keys="".join(f", {key}" for key in keys),
        columns=columns,
        sessions=SESSIONS,
        condition=condition,
        group=f"\nGROUP BY {', '.join(grouped)}" if grouped else "",
    )
    return raw_sql.Compiled(
        sql, {**raw_sql._base(query, channel_rules), **parameters.values}, ["kind", *grouped, *raw_sql.COUNTS]
    )


def _compile_by_value(query: Query, channel_rules: tuple, custom_events: bool) -> raw_sql.Compiled:
    """compile_sessions by an array's dimension (answers(): the filter names no other array)."""
    parameters = raw_sql._Parameters()
    (name,) = _arrays_grouped(query)
    entry = _array_entry(name)
    assert entry is not None and entry.sessions_array is not None
    names = [
        other
        for other in dict.fromkeys([*query.dimensions, *_named(query.filters)])
        if not is_time(other) and other != name
    ]
    aliases = [raw_sql.column_sql(other, parameters) for other in names]
    columns = "".join(
        f",\n            {_visit_column(other)} AS {alias}"
        for other, alias in zip(names, aliases, strict=True)
    )
    keys = [
        f"{raw_sql.column_sql(key, parameters, 'visit')} AS d{i}" for i, key in enumerate(query.dimensions)
    ]
    test = "1" if query.filters is None else raw_sql.condition_sql(query.filters, parameters)
    # raw_sql's rule: a visit counts under each value of its events passing the WHOLE filter (the
    # visit's properties constant over its rows): its page views' are the elements of the array
    # passing it. The lambda's variable takes the event column's name (`path`), so raw_sql's
    # condition reads it unchanged; the inner select has no such column. Taken from the newest
    # version (FINAL).
    own = (
        entry.sessions_array
        if query.filters is None
        else f"arrayFilter({entry.raw_sql} -> {test}, {entry.sessions_array})"
    )
    columns += f",\n            {own} AS own_values"
    grouped = [f"d{i}" for i in range(len(keys))]
    parts = {
        "keys": "".join(f", {key}" for key in keys),
        "sessions": SESSIONS,
        "value": entry.raw_sql,
        "group": f"\nGROUP BY {', '.join(grouped)}",
    }
    if not custom_events:
        sql = _VISITS_BY_VALUE.format(columns=columns, **parts)
    else:
        possible = "1" if query.filters is None else _possible(query.filters, parameters)
        extra = f"arrayDistinct(arrayFilter(v -> NOT has(own_values, v), {_CUSTOM_PAGES.format(test=test)}))"
        sql = _VISITS_BY_VALUE_AND_CUSTOM.format(
            columns=columns + ",\n            session_end",
            listed=", ".join([*_VISIT_COLUMNS, *dict.fromkeys(aliases), "own_values"]),
            extra=extra,
            custom_events=CUSTOM_EVENTS_BY_PAGE,
            possible=possible,
            custom=_CUSTOM_VALUES.format(
                custom_events=CUSTOM_EVENTS_BY_PAGE, sessions=SESSIONS, possible=possible
            ),
            **parts,
        )
    return raw_sql.Compiled(
        sql, {**raw_sql._base(query, channel_rules), **parameters.values}, ["kind", *grouped, *raw_sql.COUNTS]
    )


# The events besides page views (custom events; migration 0022 holds no engagement event, which
# raw_sql never matches either) of the visits starting in the range that could pass the filter:
# from the range's start (a visit's events follow its first page view) to the last page view of
# those visits plus the gap (an event belongs to the visit whose [first page view, last page view
# + gap] holds it). Any such event, and `paths` may miss a visit the archive counts.
_OTHER_EVENTS = """
SELECT 1 FROM {table}
WHERE site = {{site:String}} AND name NOT IN ('pageview', 'engagement')
  AND bucket >= toStartOfMinute({{start:DateTime64(3, 'UTC')}})
  AND bucket <= (
      SELECT max(session_end) FROM {sessions}
      WHERE site = {{site:String}}
        AND session_start >= {{start:DateTime64(3, 'UTC')}} AND session_start < {{end:DateTime64(3, 'UTC')}}
  ) + toIntervalMillisecond({{gap_ms:UInt64}})
  AND {possible}
LIMIT 1
"""


def _possible(expression: Filter, parameters: raw_sql._Parameters, holds: bool = True) -> str:
    """Whether an event with a row's path could make the filter hold (`holds`) or fail, whatever
    its visit's properties: page conditions are raw_sql's on the path, visit conditions unknown
    (either way possible), and / or / not combine the two ways (and holds when all may hold,
    fails when one may fail; or the converse; not swaps them)."""
    if isinstance(expression, Logic):
        if expression.operator == "not":
            return _possible(expression.operands[0], parameters, not holds)
        parts = [_possible(operand, parameters, holds) for operand in expression.operands]
        joiner = " AND " if (expression.operator == "and") == holds else " OR "
        return "(" + joiner.join(parts) + ")"
    if isinstance(expression, Behaviour) or _array_entry(expression.dimension) is None:
        return "1"
    test = raw_sql.condition_sql(expression, parameters)
    return test if holds else f"NOT ({test})"


def other_events_sql(query: Query) -> raw_sql.Compiled:
    """One row if an event besides page views, in the visits starting in the range, could pass
    the query's filter (any such event without one) when it reads `paths` (reads_paths holds):
    then `paths` alone cannot answer it (a custom event could carry a page its visit never viewed)."""
    parameters = raw_sql._Parameters()
    possible = "1" if query.filters is None else _possible(query.filters, parameters)
    sql = _OTHER_EVENTS.format(table=GOAL_EVENTS_MINUTE, sessions=SESSIONS, possible=possible)
    return raw_sql.Compiled(sql, {**raw_sql._base(query, ()), **parameters.values}, ["found"])


# --- storage.queries' filtered session reports (the reports' filters, not the model's) -----------
# The dashboard's session breakdown and session timeseries (storage/queries raw.session_breakdown,
# raw.session_timeseries) under filters that name only visit properties `sessions` holds: the
# same sessions (those starting in the range whose properties pass), read from `sessions` instead
# of sessionising the archive. Channel is left to the archive (its rules are the site's, looked up
# by the query layer).


def report_columns() -> dict[str, str]:
    """The reports' session properties (Tally's names) `sessions` holds, each its column."""
    return {
        entry.tally: entry.sessions_column
        for entry in catalogue.DIMENSIONS
        if entry.scope == "session" and entry.sessions_column and entry.tally != catalogue.CHANNEL
    }


def _report_named(q: StatsQuery) -> set[str]:
    return set(q.filters) | (dimensions_of(q.where) if q.where is not None else set())


#: The reports' page filter (`path` = a page, a dict filter). raw's sessions keep a visit holding
#: a passing page view or a passing custom event of its visitor within [first page view, last page
#: view + gap] (storage/queries/raw.py, _SESSIONS): read here as the page in the visit's `paths`,
#: or a custom event at the page (custom_events_by_page, migration 0064) inside the visit's
#: window. Under it raw counts a visit's matching page views only, which `paths` cannot count:
#: only reports without page views read it (the session timeseries, the aggregate's visits).
PAGE = "path"


def answers_report(q: StatsQuery, by: str | None = None, page_views: bool = True) -> bool:
    """Whether `sessions` answers the session report of `q` (by `by`, or over time) exactly:
    filtered by visit properties it holds alone (no goal, props, event dimension, channel), or
    by the page too when the report counts no page views (`page_views` False), provided
    report_doubts_sql finds nothing."""
    held = set(report_columns())
    pages = set() if page_views else {PAGE}
    in_where = dimensions_of(q.where) if q.where is not None else set()
    return (
        q.filtered
        and q.goal is None
        and (by is None or by in held)
        and set(q.filters) <= held | pages
        and in_where <= held
    )


def report_doubts_sql(q: StatsQuery) -> list[str]:
    """Queries (over q.parameters()) each finding a row when `sessions` cannot answer `q` exactly
    after all: when it reads `paths` or a column added with it (COLUMNS_SINCE_PATHS), a visit of
    the range written before migrations 0062 / 0063 (those read [] / '' until `tally replay`)."""
    held = report_columns()
    if PAGE in q.filters or any(held.get(name) in COLUMNS_SINCE_PATHS for name in _report_named(q)):
        return [_VISITS_BEFORE_PATHS]
    return []


# The newest version of each session starting in the range, tombstones dropped, passing the
# report's filters; {by} names its value.
_REPORT_SESSIONS = """
    SELECT start, visitor_id, views, engaged_ms, duration_s, last_view, value
    FROM
    (
        SELECT session_start AS start, visitor_id, is_deleted, pageviews AS views, engaged_ms, duration_s,
            session_end AS last_view, {by} AS value{columns}
        FROM {sessions} FINAL
        WHERE site = {{site:String}}
          AND session_start >= {since} AND session_start < {{end:DateTime64(3, 'UTC')}}{versions}
    )
    WHERE is_deleted = 0{condition}
"""
IN_RANGE_START = "{start:DateTime64(3, 'UTC')}"
# raw's sessions are cut from the events of the day before the range on (storage/queries/raw.py
# _DAYS): the visits a page view of the range can belong to start there at the earliest.
DAY_BEFORE_START = "toStartOfDay({start:DateTime64(3, 'UTC')}) - INTERVAL 1 DAY"
# Under the page filter, the versions read are those of visits that viewed the page or hold a
# custom event at the page ({page}: its parameter) in their window: a visit's versions only grow
# (`paths` too; its tombstone repeats its last version), so its newest version passes when one
# does. The visits with such a custom event: only the few visitors with one are read and joined,
# every version of theirs, not FINAL's newest (the merge cost 50 of 166 ms at 10M events): a
# version's window [start, end + gap] holds an event when the newest's does, and the newest is
# among them, so the pairs found are those FINAL would find.
_PAGE_VERSIONS = """
          AND (has(paths, {{{page}:String}}) OR (session_start, visitor_id) IN (
        SELECT start, visitor_id
        FROM
        (
            SELECT session_start AS start, visitor_id, session_end
            FROM {sessions}
            WHERE site = {{site:String}} AND session_start >= {{start:DateTime64(3, 'UTC')}}
              AND session_start < {{end:DateTime64(3, 'UTC')}}
              AND visitor_id IN (SELECT visitor_id FROM custom_at_page)
        ) AS visit
        INNER JOIN custom_at_page USING visitor_id
        WHERE ts >= start AND dateDiff('millisecond', session_end, ts) <= {{gap_ms:UInt64}}
    ))"""
_CUSTOM_AT_PAGE = """WITH custom_at_page AS (
        SELECT visitor_id, ts FROM {custom_events}
        WHERE site = {{site:String}} AND path = {{{page}:String}} AND ts >= {{start:DateTime64(3, 'UTC')}}
    )
"""
_BOUNCE = "countIf(views = 1 AND engaged_ms < {{engaged_bounce_ms:UInt64}})"  # formatted once more
_DURATION_MS = "toInt64(round(sum(duration_s) * 1000))"
_REPORT_BREAKDOWN = f"""
SELECT value, sum(views) AS pageviews, {SESSION_VISITORS} AS visitors, count() AS sessions,
    {_BOUNCE} AS bounces, {_DURATION_MS} AS duration_ms
FROM ({{sessions}})
GROUP BY value
ORDER BY visitors DESC, pageviews DESC, value LIMIT {{{{limit:UInt32}}}}
"""
_REPORT_TOTALS = f"""
SELECT count(), {_BOUNCE}, {_DURATION_MS}
FROM ({{sessions}})
"""
_REPORT_TIMESERIES = f"""
SELECT {{bucket}} AS t, count(), {_BOUNCE}, {_DURATION_MS}
FROM ({{sessions}})
GROUP BY t ORDER BY t
"""


def _report_sessions(
    q: StatsQuery, by: str | None, since: str = IN_RANGE_START, versions: str = "", prefix: str = "filter"
) -> tuple[str, dict[str, object]]:
    """The visits of `q` passing its filters (_REPORT_SESSIONS), from those starting at `since`;
    `versions`: a condition on the versions read (one a visit's newest meets when any does); `prefix`:
    the name of the dict filters' parameters (`filter` is q.parameters()' own: <prefix>_<index>)."""
    held = report_columns()
    condition = "".join(  # the dict filters as contract.filter_sql compares them: equal
        f" AND p_{name} = {{{prefix}_{index}:String}}" for index, name in enumerate(q.filters) if name != PAGE
    )
    page = f"filter_{list(q.filters).index(PAGE)}" if PAGE in q.filters else None
    custom = _CUSTOM_AT_PAGE.format(custom_events=CUSTOM_EVENTS_BY_PAGE, page=page) if page else ""
    if page:
        versions += _PAGE_VERSIONS.format(page=page, sessions=SESSIONS)
    parameters: dict[str, object] = {}
    if q.where is not None:
        sql, parameters = expression_sql(q.where, {name: f"p_{name}" for name in held}, "sessions_where")
        condition += f" AND {sql}"
    sql = _REPORT_SESSIONS.format(
        by=held[by] if by else "''",
        columns="".join(f", {held[name]} AS p_{name}" for name in sorted(_report_named(q) - {PAGE})),
        sessions=SESSIONS,
        condition=condition,
        since=since,
        versions=versions,
    )
    sql = custom + sql
    return sql, parameters


def report_breakdown_sql(q: StatsQuery, by: str) -> tuple[str, dict[str, object]]:
    """The SQL (and parameters besides q.parameters()) of raw.session_breakdown's rows (value,
    pageviews, visitors, sessions, bounces, duration_ms) from `sessions` (answers_report holds)."""
    sessions, parameters = _report_sessions(q, by)
    return _REPORT_BREAKDOWN.format(sessions=sessions), parameters


def report_timeseries_sql(q: StatsQuery, interval: Interval) -> tuple[str, dict[str, object]]:
    """The SQL (and parameters besides q.parameters()) of raw.session_timeseries' rows (bucket,
    sessions, bounces, duration_ms) from `sessions` (answers_report holds)."""
    sessions, parameters = _report_sessions(q, None)
    return _REPORT_TIMESERIES.format(bucket=bucket_sql(interval, "start"), sessions=sessions), parameters


def report_totals_sql(q: StatsQuery) -> tuple[str, dict[str, object]]:
    """The SQL (and parameters besides q.parameters()) of the filtered aggregate's visits (sessions,
    bounces, duration_ms) from `sessions` (answers_report holds without page views)."""
    sessions, parameters = _report_sessions(q, None)
    return _REPORT_TOTALS.format(sessions=sessions), parameters


# The filtered aggregate under visit filters alone (raw.aggregate's numbers): the visits starting
# in the range (count, bounces, duration), and the page views of the range in the visits passing
# the filters with their visitors (raw.page_totals: the events of the sessions with those
# properties). A visit wholly inside the range adds its page views, and its visitor on each UTC day
# from its first page view's to its last's (page views less than the session gap apart leave no day
# between without one). A visit across the range's start or end (`edges`: few, those active at
# either instant) has its page views of the range read from the archive, by visitor and time.
#
# The edges are read from the versions ending at or after the instant they cross: a visit's
# versions only grow (its tombstone repeats its last version), so its newest version is among them
# when it crosses, and none is when it does not. (For a visit
# starting before the end, "ends at or after the end, or starts before the start and ends at or
# after it" is "crosses the start or the end": the condition on versions is the whole selection.)
_EDGE_VERSIONS = """
          AND (session_end >= {end:DateTime64(3, 'UTC')} OR (session_start < {start:DateTime64(3, 'UTC')}
               AND session_end >= {start:DateTime64(3, 'UTC')}))"""
_REPORT_EDGES = "SELECT visitor_id, start, last_view FROM ({sessions})"
_REPORT_AGGREGATE = """
SELECT toInt64(sum(is_visit)), toInt64(sum(is_bounce)), toInt64(round(sum(visit_duration_s) * 1000)),
    toInt64(sum(added_views)), toInt64(uniqExactIf(visitor_day, adds_visitor))
FROM
(
    SELECT k = 0 AS is_visit,
        k = 0 AND views = 1 AND engaged_ms < {{engaged_bounce_ms:UInt64}} AS is_bounce,
        if(k = 0, duration_s, 0) AS visit_duration_s, if(k = 0 AND inside, views, 0) AS added_views,
        cityHash64(cityHash64(visitor_id), toDate(start) + k) AS visitor_day, inside AS adds_visitor
    FROM (SELECT *, last_view < {{end:DateTime64(3, 'UTC')}} AS inside FROM ({sessions}))
    ARRAY JOIN range(if(inside, toUInt32(dateDiff('day', toDate(start), toDate(last_view))) + 1, 1)) AS k
    UNION ALL
    SELECT 0, 0, 0, 1, cityHash64(visitor_key, toDate(ts)), 1
    FROM {events}
    WHERE site = {{site:String}} AND name = 'pageview'
      AND ts >= {{start:DateTime64(3, 'UTC')}} AND ts < {{end:DateTime64(3, 'UTC')}}
      AND visitor_id IN {{edge_visitors:Array(String)}}
      AND arrayExists(
        (visitor, first, last) -> visitor = visitor_id AND ts >= first AND ts <= last,
        {{edge_visitors:Array(String)}}, {{edge_starts:Array(DateTime64(3, 'UTC'))}},
        {{edge_ends:Array(DateTime64(3, 'UTC'))}})
)
"""


def report_edges_sql(q: StatsQuery) -> tuple[str, dict[str, object]]:
    """The SQL (and parameters besides q.parameters()) of the visits passing the report's visit
    filters that cross the range's start or end: (visitor_id, start, last page view) each, the
    `edges` report_aggregate_sql then takes (answers_report holds with page views)."""
    sessions, parameters = _report_sessions(q, None, since=DAY_BEFORE_START, versions=_EDGE_VERSIONS)
    return _REPORT_EDGES.format(sessions=sessions), parameters


def report_aggregate_sql(
    q: StatsQuery, edges: list[tuple[str, object, object]]
) -> tuple[str, dict[str, object]]:
    """The SQL (and parameters besides q.parameters()) of raw.aggregate's totals under the report's
    visit filters (sessions, bounces, duration_ms, pageviews, visitors), from `sessions` and, for
    `edges` (report_edges_sql's rows), the archive."""
    sessions, parameters = _report_sessions(q, None)
    visitors, starts, ends = (list(column) for column in zip(*edges, strict=True)) if edges else ([], [], [])
    return _REPORT_AGGREGATE.format(sessions=sessions, events=EVENTS), {
        **parameters,
        "edge_visitors": visitors,
        "edge_starts": starts,
        "edge_ends": ends,
    }


# The archive's events in the range that belong to a visit passing the report's visit filters
# (storage/queries/visit_events.py): raw's members of those visits (storage/queries/session_filters.py),
# read through `sessions` instead of sessionising the archive. A page view belongs to the visit of
# its visitor whose [first page view, last page view] holds it, any other event to the one whose
# [first page view, last page view + gap] does; visits of one visitor never overlap, so it is the
# visit with the latest start at or before the event (ASOF JOIN), if the event is no later than
# that. Joined against the passing visits only, that is exact: a later passing visit starts after
# the event, and an earlier one ended more than the gap before a visit that holds it.
# The visits read are those starting from the day before the range's (raw's window, _DAYS) that
# end no earlier than the gap before its start; their versions only grow (tombstones repeat the
# last), so that condition on versions keeps every newest version that meets it.
# A relation with the archive's columns (and visitor_key, a materialized column `*` leaves out):
# the engine reads only those a report names. At 10M events, top pages under a source: 5.5 s
# sessionising the archive, 1.2 s this way.
_ACTIVE_VERSIONS = """
          AND session_end >= {start:DateTime64(3, 'UTC')} - toIntervalMillisecond({gap_ms:UInt64})"""
_VISIT_EVENTS = """(
    SELECT e.*, e.visitor_key AS visitor_key
    FROM {events} AS e
    ASOF INNER JOIN
    (
        SELECT cityHash64(visitor_id) AS visit_visitor, start AS visit_start, last_view AS visit_last_view
        FROM ({sessions})
    ) AS visit ON e.visitor_key = visit.visit_visitor AND e.ts >= visit.visit_start
    WHERE e.site = {{site:String}}
      AND e.ts >= {{start:DateTime64(3, 'UTC')}} AND e.ts < {{end:DateTime64(3, 'UTC')}}
      AND dateDiff('millisecond', visit.visit_last_view, e.ts)
          <= if(e.name = 'pageview', 0, {{gap_ms:UInt64}})
)"""
VISIT_FILTER_PREFIX = "visit_filter"  # the visit filters' parameters (visit_events_sql)


def visit_events_sql(q: StatsQuery) -> tuple[str, dict[str, object]]:
    """The relation of the archive's events in q's range belonging to the visits passing q's
    filters (visit properties `sessions` holds alone: answers_report, no page), and its parameters
    besides q.parameters()' site, start, end and gap_ms: the dict filters' as VISIT_FILTER_PREFIX_<i>,
    the expression's as `sessions_where_<i>`."""
    sessions, parameters = _report_sessions(
        q, None, since=DAY_BEFORE_START, versions=_ACTIVE_VERSIONS, prefix=VISIT_FILTER_PREFIX
    )
    own = q.parameters()
    for index in range(len(q.filters)):
        parameters[f"{VISIT_FILTER_PREFIX}_{index}"] = own[f"filter_{index}"]
    return _VISIT_EVENTS.format(events=EVENTS, sessions=sessions), parameters


# --- the engine's event metrics by and under visit properties -----------------------------------
# Event metrics (visitors, page views, events, percentage) by or under visit properties `sessions`
# holds count the matching events of the range, each with its visit's properties. The archive
# compiler finds those by sessionising the archive (raw_sql.rows_sql: 10 s for visitors by source x
# page at 10M events); here each event of the range takes them from its visit's row in `sessions`,
# by the rule visit_events_sql states (ASOF JOIN on the visitor, the latest visit starting at or
# before it, if the event is within that visit's window). An event in no visit has none ('' as
# raw_sql's visit number 0 gives). The rows carry raw_sql's names (the event's columns, and
# `visit_<dimension>`), so compile_query counts them as it counts its own.
_TAGGED_ROWS = """
SELECT e.visitor_key AS visitor_key, {columns}, toUInt64(0) AS visit_id,
    toDateTime64(0, 3, 'UTC') AS visit_start, toInt64(0) AS duration_ms, toUInt64(0) AS visit_pageviews,
    false AS is_bounce,{exit_path}
    dateDiff('millisecond', visit.joined_last_view, e.ts) <= if(e.name = 'pageview', 0, {{gap_ms:UInt64}})
        AS in_visit{visit_columns}
FROM {events} AS e
ASOF {join} JOIN
(
    SELECT cityHash64(visitor_id) AS joined_visitor, joined_start, joined_last_view{selected}
    FROM
    (
        SELECT session_start AS joined_start, visitor_id, is_deleted, session_end AS joined_last_view{read}
        FROM {sessions} FINAL
        WHERE site = {{site:String}}
          AND session_start >= toStartOfDay({{start:DateTime64(3, 'UTC')}}) - INTERVAL 1 DAY
          AND session_start < {{end:DateTime64(3, 'UTC')}}
          AND session_end >= {{start:DateTime64(3, 'UTC')}} - toIntervalMillisecond({{gap_ms:UInt64}})
    )
    WHERE is_deleted = 0{passing}
) AS visit ON e.visitor_key = visit.joined_visitor AND e.ts >= visit.joined_start
WHERE e.site = {{site:String}}
  AND e.ts >= {{start:DateTime64(3, 'UTC')}} AND e.ts < {{end:DateTime64(3, 'UTC')}}{in_visit}
"""


def _visit_names(query: Query) -> list[str]:
    """The visit dimensions the query's dimensions and filter name."""
    named = dict.fromkeys([*query.dimensions, *_named(query.filters)])
    return [name for name in named if not is_time(name) and _visit_column(name) is not None]


def tags_events(query: Query) -> bool:
    """Whether `query` counts events alone by or under visit properties `sessions` holds, so that
    its rows can be the range's events tagged with their visits' (tagged_rows_sql), no visit
    sessionised: event metrics only; every dimension a visit property `sessions` holds, an event
    dimension or a property, or a time bucket when unfiltered (under a filter a visit's start
    bucket may hold none of its matching events: raw_sql.events_alone); every condition on such a
    visit property or on the event alone (no behaviour over visit properties); one visit
    property at least (else raw_sql's flat rows answer)."""
    if not set(query.metrics) <= set(raw_sql.EVENT_METRICS):
        return False
    if query.filters is not None and any(is_time(name) for name in query.dimensions):
        return False
    if query.filters is not None and not _tagged_filter(query.filters):
        return False
    names = [*query.dimensions, *_named(query.filters)]
    held = all(
        is_time(name) or raw_sql.props_key(name) or _visit_column(name) is not None or _event_scoped(name)
        for name in names
    )
    return held and bool(_visit_names(query))


def _event_scoped(name: str) -> bool:
    entry = dimension_entry(name)
    return entry is not None and entry.scope == "event"


def _tagged_filter(expression: Filter) -> bool:
    if isinstance(expression, Behaviour):
        return raw_sql.event_only(expression.inner)
    if isinstance(expression, Logic):
        return all(_tagged_filter(operand) for operand in expression.operands)
    return True


def _required(expression: Filter | None) -> list[Condition]:
    """The filter's conditions every matching event's visit must pass and that no event outside
    a visit passes (its visit properties are ''): top-level conjuncts on a visit property
    `sessions` holds, `is` or `contains` with no empty value."""
    if expression is None:
        return []
    if isinstance(expression, Logic) and expression.operator == "and":
        return [part for operand in expression.operands for part in _required(operand)]
    if (
        isinstance(expression, Condition)
        and expression.operator in ("is", "contains")
        and all(expression.values)
        and _visit_column(expression.dimension) is not None
    ):
        return [expression]
    return []


def tagged_rows_sql(query: Query) -> tuple[str, dict[str, object]]:
    """The range's events with the columns the query reads and their visits' properties from
    `sessions` (tags_events holds), as raw_sql.compile_query's rows, and their parameters. Under
    a filter requiring visit properties (_required), only the visits passing them are joined,
    and only the events inside one are rows: no other event could match."""
    columns = [name for name in raw_sql.columns_read(raw_sql._names(query)) if name != "event_num"]
    parameters = raw_sql._Parameters(prefix="tag")
    read, selected, tagged = "", "", ""
    aliases = [raw_sql.column_sql(name, parameters) for name in _visit_names(query)]  # visit_<dimension>
    for name, alias in zip(_visit_names(query), aliases, strict=True):
        read += f", {_visit_column(name)} AS {alias}"
        selected += f", {alias} AS joined_{alias}"
        # outside a visit: raw_sql's values of visit number 0, '' (and so the channel of no source)
        outside = channel_sql("''", "''", "''") if name == "visit:channel" else "''"
        tagged += f",\n    if(in_visit, visit.joined_{alias}, {outside}) AS {alias}"
    required = [raw_sql.condition_sql(condition, parameters) for condition in _required(query.filters)]
    sql = _TAGGED_ROWS.format(
        columns=", ".join(f"{raw_sql._READ.get(name, name)} AS {name}" for name in columns).replace(
            "UUIDToNum(event_id)", "UUIDToNum(e.event_id)"
        ),
        visit_columns=tagged,
        # compile_query reads the exit page (for exit_rate, never asked here): '' unless tagged
        exit_path="" if "visit_exit_path" in aliases else " '' AS visit_exit_path,",
        events=EVENTS,
        join="INNER" if required else "LEFT",
        selected=selected,
        read=read,
        passing="".join(f" AND {condition}" for condition in required),
        in_visit="\n  AND in_visit" if required else "",
        sessions=SESSIONS,
    )
    return sql, parameters.values


# --- the engine's visitors by the page and visit properties, from `sessions` -------------------
# Visitors (distinct (UTC day, visitor) among the matching events: raw_sql) by or under the page
# and the visit properties `sessions` holds, without tagging every event of the range (a join of
# the whole archive with every visit: 10 s at 10M events for visitors by source x page):
# - the page views of a visit wholly inside the range and inside one UTC day are its `paths`, all
#   viewed on its start's UTC day: each (visit properties, page) of it passing the filter counts
#   its visitor on that day (`paths` ARRAY JOINed under the event column's name, so raw_sql's
#   keys and condition read it unchanged);
# - the page views of the other visits (across the range's start or end, or across a UTC
#   midnight: few) come from the archive, by their visitors, and every custom event of the range
#   from custom_events_by_page (migration 0064), each tagged with its visit's properties by
#   tagged_rows_sql's rule ('' in no visit).
# A (properties, page, visitor day) found twice (a visitor with a visit of each kind) is one:
# uniqExact counts the union, so the two parts need not be disjoint.
_SIMPLE_VISIT_VIEWS = """
    SELECT {keys}, cityHash64(cityHash64(visitor_id), toDate(visit_start)) AS visitor_day
    FROM
    (
        SELECT session_start AS visit_start, visitor_id, is_deleted, session_end, paths{read}
        FROM {sessions} FINAL
        WHERE site = {{site:String}}
          AND session_start >= {{start:DateTime64(3, 'UTC')}} AND session_start < {{end:DateTime64(3, 'UTC')}}
    )
    ARRAY JOIN paths AS path
    WHERE is_deleted = 0 AND session_end < {{end:DateTime64(3, 'UTC')}}
      AND toDate(visit_start) = toDate(session_end){condition}
"""
# The visitors of the visits whose page views the archive gives: any version of a visit holding
# page views of the range across its start or end or a UTC midnight (versions only grow: the
# newest is among them when it is one; an older or tombstoned one only adds a visitor read twice).
_OTHER_VISITORS = """
        SELECT cityHash64(visitor_id) FROM {sessions}
        WHERE site = {{site:String}}
          AND session_start >= toStartOfDay({{start:DateTime64(3, 'UTC')}}) - INTERVAL 1 DAY
          AND session_start < {{end:DateTime64(3, 'UTC')}} AND session_end >= {{start:DateTime64(3, 'UTC')}}
          AND (session_start < {{start:DateTime64(3, 'UTC')}} OR session_end >= {{end:DateTime64(3, 'UTC')}}
               OR toDate(session_start) != toDate(session_end))"""
_TAGGED_EVENTS = """
        SELECT cityHash64(visitor_id) AS visitor_key, ts, path, name FROM {custom_events}
        WHERE site = {{site:String}}
          AND ts >= {{start:DateTime64(3, 'UTC')}} AND ts < {{end:DateTime64(3, 'UTC')}}
        UNION ALL
        SELECT visitor_key, ts, path, name FROM {events}
        WHERE site = {{site:String}} AND name = 'pageview'
          AND ts >= {{start:DateTime64(3, 'UTC')}} AND ts < {{end:DateTime64(3, 'UTC')}}
          AND visitor_key IN ({other_visitors})"""
_TAGGED_VIEWS = """
    SELECT {keys}, visitor_day
    FROM
    (
        SELECT e.path AS path, cityHash64(e.visitor_key, toDate(e.ts)) AS visitor_day,
            dateDiff('millisecond', visit.joined_last_view, e.ts)
                <= if(e.name = 'pageview', 0, {{gap_ms:UInt64}}) AS in_visit{tagged}
        FROM ({tagged_events}
        ) AS e
        ASOF LEFT JOIN
        (
            SELECT cityHash64(visitor_id) AS joined_visitor, joined_start, joined_last_view{selected}
            FROM
            (
                SELECT session_start AS joined_start, visitor_id, is_deleted,
                    session_end AS joined_last_view{read}
                FROM {sessions} FINAL
                WHERE site = {{site:String}}
                  AND session_start >= toStartOfDay({{start:DateTime64(3, 'UTC')}}) - INTERVAL 1 DAY
                  AND session_start < {{end:DateTime64(3, 'UTC')}}
                  AND session_end >= {{start:DateTime64(3, 'UTC')}} - toIntervalMillisecond({{gap_ms:UInt64}})
                  AND cityHash64(visitor_id) IN (SELECT visitor_key FROM ({tagged_events}))
            )
            WHERE is_deleted = 0
        ) AS visit ON e.visitor_key = visit.joined_visitor AND e.ts >= visit.joined_start
    ){condition}
"""
_VISITOR_COUNTS = """
SELECT 'event' AS kind{keys}, 0, 0, uniqExact(visitor_day), 0, 0, 0, 0, 0
FROM
({simple}
    UNION ALL{tagged}
){group}
"""


def counts_visitors(query: Query) -> bool:
    """Whether `query` asks visitors alone by or under the page and visit properties `sessions`
    holds (no time, no other event dimension), naming one visit property at least (else the
    archive's flat rows answer: raw_sql.events_alone), so that visitor_rows_sql answers its
    event side."""
    return (
        query.metrics == ("visitors",)
        and not any(is_time(name) for name in query.dimensions)
        and answers(query)
        and bool(_visit_names(query))
    )


def visitor_rows_sql(query: Query, channel_rules: tuple = ()) -> raw_sql.Compiled:
    """raw_sql.compile_query's rows of kind 'event' of a query counts_visitors holds: per
    combination its visitors, from `sessions`' paths, the custom events' table and the archive's
    page views of the visits across the range's edges or a UTC midnight."""
    parameters = raw_sql._Parameters()
    names = _visit_names(query)
    aliases = [raw_sql.column_sql(name, parameters) for name in names]  # visit_<dimension>
    keys = [raw_sql.column_sql(name, parameters) for name in query.dimensions]  # `path`, visit_<…>
    condition = "" if query.filters is None else raw_sql.condition_sql(query.filters, parameters)
    read, selected, tagged = "", "", ""
    for name, alias in zip(names, aliases, strict=True):
        read += f", {_visit_column(name)} AS {alias}"
        selected += f", {alias} AS joined_{alias}"
        outside = channel_sql("''", "''", "''") if name == "visit:channel" else "''"  # no visit's
        tagged += f",\n            if(in_visit, visit.joined_{alias}, {outside}) AS {alias}"
    # each part's combination (d0…), or one constant column without dimensions
    selects = ", ".join(f"{key} AS d{i}" for i, key in enumerate(keys)) or "1 AS whole"
    simple = _SIMPLE_VISIT_VIEWS.format(
        keys=selects, read=read, sessions=SESSIONS, condition=f" AND {condition}" if condition else ""
    )
    events = _TAGGED_EVENTS.format(
        custom_events=CUSTOM_EVENTS_BY_PAGE,
        events=EVENTS,
        other_visitors=_OTHER_VISITORS.format(sessions=SESSIONS),
    )
    other = _TAGGED_VIEWS.format(
        keys=selects,
        tagged=tagged,
        tagged_events=events,
        selected=selected,
        read=read,
        sessions=SESSIONS,
        condition=f"\n    WHERE {condition}" if condition else "",
    )
    grouped = [f"d{i}" for i in range(len(keys))]
    sql = _VISITOR_COUNTS.format(
        keys="".join(f", {key}" for key in grouped),
        simple=simple,
        tagged=other,
        group=f"\nGROUP BY {', '.join(grouped)}" if grouped else "",
    )
    return raw_sql.Compiled(
        sql, {**raw_sql._base(query, channel_rules), **parameters.values}, ["kind", *grouped, *raw_sql.COUNTS]
    )
