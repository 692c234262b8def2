"""The `raw` source: every report computed at query time from the archive (`events`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from clickhouse_connect.driver.client import Client

from storage.calendar import bucket_sql
from storage.channels import CHANNEL, channel_sql
from storage.goals import Goal
from storage.queries.contract import (
    EVENT_DIMENSIONS,
    LIVE_WINDOW,
    RAW_VISITORS,
    SESSION_DIMENSIONS,
    SESSION_VISITORS,
    BreakdownRow,
    EventRow,
    Expression,
    GoalRow,
    Interval,
    PageEngagement,
    Point,
    SessionBreakdownRow,
    SessionPoint,
    SessionRow,
    StatsQuery,
    dimensions_of,
    expression_sql,
    fill,
    fill_sessions,
    goal_condition,
    goal_row,
    metrics,
    metrics_from_totals,
    page_engagement,
    session_row,
)
from storage.queries.session_filters import SESSION_FILTERS
from storage.tables import EVENTS

# What RAW_VISITORS counts distinct: a visitor on a day.
RAW_VISITORS_ARG = "cityHash64(visitor_key, toDate(ts))"

_PAGEVIEWS = """
FROM {events}
WHERE site = {{site:String}} AND name = 'pageview'
  AND ts >= {{start:DateTime64(3, 'UTC')}} AND ts < {{end:DateTime64(3, 'UTC')}}{filters}
"""

# A session's properties and the page view each is taken from: 1 its first, -1 its last.
SESSION_PROPERTIES = {
    "entry_path": ("path", 1),
    "exit_path": ("path", -1),
    "referrer_domain": ("referrer_domain", 1),
    "utm_source": ("utm_source", 1),
    "country": ("country", 1),
    "device": ("device", 1),
    "browser": ("browser", 1),
    "os": ("os", 1),
    "utm_medium": ("utm_medium", 1),
    "utm_campaign": ("utm_campaign", 1),
    "utm_content": ("utm_content", 1),
    "utm_term": ("utm_term", 1),
    # the entry page view's, as `sessions` keeps them (migration 0062): storage/rollup_backfill.py
    "screen_size": (EVENT_DIMENSIONS["screen_size"], 1),
    "language": ("language", 1),
}
# A session's properties over all of its page views: the distinct values of a column, in order
# of first view (arrayDistinct keeps each value's first occurrence). `paths` (migration 0063): the
# pages the visit viewed, as `sessions` keeps them, for storage/rollup_backfill.py.
SESSION_ARRAYS = {"paths": "path"}
# A session's sequences: a column's values over its page views in time order ((ts, event_id), as
# the stream jobs order them), consecutive repeats folded. `journey` (migration 0071): / → /a →
# /a → / gives [/, /a, /], as `sessions` keeps it, for the backfill and the journeys report.
SESSION_SEQUENCES = {"journey": "path"}
_FOLDED = "arrayFilter((v, i) -> i = 1 OR v != {values}[i - 1], {values}, arrayEnumerate({values}))"
# What the sessions list shows (SessionRow's properties).
LISTED_PROPERTIES = (
    "entry_path",
    "exit_path",
    "referrer_domain",
    "utm_source",
    "country",
    "device",
    "browser",
    "os",
)

# Sessions from page views, per visitor: its page views in time order, split where the gap
# to the previous one exceeds the session gap. Whether a page view starts a session depends
# on the page views before it (one at 23:55 makes 00:10 no start), and a session may run past
# midnight; visitor ids live one UTC day, so the whole day before the range's first day and
# the day after its last are read (a range ending at 23:50 reads the next day too). Grouping
# by visitor and sorting its few page views as an array costs a hash aggregation; a window
# over all page views would sort the whole range.
# Engagement events ride along in the same pass (never as page views): each belongs to the
# session whose [first page view, last page view + gap] holds its ts (contract.py, "engaged
# session"); those intervals are disjoint, so it is the session of the visitor's latest page
# view at or before it, if that page view is at most the gap before it.
# Under an event filter (page, country, props, goal…) the sessions are still formed from all of
# the site's page views and counted whole, as Plausible counts visits (DESIGN.md, "Definitions"):
# a session is kept when it holds an event passing the filters — one of its page views, or a
# custom event of its visitor within [first page view, last page view + gap], the rule that gives
# an engagement event its session — and its source, entry page, bounce, duration and engaged time
# are those of the whole visit. Its `matched_pageviews` are its page views that pass (all of them
# unfiltered): what a breakdown counts as page views, an event metric. Only the visitors with a
# passing event are sessionised (a semi-join on visitor_key), so a narrow filter stays cheap.
_SESSIONS = """
SELECT
    visitor_id,
    {first} AS start,
    {last} AS end,
    dateDiff('millisecond', start, end) / 1000 AS duration_s,
    length(session) AS pageviews,
    {matched_pageviews} AS matched_pageviews,
    arraySum(e -> if(e.1 >= start AND dateDiff('millisecond', end, e.1) <= {{gap_ms:UInt64}}, e.2, 0),
             engagements) AS engaged_ms,
    pageviews = 1 AND engaged_ms < {{engaged_bounce_ms:UInt64}} AS is_bounce,
    engaged_ms / 1000 AS engaged_s{properties}
FROM
(
    SELECT
        any(visitor_id) AS visitor_id,
        arraySort(groupArrayIf({view}, name = 'pageview')) AS views,
        groupArrayIf((ts, toUInt64(engagement_ms)), name = 'engagement') AS engagements,{matched}
        arrayJoin(arraySplit(
            (view, i) -> i > 1 AND dateDiff('millisecond', {previous}, {current}) > {{gap_ms:UInt64}},
            views, arrayEnumerate(views)
        )) AS session
    FROM {events}
    WHERE site = {{site:String}} AND {names}
      AND {days}{restriction}
    GROUP BY visitor_key
)
WHERE start >= {{{start}:DateTime64(3, 'UTC')}} AND start < {{{end}:DateTime64(3, 'UTC')}}{kept}
"""

# The parts of _SESSIONS that keep the whole sessions holding an event passing the filters
# (`{filters}`: q.filter_sql()). A passing page view of a session lies in [start, end]; a
# passing custom event belongs to it within [start, end + gap].
_MATCHED = """
        groupArrayIf(ts, name = 'pageview'{filters}) AS matched_views,
        groupArrayIf(ts, name NOT IN ('pageview', 'engagement'){filters}) AS matched_others,"""
_MATCHED_VISITORS = """
      AND visitor_key IN (
        SELECT visitor_key FROM {events}
        WHERE site = {{site:String}} AND name != 'engagement'
          AND {days}{filters})"""
_MATCHED_PAGEVIEWS = "arrayCount(t -> t >= start AND t <= end, matched_views)"
_KEPT = """
  AND (matched_pageviews > 0 OR arrayExists(
    t -> t >= start AND dateDiff('millisecond', end, t) <= {gap_ms:UInt64}, matched_others))"""
# The days read around the range: the whole day before its first and the day after its last.
_DAYS = """ts >= toStartOfDay({{{start}:DateTime64(3, 'UTC')}}) - INTERVAL 1 DAY
      AND ts < toStartOfDay({{{end}:DateTime64(3, 'UTC')}} - INTERVAL 1 MILLISECOND) + INTERVAL 2 DAY"""


def pageviews_sql(q: StatsQuery) -> str:
    """`FROM events WHERE …`: the page views in the range that pass the filters."""
    return _PAGEVIEWS.format(events=q.events_sql(), filters=q.filter_sql())


def raw_sessions_sql(
    q: StatsQuery, properties: tuple[str, ...] = LISTED_PROPERTIES, bounds: tuple[str, str] = ("start", "end")
) -> str:
    """The sessions starting in the range with the named properties (SESSION_PROPERTIES,
    SESSION_ARRAYS); under filters, the whole sessions holding an event that passes them (the
    comment on _SESSIONS).

    Without properties a page view is just its time; with them it is the tuple (ts,
    event_id, columns…), so that page views in the same millisecond are ordered by event_id
    (as the stream jobs order them: by its text, which UUIDToNum's bytes sort as, in 16 bytes
    instead of toString's 36) and the columns travel with their view. `bounds` names
    the DateTime64 parameters holding the range (q.parameters()' own by default)."""
    if q.visit_events is not None:  # its visit filters are in `visit_events`, not in q.filter_sql()
        raise ValueError("raw_sessions_sql sessionises the archive: a query with visit_events cannot")
    start, end = bounds
    days = _DAYS.format(start=start, end=end)
    parts = {"events": EVENTS, "start": start, "end": end, "days": days, **_filter_parts(q, days)}
    if not properties:
        return _SESSIONS.format(
            view="ts", first="session[1]", last="session[-1]", previous="views[i - 1]", current="view",
            properties="", **parts,
        )  # fmt: skip
    over_views = {**SESSION_ARRAYS, **SESSION_SEQUENCES}
    read = (over_views[name] if name in over_views else SESSION_PROPERTIES[name][0] for name in properties)
    columns = list(dict.fromkeys(read))
    selected = ""
    for name in properties:
        if name in over_views:
            values = f"arrayMap(v -> v.{3 + columns.index(over_views[name])}, session)"
            folded = (
                _FOLDED.format(values=values) if name in SESSION_SEQUENCES else f"arrayDistinct({values})"
            )
            selected += f",\n    {folded} AS {name}"
            continue
        column, view = SESSION_PROPERTIES[name]
        selected += f",\n    session[{view}].{3 + columns.index(column)} AS {name}"
    return _SESSIONS.format(
        view=f"(ts, UUIDToNum(event_id), {', '.join(columns)})", first="session[1].1", last="session[-1].1",
        previous="views[i - 1].1", current="view.1", properties=selected, **parts,
    )  # fmt: skip


def _filter_parts(q: StatsQuery, days: str) -> dict[str, str]:
    """_SESSIONS' parts for q's filters: unfiltered, or filtered on session properties only, the
    sessions of the passing events (whole sessions already), all their page views matched; under
    any other filter, those keeping the whole sessions that hold a passing event."""
    if not q.filtered or on_sessions_only(q):
        return {"names": "name IN ('pageview', 'engagement')", "matched": "", "restriction": q.filter_sql(),
                "matched_pageviews": "pageviews", "kept": ""}  # fmt: skip
    filters = q.filter_sql()
    return {
        "names": "1",  # custom events too: one passing the filters keeps its session
        "matched": _MATCHED.format(filters=filters),
        "restriction": _MATCHED_VISITORS.format(events=EVENTS, days=days, filters=filters),
        "matched_pageviews": _MATCHED_PAGEVIEWS,
        "kept": _KEPT,
    }


def on_sessions_only(q: StatsQuery) -> bool:
    """Whether all of q's filters are on a session's properties (source, UTMs, channel, entry or
    exit page: session_filters.py). The events passing them are whole sessions already (every
    page view of a session, its engagement and custom events), so sessionising just those gives
    the same sessions, and skips computing the sessions' membership a second time (a month of
    300k page views, source = google.com: 294 ms against 696 ms)."""
    named = set(q.filters) | (dimensions_of(q.where) if q.where is not None else set())
    return named <= set(SESSION_FILTERS)


def page_totals(client: Client, q: StatsQuery) -> tuple[int, int]:
    """The page views in the range that pass the filters, and their visitors."""
    pageviews, visitors = client.query(
        f"SELECT count(), {RAW_VISITORS} " + pageviews_sql(q), parameters=q.parameters()
    ).result_rows[0]
    return pageviews, visitors


def aggregate(client: Client, q: StatsQuery) -> dict[str, float]:
    pageviews, visitors = page_totals(client, q)
    sessions, bounces, duration_s = client.query(
        f"SELECT count(), countIf(is_bounce), avgOrDefault(duration_s) FROM ({raw_sessions_sql(q, ())})",
        parameters=q.parameters(),
    ).result_rows[0]
    return metrics(pageviews, visitors, sessions, bounces, duration_s)


def timeseries(client: Client, q: StatsQuery, interval: Interval) -> list[Point]:
    rows = client.query(
        f"SELECT {bucket_sql(interval, 'ts')} AS t, count(), {RAW_VISITORS} "
        + pageviews_sql(q)
        + " GROUP BY t ORDER BY t",
        parameters=q.parameters(),
    ).result_rows
    return fill(q, interval, rows)


def breakdown(client: Client, q: StatsQuery, by: str, limit: int) -> list[BreakdownRow]:
    if by in EVENT_DIMENSIONS:
        sql = (
            f"SELECT {EVENT_DIMENSIONS[by]} AS value, count() AS pageviews, {RAW_VISITORS} AS visitors "
            + pageviews_sql(q)
        )
    else:
        sql = (
            f"SELECT {SESSION_DIMENSIONS[by]} AS value, sum(matched_pageviews) AS pageviews, "
            f"{SESSION_VISITORS} AS visitors FROM ({raw_sessions_sql(q, (SESSION_DIMENSIONS[by],))})"
        )
    return ranked(client, sql, q.parameters(), limit)


def session_timeseries(client: Client, q: StatsQuery, interval: Interval) -> list[SessionPoint]:
    """Per bucket, the sessions starting in it (a session counts where it starts)."""
    rows = client.query(
        f"SELECT {bucket_sql(interval, 'start')} AS t, count(), countIf(is_bounce), "
        f"toInt64(round(sum(duration_s) * 1000)) FROM ({raw_sessions_sql(q, ())}) GROUP BY t ORDER BY t",
        parameters=q.parameters(),
    ).result_rows
    return fill_sessions(q, interval, rows)


# The sessions SQL names each session property by its dimension (SESSION_PROPERTIES), and
# a session's channel `channel` (storage/channels.py) from three of them.
SESSION_FILTER_COLUMNS = {name: name for name in (*SESSION_DIMENSIONS, CHANNEL)}
CHANNEL_PROPERTIES = ("referrer_domain", "utm_source", "utm_medium")


def sessions_with_properties_sql(q: StatsQuery, properties: set[str]) -> str:
    """The sessions starting in the range with `properties` (SESSION_FILTER_COLUMNS) as columns."""
    if CHANNEL not in properties:
        return raw_sessions_sql(q, tuple(sorted(properties)))
    inner = tuple(sorted((properties - {CHANNEL}) | set(CHANNEL_PROPERTIES)))
    return f"SELECT *, {channel_sql(*CHANNEL_PROPERTIES)} AS {CHANNEL} FROM ({raw_sessions_sql(q, inner)})"


def session_totals(
    client: Client, q: StatsQuery, where: Expression, by: str | None, limit: int
) -> list[SessionBreakdownRow]:
    """The sessions starting in the range whose properties pass `where` (an expression over
    SESSION_DIMENSIONS): their numbers in total (by None, one row valued '') or per value of
    the session dimension `by`, as session_breakdown counts them."""
    condition, parameters = expression_sql(where, SESSION_FILTER_COLUMNS, prefix="session_where")
    properties = dimensions_of(where) | ({by} if by else set())
    value = SESSION_FILTER_COLUMNS[by] if by else "''"  # a column from the fixed table only
    sql = (
        f"SELECT {value} AS value, sum(matched_pageviews) AS pageviews, {SESSION_VISITORS} AS visitors, "
        "count() AS sessions, countIf(is_bounce) AS bounces, toInt64(round(sum(duration_s) * 1000)) "
        f"FROM ({sessions_with_properties_sql(q, properties)}) WHERE {condition} GROUP BY value "
        "ORDER BY visitors DESC, pageviews DESC, value LIMIT {limit:UInt32}"
    )
    rows = client.query(sql, parameters={**q.parameters(), **parameters, "limit": limit}).result_rows
    return [
        SessionBreakdownRow(value, metrics_from_totals(pageviews, visitors, sessions, bounces, duration_ms))
        for value, pageviews, visitors, sessions, bounces, duration_ms in rows
    ]


def session_breakdown(client: Client, q: StatsQuery, by: str, limit: int) -> list[SessionBreakdownRow]:
    """Per value of a session dimension: its sessions' page views, visitors, count, bounces and
    average duration (the sessions starting in the range, as breakdown() counts them)."""
    sql = (
        f"SELECT {SESSION_DIMENSIONS[by]} AS value, sum(matched_pageviews) AS pageviews, "
        f"{SESSION_VISITORS} AS visitors, count() AS sessions, countIf(is_bounce) AS bounces, "
        "toInt64(round(sum(duration_s) * 1000)) AS duration_ms "
        f"FROM ({raw_sessions_sql(q, (SESSION_DIMENSIONS[by],))}) GROUP BY value "
        "ORDER BY visitors DESC, pageviews DESC, value LIMIT {limit:UInt32}"
    )
    rows = client.query(sql, parameters={**q.parameters(), "limit": limit}).result_rows
    # Averaged from the integer milliseconds, as agg does, so both round alike.
    return [
        SessionBreakdownRow(value, metrics_from_totals(pageviews, visitors, sessions, bounces, duration_ms))
        for value, pageviews, visitors, sessions, bounces, duration_ms in rows
    ]


# Per page and engaged visitor its engaged time and deepest scroll, then per page the sums
# contract.page_engagement divides (the module docstring of contract.py defines them).
_ENGAGEMENT = """
SELECT path, count(), sum(engaged_ms), sum(depth)
FROM
(
    SELECT path, cityHash64(visitor_key, toDate(ts)) AS visitor,
           sum(engagement_ms) AS engaged_ms, max(scroll_depth) AS depth
    FROM {events}
    WHERE site = {{site:String}} AND name = 'engagement'
      AND ts >= {{start:DateTime64(3, 'UTC')}} AND ts < {{end:DateTime64(3, 'UTC')}}
      AND has({{paths:Array(String)}}, path){filters}
    GROUP BY path, visitor
)
GROUP BY path
"""


def engagement(client: Client, q: StatsQuery, paths: list[str]) -> dict[str, PageEngagement]:
    """The engagement of each of `paths` (those without any are left out)."""
    rows = client.query(
        _ENGAGEMENT.format(events=q.events_sql(), filters=q.filter_sql()),
        parameters={**q.parameters(), "paths": paths},
    ).result_rows
    return {row[0]: page_engagement(*row) for row in rows}


# The newest sessions are looked for in the range's last day, then its last week, then all of
# it: once a tail of the range holds `limit` sessions, no session starting before it can be
# among the newest `limit`, and sessionising a day is far cheaper than a month.
RECENT_TAILS = (timedelta(days=1), timedelta(days=7))


def recent_tails(q: StatsQuery) -> list[StatsQuery]:
    """The range's last day, last week, then the whole range (the tails shorter than it)."""
    return [*(replace(q, start=q.end - tail) for tail in RECENT_TAILS if q.end - tail > q.start), q]


def sessions(client: Client, q: StatsQuery, limit: int) -> list[SessionRow]:
    for tail in recent_tails(q):
        newest = newest_sessions(client, raw_sessions_sql(tail), tail.parameters(), limit)
        if len(newest) >= limit:
            break
    return newest


def realtime(client: Client, site: str, now: datetime) -> dict[str, int]:
    visitors, pageviews = client.query(
        f"SELECT {RAW_VISITORS}, count() FROM {EVENTS} "
        "WHERE site = {site:String} AND name = 'pageview' "
        "AND ts >= {since:DateTime64(3, 'UTC')} AND ts <= {now:DateTime64(3, 'UTC')}",
        parameters={"site": site, "since": now - LIVE_WINDOW, "now": now},
    ).result_rows[0]
    return {"visitors": int(visitors), "pageviews": int(pageviews)}


def ranked(client: Client, sql: str, parameters: dict[str, object], limit: int) -> list[BreakdownRow]:
    """A breakdown: `sql` selects value, pageviews and visitors; the top `limit` values."""
    rows = client.query(
        f"{sql} GROUP BY value ORDER BY visitors DESC, pageviews DESC, value LIMIT {{limit:UInt32}}",
        parameters={**parameters, "limit": limit},
    ).result_rows
    return [BreakdownRow(value, int(pageviews), int(visitors)) for value, pageviews, visitors in rows]


def newest_sessions(
    client: Client, sessions_sql: str, parameters: dict[str, object], limit: int
) -> list[SessionRow]:
    """The newest `limit` of the sessions `sessions_sql` selects (SessionRow's columns)."""
    rows = client.query(
        f"SELECT * FROM ({sessions_sql}) ORDER BY start DESC, visitor_id LIMIT {{limit:UInt32}}",
        parameters={**parameters, "limit": limit},
    ).named_results()
    return [session_row(row) for row in rows]


# --- goals, custom events, properties (contract.py states the definitions) --------

_CUSTOM_EVENTS = "name NOT IN ('pageview', 'engagement')"
_IN_RANGE = "site = {site:String} AND ts >= {start:DateTime64(3, 'UTC')} AND ts < {end:DateTime64(3, 'UTC')}"


def goals(client: Client, q: StatsQuery, site_goals: list[Goal]) -> list[GoalRow]:
    """Every goal's events, visitors, conversion rate and revenue in one pass over the range."""
    columns, parameters = [f"uniqExactIf({RAW_VISITORS_ARG}, name = 'pageview')"], q.parameters()
    for index, goal in enumerate(site_goals):
        condition, goal_parameters = goal_condition(goal, index)
        parameters |= goal_parameters | {f"goal_{index}_currency": goal.currency}
        in_currency = f"{condition} AND revenue_currency = {{goal_{index}_currency:String}}"
        columns += [
            f"countIf({condition})",
            f"uniqExactIf({RAW_VISITORS_ARG}, {condition})",
            f"sumIf(toDecimal128OrZero(revenue_amount, 6), {in_currency})",
            f"countIf({in_currency})",
        ]
    where = goal_range_where(q)
    row = client.query(
        f"SELECT {', '.join(columns)} FROM {q.events_sql()} WHERE {where}",
        parameters=parameters,
    ).result_rows[0]
    return goal_rows(site_goals, row)


def goal_range_where(q: StatsQuery) -> str:
    """The events in the range a goal's events are among (custom events and page views passing
    the filters); `goals` counts each goal's over it, `goal_events_sql` exports them."""
    return f"{_IN_RANGE} AND name != 'engagement'{q.filter_sql()}"


def goal_events_sql(q: StatsQuery, goal: Goal) -> tuple[str, dict[str, object]]:
    """`FROM events WHERE …`: the goal's events in the range that pass the filters (what `goals`
    counts as its events; their visitors are its visitors), and the goal's parameters."""
    condition, parameters = goal_condition(goal, "export")
    return f"FROM {q.events_sql()} WHERE {goal_range_where(q)} AND {condition}", parameters


def custom_events_sql(q: StatsQuery) -> str:
    """`FROM events WHERE …`: the custom events in the range that pass the filters (what the
    breakdown by event name counts, summed over the names)."""
    return f"FROM {q.events_sql()} WHERE {_IN_RANGE} AND {_CUSTOM_EVENTS}{q.filter_sql()}"


def goal_rows(site_goals: list[Goal], row: tuple) -> list[GoalRow]:
    """GoalRows from (site visitors, then per goal: events, visitors, revenue, revenue events)."""
    rows = []
    for index, goal in enumerate(site_goals):
        events, visitors, revenue, revenue_events = row[1 + 4 * index : 5 + 4 * index]
        rows.append(goal_row(goal, events, visitors, row[0], revenue, revenue_events))
    return rows


def custom_events(client: Client, q: StatsQuery, limit: int) -> list[EventRow]:
    """Custom events by name: events and visitors."""
    return event_rows(
        client,
        f"SELECT name AS value, count() AS events, {RAW_VISITORS} AS visitors " + custom_events_sql(q),
        q.parameters(),
        limit,
    )


def properties(client: Client, q: StatsQuery, key: str, goal: Goal | None, limit: int) -> list[EventRow]:
    """The values of property `key` on the custom events (or one goal's events)."""
    condition, parameters = goal_condition(goal, 0) if goal else (_CUSTOM_EVENTS, {})
    return event_rows(
        client,
        f"SELECT props[{{prop_key:String}}] AS value, count() AS events, {RAW_VISITORS} AS visitors "
        f"FROM {q.events_sql()} WHERE {_IN_RANGE} AND {_CUSTOM_EVENTS} AND {condition} "
        f"AND mapContains(props, {{prop_key:String}}){q.filter_sql()}",
        {**q.parameters(), **parameters, "prop_key": key},
        limit,
    )


def event_rows(client: Client, sql: str, parameters: dict[str, object], limit: int) -> list[EventRow]:
    """`sql` selects value, events and visitors: the top `limit` values by visitors, events."""
    rows = client.query(
        f"{sql} GROUP BY value ORDER BY visitors DESC, events DESC, value LIMIT {{limit:UInt32}}",
        parameters={**parameters, "limit": limit},
    ).result_rows
    return [EventRow(value, int(events), int(visitors)) for value, events, visitors in rows]


def property_keys(client: Client, q: StatsQuery, limit: int, only: Sequence[str] = ()) -> list[str]:
    """The property keys the custom events carry (only those in `only`, when given), the most
    used first."""
    among = " HAVING key IN {only:Array(String)}" if only else ""
    rows = client.query(
        f"SELECT arrayJoin(mapKeys(props)) AS key FROM {q.events_sql()} "
        f"WHERE {_IN_RANGE} AND {_CUSTOM_EVENTS}{q.filter_sql()} "
        f"GROUP BY key{among} ORDER BY count() DESC, key LIMIT {{limit:UInt32}}",
        parameters={**q.parameters(), "limit": limit} | ({"only": list(only)} if only else {}),
    ).result_rows
    return [row[0] for row in rows]
