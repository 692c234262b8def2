"""The query layer: the one module the dashboard and the stats API read through.

Parameterised SQL only: user values travel as `{name:Type}` parameters, never spliced
into the SQL text; dimension names are looked up in a fixed table of columns.

Each metric is answered from one of two sources (DESIGN.md):
- `raw`: the archive (`events`), computed at query time;
- `agg`: the tables the Spark jobs derive from the same log (a cache of it).
For closed windows both give the same numbers. The definitions, for both sources:

- page view: an event with name = 'pageview'. Page views and visitors count the page views
  whose event time `ts` is in [start, end).
- visitor: distinct visitor_id (visitor_id rotates with the daily salt, so a visitor — and
  therefore a session — never spans two UTC days). Counted as uniqExact(cityHash64(visitor_id))
  on every source (migration 0005): exact but for 64-bit hash collisions.
- session: one visitor's page views of one site whose consecutive gaps are all ≤
  session_gap_s (a gap of exactly session_gap_s continues the session). A session belongs
  to the range its first page view falls in.
- bounce: a session with exactly one page view; bounce_rate = bounces / sessions (0 if none).
- session duration: last page view time - first page view time, in seconds.
- entry / exit page: path of the first / last page view of the session.
- breakdowns: path, country, browser, os, device count page views (event level);
  entry_path, exit_path, referrer_domain, utm_source are properties of a session (those of
  its first / last page view) and count the page views and visitors of those sessions.
- live visitors: distinct visitors with a page view in the last 5 minutes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Literal

from clickhouse_connect.driver.client import Client

Source = Literal["raw", "agg"]
Interval = Literal["minute", "hour", "day"]

SESSION_GAP_S = 1800
LIVE_WINDOW = timedelta(minutes=5)

# Distinct visitors of the rows at hand: `events` stores cityHash64(visitor_id) as
# visitor_key; elsewhere (derived tables, sessions) the same hash is computed inline.
RAW_VISITORS = "uniqExact(visitor_key)"
VISITORS = "uniqExact(cityHash64(visitor_id))"

# Dimension name → column (event level) or session property. Never a user string in SQL.
EVENT_DIMENSIONS = {
    "path": "path",
    "country": "country",
    "browser": "browser",
    "os": "os",
    "device": "device",
}
SESSION_DIMENSIONS = {
    "entry_path": "entry_path",
    "exit_path": "exit_path",
    "referrer_domain": "referrer_domain",
    "utm_source": "utm_source",
}
DIMENSIONS = {**EVENT_DIMENSIONS, **SESSION_DIMENSIONS}
INTERVAL_SQL = {"minute": "toStartOfMinute", "hour": "toStartOfHour", "day": "toStartOfDay"}
INTERVAL_STEP = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}


@dataclass(frozen=True)
class StatsQuery:
    """What a report asks about: one site, the half-open UTC range [start, end), and
    optional filters (event-level dimension → value) that restrict the page views counted."""

    site: str
    start: datetime
    end: datetime
    filters: dict[str, str] = field(default_factory=dict)
    session_gap_s: int = SESSION_GAP_S

    def parameters(self) -> dict[str, object]:
        parameters: dict[str, object] = {
            "site": self.site,
            "start": self.start,
            "end": self.end,
            "gap_ms": self.session_gap_s * 1000,
        }
        for index, value in enumerate(self.filters.values()):
            parameters[f"filter_{index}"] = value
        return parameters

    def filter_sql(self) -> str:
        """`AND column = {filter_i:String}` for each filter; columns come from EVENT_DIMENSIONS only."""
        return "".join(
            f" AND {EVENT_DIMENSIONS[name]} = {{filter_{index}:String}}"
            for index, name in enumerate(self.filters)
        )


@dataclass(frozen=True)
class Point:
    t: datetime
    pageviews: int
    visitors: int


@dataclass(frozen=True)
class BreakdownRow:
    value: str
    pageviews: int
    visitors: int


@dataclass(frozen=True)
class SessionRow:
    visitor_id: str
    start: datetime
    end: datetime
    duration_s: float
    pageviews: int
    entry_path: str
    exit_path: str
    is_bounce: bool
    referrer_domain: str
    utm_source: str
    country: str
    device: str
    browser: str
    os: str


class UnsupportedQuery(ValueError):
    """A parameter outside the fixed vocabulary (dimension, interval, filter)."""


def validate(q: StatsQuery) -> None:
    unknown = set(q.filters) - set(EVENT_DIMENSIONS)
    if unknown:
        raise UnsupportedQuery(f"cannot filter by {sorted(unknown)}; filters: {sorted(EVENT_DIMENSIONS)}")
    if q.end <= q.start:
        raise UnsupportedQuery("`to` must be after `from`")


# --- raw: the archive ----------------------------------------------------------------------

_RAW_PAGEVIEWS = """
FROM events
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
}

# Sessions from page views, per visitor: its page views in time order, split where the gap
# to the previous one exceeds the session gap. Visitor ids live one UTC day, so reading the
# whole days around the range is enough to see every session that starts in it.
# Grouping by visitor and sorting its few page views as an array costs a hash aggregation;
# a window over all page views would sort the whole range (several times slower).
_RAW_SESSIONS = """
SELECT
    visitor_id,
    {first} AS start,
    {last} AS end,
    dateDiff('millisecond', start, end) / 1000 AS duration_s,
    length(session) AS pageviews,
    pageviews = 1 AS is_bounce{properties}
FROM
(
    SELECT
        any(visitor_id) AS visitor_id,
        arraySort(groupArray({view})) AS views,
        arrayJoin(arraySplit(
            (view, i) -> i > 1 AND dateDiff('millisecond', {previous}, {current}) > {{gap_ms:UInt64}},
            views, arrayEnumerate(views)
        )) AS session
    FROM events
    WHERE site = {{site:String}} AND name = 'pageview'
      AND ts >= toStartOfDay({{start:DateTime64(3, 'UTC')}})
      AND ts < toStartOfDay({{end:DateTime64(3, 'UTC')}}) + INTERVAL 1 DAY{filters}
    GROUP BY visitor_key
)
WHERE start >= {{start:DateTime64(3, 'UTC')}} AND start < {{end:DateTime64(3, 'UTC')}}
"""


def raw_sessions_sql(q: StatsQuery, properties: tuple[str, ...] = tuple(SESSION_PROPERTIES)) -> str:
    """The sessions starting in the range with the named properties (SESSION_PROPERTIES).

    Without properties a page view is just its time; with them it is the tuple (ts,
    event_id, columns…), so that page views in the same millisecond are ordered by event_id
    (as the sessions stream query orders them) and the columns travel with their view."""
    if not properties:
        return _RAW_SESSIONS.format(
            view="ts", first="session[1]", last="session[-1]", previous="views[i - 1]",
            current="view", properties="", filters=q.filter_sql(),
        )  # fmt: skip
    columns = list(dict.fromkeys(SESSION_PROPERTIES[name][0] for name in properties))
    selected = ""
    for name in properties:
        column, view = SESSION_PROPERTIES[name]
        selected += f",\n    session[{view}].{3 + columns.index(column)} AS {name}"
    return _RAW_SESSIONS.format(
        view=f"(ts, toString(event_id), {', '.join(columns)})", first="session[1].1", last="session[-1].1",
        previous="views[i - 1].1", current="view.1", properties=selected, filters=q.filter_sql(),
    )  # fmt: skip


def _raw_aggregate(client: Client, q: StatsQuery) -> dict[str, float]:
    totals = f"SELECT count(), {RAW_VISITORS} " + _RAW_PAGEVIEWS.format(filters=q.filter_sql())
    return _aggregate(client, q, totals, raw_sessions_sql(q, ()))


def _raw_timeseries(client: Client, q: StatsQuery, interval: Interval) -> list[Point]:
    bucket = INTERVAL_SQL[interval]
    rows = client.query(
        f"SELECT {bucket}(ts) AS t, count(), {RAW_VISITORS} "
        + _RAW_PAGEVIEWS.format(filters=q.filter_sql())
        + " GROUP BY t ORDER BY t",
        parameters=q.parameters(),
    ).result_rows
    return _fill(q, interval, rows)


def _raw_breakdown(client: Client, q: StatsQuery, by: str, limit: int) -> list[BreakdownRow]:
    if by in EVENT_DIMENSIONS:
        sql = (
            f"SELECT {EVENT_DIMENSIONS[by]} AS value, count() AS pageviews, "
            f"{RAW_VISITORS} AS visitors " + _RAW_PAGEVIEWS.format(filters=q.filter_sql())
        )
    else:
        sql = (
            f"SELECT {SESSION_DIMENSIONS[by]} AS value, sum(pageviews) AS pageviews, "
            f"{VISITORS} AS visitors FROM ({raw_sessions_sql(q, (SESSION_DIMENSIONS[by],))})"
        )
    return _ranked(client, sql, q.parameters(), limit)


# The newest sessions are looked for in the range's last day, then its last week, then all of
# it: once a tail of the range holds `limit` sessions, no session starting before it can be
# among the newest `limit`, and sessionising a day is far cheaper than a month.
RECENT_TAILS = (timedelta(days=1), timedelta(days=7))


def _raw_sessions(client: Client, q: StatsQuery, limit: int) -> list[SessionRow]:
    tails = [replace(q, start=q.end - tail) for tail in RECENT_TAILS if q.end - tail > q.start]
    for tail in [*tails, q]:
        newest = _newest_sessions(client, raw_sessions_sql(tail), tail.parameters(), limit)
        if len(newest) >= limit:
            break
    return newest


def _raw_realtime(client: Client, site: str, now: datetime) -> dict[str, int]:
    visitors, pageviews = client.query(
        f"SELECT {RAW_VISITORS}, count() FROM events "
        "WHERE site = {site:String} AND name = 'pageview' "
        "AND ts >= {since:DateTime64(3, 'UTC')} AND ts <= {now:DateTime64(3, 'UTC')}",
        parameters={"site": site, "since": now - LIVE_WINDOW, "now": now},
    ).result_rows[0]
    return {"visitors": int(visitors), "pageviews": int(pageviews)}


# --- agg: the tables the stream jobs derive (stream_jobs/) ---------------------------------
#
# Same definitions, read from the derived tables (all ReplacingMergeTree, read with FINAL):
# - pageviews_per_minute: per (site, minute, visitor) page views → page views, visitors,
#   timeseries; event time is bucketed by minute, so ranges are exact when minute-aligned.
# - pageviews_by_dimension: the same per (dimension, value) → event-level breakdowns.
# - sessions: closed sessions (Spark's session_window, written once the sessions query's
#   watermark has passed last page view + gap); the sessions still open are stitched here
#   from the per-visitor minutes (their first/last page view), by the raw side's gap rule.
# For closed windows these equal the raw side's numbers, except for events that arrived
# behind a query's watermark: those are counted in `late_events` instead (late_pageviews()).
# Filters restrict the page views sessions are built from; the derived tables hold one
# dimension at a time, so a filtered report is answered from the archive.

_AGG_PAGEVIEWS = """
FROM pageviews_per_minute FINAL
WHERE site = {site:String}
  AND window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
"""

_AGG_CLOSED_SESSIONS = """
SELECT visitor_id, session_start AS start, session_end AS end, duration_s, pageviews, entry_path,
       exit_path, is_bounce, referrer_domain, utm_source, country, device, browser, os
FROM sessions FINAL
WHERE site = {site:String}
  AND session_start >= {start:DateTime64(3, 'UTC')} AND session_start < {end:DateTime64(3, 'UTC')}
"""

# Open sessions: a visitor's minutes after its last closed session, stitched where the gap
# from one minute's last page view to the next minute's first exceeds the session gap (gaps
# inside a minute are < 60 s, below any session gap). Kept only while the sessions query
# could still extend them (last page view + gap > its watermark); one it has closed is in
# `sessions`, one it dropped as late is not a session there either. Visitor ids live one
# UTC day, so an open session started no earlier than the day before the watermark's: the
# minutes before that are not read.
_SESSIONS_WATERMARK = "(SELECT max(watermark) FROM stream_watermarks FINAL WHERE query_name = 'sessions')"
_OPEN_SINCE = f"toStartOfDay({_SESSIONS_WATERMARK}) - INTERVAL 1 DAY"
_AGG_OPEN_SESSIONS = f"""
SELECT
    visitor_id,
    min(first_ts) AS start,
    max(last_ts) AS end,
    dateDiff('millisecond', min(first_ts), max(last_ts)) / 1000 AS duration_s,
    sum(minute_pageviews) AS pageviews,
    argMin(first_path, first_ts) AS entry_path,
    argMax(last_path, last_ts) AS exit_path,
    sum(minute_pageviews) = 1 AS is_bounce,
    argMin(referrer_domain, first_ts) AS referrer_domain,
    argMin(utm_source, first_ts) AS utm_source,
    argMin(country, first_ts) AS country,
    argMin(device, first_ts) AS device,
    argMin(browser, first_ts) AS browser,
    argMin(os, first_ts) AS os
FROM
(
    SELECT *,
           sum(starts_session) OVER (PARTITION BY visitor_id ORDER BY first_ts ROWS UNBOUNDED PRECEDING)
             AS session_number
    FROM
    (
        SELECT
            m.visitor_id AS visitor_id, first_ts, last_ts, pageviews AS minute_pageviews,
            entry_path AS first_path, exit_path AS last_path,
            referrer_domain, utm_source, country, device, browser, os,
            row_number() OVER by_visitor = 1
              OR dateDiff('millisecond', lagInFrame(last_ts) OVER by_visitor, first_ts) > {{gap_ms:UInt64}}
              AS starts_session
        FROM pageviews_per_minute AS m FINAL
        LEFT JOIN
        (
            SELECT visitor_id, max(session_end) AS closed_until
            FROM sessions FINAL
            WHERE site = {{site:String}}
              AND session_start >= toStartOfDay({{start:DateTime64(3, 'UTC')}}) - INTERVAL 1 DAY
              AND session_start >= {_OPEN_SINCE} - INTERVAL 1 DAY
              AND session_start < toStartOfDay({{end:DateTime64(3, 'UTC')}}) + INTERVAL 1 DAY
            GROUP BY visitor_id
        ) AS closed ON closed.visitor_id = m.visitor_id
        WHERE m.site = {{site:String}}
          AND m.window_start >= toStartOfDay({{start:DateTime64(3, 'UTC')}})
          AND m.window_start < toStartOfDay({{end:DateTime64(3, 'UTC')}}) + INTERVAL 1 DAY
          AND m.window_start >= {_OPEN_SINCE}
          AND m.first_ts > closed.closed_until
        WINDOW by_visitor AS (PARTITION BY visitor_id ORDER BY first_ts
                              ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
    )
)
GROUP BY visitor_id, session_number
HAVING start >= {{start:DateTime64(3, 'UTC')}} AND start < {{end:DateTime64(3, 'UTC')}}
   AND addMilliseconds(end, {{gap_ms:UInt64}}) > {_SESSIONS_WATERMARK}
"""


def agg_sessions_sql() -> str:
    """Every session starting in the range: the closed ones and those still open."""
    return f"{_AGG_CLOSED_SESSIONS} UNION ALL {_AGG_OPEN_SESSIONS}"


def _agg_aggregate(client: Client, q: StatsQuery) -> dict[str, float]:
    return _aggregate(client, q, f"SELECT sum(pageviews), {VISITORS} " + _AGG_PAGEVIEWS, agg_sessions_sql())


def _agg_timeseries(client: Client, q: StatsQuery, interval: Interval) -> list[Point]:
    bucket = INTERVAL_SQL[interval]
    rows = client.query(
        f"SELECT {bucket}(window_start) AS t, sum(pageviews), {VISITORS} "
        + _AGG_PAGEVIEWS
        + " GROUP BY t ORDER BY t",
        parameters=q.parameters(),
    ).result_rows
    return _fill(q, interval, rows)


def _agg_breakdown(client: Client, q: StatsQuery, by: str, limit: int) -> list[BreakdownRow]:
    if by in EVENT_DIMENSIONS:
        sql = (
            f"SELECT value, sum(pageviews) AS pageviews, {VISITORS} AS visitors "
            "FROM pageviews_by_dimension FINAL "
            "WHERE site = {site:String} AND dimension = {dimension:String} "
            "AND window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}"
        )
    else:
        sql = (
            f"SELECT {SESSION_DIMENSIONS[by]} AS value, sum(pageviews) AS pageviews, "
            f"{VISITORS} AS visitors FROM ({agg_sessions_sql()})"
        )
    return _ranked(client, sql, {**q.parameters(), "dimension": EVENT_DIMENSIONS.get(by, "")}, limit)


def _agg_sessions(client: Client, q: StatsQuery, limit: int) -> list[SessionRow]:
    return _newest_sessions(client, agg_sessions_sql(), q.parameters(), limit)


def _agg_realtime(client: Client, site: str, now: datetime) -> dict[str, int]:
    """Visitors exact (a visitor-minute's last page view is in the window); page views are
    those of the minutes the window touches, so up to a minute's worth more than raw."""
    since = now - LIVE_WINDOW
    visitors, pageviews = client.query(
        "SELECT uniqExactIf(cityHash64(visitor_id), last_ts >= {since:DateTime64(3, 'UTC')}), sum(pageviews) "
        "FROM pageviews_per_minute FINAL WHERE site = {site:String} "
        "AND window_start >= toStartOfMinute({since:DateTime64(3, 'UTC')}) "
        "AND window_start <= {now:DateTime64(3, 'UTC')}",
        parameters={"site": site, "since": since, "now": now},
    ).result_rows[0]
    return {"visitors": int(visitors), "pageviews": int(pageviews)}


def late_pageviews(client: Client, q: StatsQuery) -> int:
    """Page views in the range that the agg tables miss: they came behind the watermark."""
    return int(
        client.query(
            "SELECT sum(events) FROM late_events FINAL "
            "WHERE query_name = 'pageview_counts' AND site = {site:String} "
            "AND window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}",
            parameters=q.parameters(),
        ).result_rows[0][0]
    )


def _use_agg(q: StatsQuery, source: Source) -> bool:
    return source == "agg" and not q.filters


# --- shared --------------------------------------------------------------------------------
# Each source supplies its SQL; what is computed from it is stated once, here.


def _aggregate(client: Client, q: StatsQuery, totals_sql: str, sessions_sql: str) -> dict[str, float]:
    """The aggregate report from `totals_sql` (page views, visitors) and the sessions."""
    pageviews, visitors = client.query(totals_sql, parameters=q.parameters()).result_rows[0]
    sessions, bounces, duration_s = client.query(
        f"SELECT count(), countIf(is_bounce), avgOrDefault(duration_s) FROM ({sessions_sql})",
        parameters=q.parameters(),
    ).result_rows[0]
    return _metrics(pageviews, visitors, sessions, bounces, duration_s)


def _ranked(client: Client, sql: str, parameters: dict[str, object], limit: int) -> list[BreakdownRow]:
    """A breakdown: `sql` selects value, pageviews and visitors; the top `limit` values."""
    rows = client.query(
        f"{sql} GROUP BY value ORDER BY visitors DESC, pageviews DESC, value LIMIT {{limit:UInt32}}",
        parameters={**parameters, "limit": limit},
    ).result_rows
    return [BreakdownRow(value, int(pageviews), int(visitors)) for value, pageviews, visitors in rows]


def _newest_sessions(
    client: Client, sessions_sql: str, parameters: dict[str, object], limit: int
) -> list[SessionRow]:
    rows = client.query(
        f"SELECT * FROM ({sessions_sql}) ORDER BY start DESC, visitor_id LIMIT {{limit:UInt32}}",
        parameters={**parameters, "limit": limit},
    ).named_results()
    return [_session_row(row) for row in rows]


def _metrics(
    pageviews: int, visitors: int, sessions: int, bounces: int, duration_s: float
) -> dict[str, float]:
    return {
        "pageviews": int(pageviews),
        "visitors": int(visitors),
        "sessions": int(sessions),
        "bounce_rate": round(bounces / sessions, 4) if sessions else 0.0,
        "avg_session_duration_s": round(float(duration_s), 1) if sessions else 0.0,
    }


def _session_row(row: dict[str, object]) -> SessionRow:
    return SessionRow(**{name: row[name] for name in SessionRow.__dataclass_fields__})


def _as_utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def buckets(q: StatsQuery, interval: Interval) -> list[datetime]:
    """Every bucket start in [start, end), so empty buckets show as zero."""
    step = INTERVAL_STEP[interval]
    first = _as_utc(q.start)
    if interval == "minute":
        first = first.replace(second=0, microsecond=0)
    elif interval == "hour":
        first = first.replace(minute=0, second=0, microsecond=0)
    else:
        first = first.replace(hour=0, minute=0, second=0, microsecond=0)
    result, moment = [], first
    while moment < _as_utc(q.end):
        result.append(moment)
        moment += step
    return result


def _fill(q: StatsQuery, interval: Interval, rows: list[tuple]) -> list[Point]:
    counted = {_as_utc(t): (int(pageviews), int(visitors)) for t, pageviews, visitors in rows}
    return [Point(t, *counted.get(t, (0, 0))) for t in buckets(q, interval)]


# --- public API: one function per report, dispatching on the source ------------------------


def aggregate(client: Client, q: StatsQuery, source: Source = "raw") -> dict[str, float]:
    validate(q)
    if _use_agg(q, source):
        return _agg_aggregate(client, q)
    return _raw_aggregate(client, q)


def timeseries(
    client: Client, q: StatsQuery, interval: Interval = "hour", source: Source = "raw"
) -> list[Point]:
    validate(q)
    if interval not in INTERVAL_SQL:
        raise UnsupportedQuery(f"interval must be one of {sorted(INTERVAL_SQL)}")
    if _use_agg(q, source):
        return _agg_timeseries(client, q, interval)
    return _raw_timeseries(client, q, interval)


def breakdown(
    client: Client, q: StatsQuery, by: str, limit: int = 10, source: Source = "raw"
) -> list[BreakdownRow]:
    validate(q)
    if by not in DIMENSIONS:
        raise UnsupportedQuery(f"by must be one of {sorted(DIMENSIONS)}")
    if _use_agg(q, source):
        return _agg_breakdown(client, q, by, limit)
    return _raw_breakdown(client, q, by, limit)


def sessions(client: Client, q: StatsQuery, limit: int = 100, source: Source = "raw") -> list[SessionRow]:
    validate(q)
    if _use_agg(q, source):
        return _agg_sessions(client, q, limit)
    return _raw_sessions(client, q, limit)


def realtime(
    client: Client, site: str, now: datetime | None = None, source: Source = "raw"
) -> dict[str, int]:
    if source == "agg":
        return _agg_realtime(client, site, now or datetime.now(UTC))
    return _raw_realtime(client, site, now or datetime.now(UTC))


def sites(client: Client) -> list[str]:
    """Sites that have events in the archive, busiest first."""
    rows = client.query("SELECT site FROM events GROUP BY site ORDER BY count() DESC LIMIT 1000").result_rows
    return [row[0] for row in rows]


def total_pageviews(client: Client, site: str) -> int:
    return int(
        client.query(
            "SELECT count() FROM events WHERE site = {site:String} AND name = 'pageview'",
            parameters={"site": site},
        ).result_rows[0][0]
    )


_AGG_PER_MINUTE = """
SELECT window_start AS t, sum(pageviews) AS pageviews, uniqExact(cityHash64(visitor_id)) AS visitors
FROM pageviews_per_minute FINAL
WHERE site = {site:String}
  AND window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
GROUP BY t ORDER BY t
"""


def pageviews_per_minute(
    client: Client, site: str, start: datetime, end: datetime, source: Source
) -> list[Point]:
    """Per-minute page views and visitors (the dashboard's live chart)."""
    q = StatsQuery(site, start, end)
    if source == "raw":
        return _raw_timeseries(client, q, "minute")
    rows = client.query(_AGG_PER_MINUTE, parameters=q.parameters()).result_rows
    return _fill(q, "minute", rows)
