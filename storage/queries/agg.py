"""The `agg` source: reports read from the rollups and sessions the stream jobs derive
(migration 0020_rollups.sql says what each column holds).

Rollups are SummingMergeTree tables of signed deltas: read with sum() … GROUP BY, never FINAL
(unmerged parts add up to the same totals), and HAVING drops values that net to zero (an exit
page a growing session retracted, say). agg has minute resolution: a range [start, end)
counts the minute buckets whose start is in it.

A range is cut into pieces, each read from the coarsest table that answers it exactly:
whole days from rollup_day; within a day, whole hours from rollup_hour and the leftover
minutes from rollup_minute. Page views, sessions, bounces and durations are sums, so any cut
adds up. Visitors are not, so each day's segment [a, b) takes the column that makes it a sum:
- a whole day: `visitors` of rollup_day (a visitor never spans two days: days add up);
- [midnight, b): Σ day_first_visitors over the segment (visitors of [midnight, b));
- [a, next midnight): Σ day_last_visitors (visitors of [a, midnight));
- exactly one hour or one minute bucket: that bucket's `visitors`;
- [hour start, b) inside one hour: Σ hour_first_visitors of its minutes;
- otherwise, a segment inside a day touching neither midnight nor an hour's start (only an
  API caller's arbitrary from/to makes one): its visitors are counted from the raw archive
  (uniqExact over its page views, or over its sessions' starts for session dimensions), its
  additive numbers still from the rollups.
A timeseries in a site's time zone whose buckets are not UTC ones (a Berlin day, a +05:30
hour) labels each rollup row with its local bucket instead (local_summed).
Filters restrict page views by event-level values, which the rollups keep one dimension at a
time: a filtered report is answered from the archive (raw.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta

from clickhouse_connect.driver.client import Client

from storage.calendar import bucket_sql, next_bucket, zone
from storage.client_names import NAMES as CLIENT_NAMES
from storage.client_names import plausible_name_sql
from storage.goals import Goal
from storage.queries import raw
from storage.queries.contract import (
    EVENT_DIMENSIONS,
    LIVE_WINDOW,
    RAW_VISITORS,
    SESSION_DIMENSIONS,
    BreakdownRow,
    EventRow,
    GoalRow,
    Interval,
    PageEngagement,
    Point,
    SessionBreakdownRow,
    SessionPoint,
    SessionRow,
    StatsQuery,
    as_utc,
    buckets,
    fill,
    fill_sessions,
    floor_to,
    goal_condition,
    metrics,
    metrics_from_totals,
    page_engagement,
)
from storage.tables import (
    ENGAGEMENT_DAY,
    ENGAGEMENT_MINUTE,
    EVENTS,
    GOAL_EVENTS_DAY,
    GOAL_EVENTS_MINUTE,
    GOAL_PROPS_MINUTE,
    GOAL_VISITORS_DAY,
    LATE_EVENTS,
    ROLLUP_DAY,
    ROLLUP_HOUR,
    ROLLUP_MINUTE,
    SESSIONS,
)

#: The stream query that writes the rollups and `sessions` (stream_jobs/activity.py).
ACTIVITY_QUERY = "activity"

UNIT_TABLES = {"minute": ROLLUP_MINUTE, "hour": ROLLUP_HOUR, "day": ROLLUP_DAY}
MINUTE, HOUR, DAY = (timedelta(minutes=1), timedelta(hours=1), timedelta(days=1))
# The bucket every piece of an untimed report (aggregate, breakdown) is labelled with.
UNTIMED = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Piece:
    """[start, end) read from one table: a rollup, or EVENTS for a segment's raw visitors.
    `visitors` names the rollup column summed as visitors ('' for none); `label` is the
    timeseries bucket the piece counts towards (None: each row's own bucket)."""

    table: str
    start: datetime
    end: datetime
    visitors: str
    label: datetime | None


def ceil_minute(moment: datetime) -> datetime:
    floor = floor_to(moment, "minute")
    return floor if floor == as_utc(moment) else floor + MINUTE


def _ceil_to(moment: datetime, unit: Interval) -> datetime:
    floor = floor_to(moment, unit)
    return floor if floor == moment else floor + {"minute": MINUTE, "hour": HOUR, "day": DAY}[unit]


def plan(start: datetime, end: datetime, unit: Interval, label: datetime | None = None) -> list[Piece]:
    """The pieces answering [start, end) per `unit` bucket: the whole buckets in one piece of
    the unit's table, the partial first and last bucket as segments. With `label`, every
    piece counts towards that one bucket (a report over the whole range)."""
    a, b = ceil_minute(start), ceil_minute(end)
    if a >= b:
        return []
    if floor_to(a, unit) == floor_to(b - MINUTE, unit):  # inside one bucket
        return segment(a, b, label or floor_to(a, unit))
    first_whole, last_whole = _ceil_to(a, unit), floor_to(b, unit)
    pieces = []
    if a < first_whole:
        pieces += segment(a, first_whole, label or floor_to(a, unit))
    if first_whole < last_whole:
        pieces.append(Piece(UNIT_TABLES[unit], first_whole, last_whole, "visitors", label))
    if last_whole < b:
        pieces += segment(last_whole, b, label or last_whole)
    return pieces


def segment(a: datetime, b: datetime, label: datetime) -> list[Piece]:
    """The pieces of [a, b) (minute-aligned, inside one UTC day), with the visitors rule
    (module docstring) that makes this segment's visitors exact."""
    midnight = floor_to(a, "day")
    if a == midnight and b == midnight + DAY:
        return [Piece(ROLLUP_DAY, a, b, "visitors", label)]
    hour = floor_to(a, "hour")
    raw_visitors = False
    if a == midnight:
        visitors = "day_first_visitors"
    elif b == midnight + DAY:
        visitors = "day_last_visitors"
    elif (b - a == HOUR and a == hour) or b - a == MINUTE:
        visitors = "visitors"
    elif a == hour and b <= hour + HOUR:
        visitors = "hour_first_visitors"  # only on rollup_minute: [a, b) is minutes only here
    else:
        visitors, raw_visitors = "", True
    first_hour, last_hour = _ceil_to(a, "hour"), floor_to(b, "hour")
    if first_hour < last_hour:
        pieces = [Piece(ROLLUP_HOUR, first_hour, last_hour, visitors, label)]
        pieces += [
            Piece(ROLLUP_MINUTE, s, e, visitors, label) for s, e in ((a, first_hour), (last_hour, b)) if s < e
        ]
    else:
        pieces = [Piece(ROLLUP_MINUTE, a, b, visitors, label)]
    if raw_visitors:
        pieces.append(Piece(EVENTS, a, b, "", label))
    return pieces


_ROLLUP_PIECE = """
SELECT {label} AS t, value, toInt64(sum(pageviews)) AS pageviews, toInt64(sum({visitors})) AS visitors,
       toInt64(sum(sessions)) AS sessions, toInt64(sum(bounces)) AS bounces,
       toInt64(sum(duration_ms)) AS duration_ms
FROM {table}
WHERE site = {{site:String}} AND dimension = {{dimension:String}}
  AND bucket >= {{{name}_start:{type}}} AND bucket < {{{name}_end:{type}}}
GROUP BY t, value
"""
_RAW_VISITORS_PIECE = """
SELECT {label} AS t, {value} AS value, toInt64(0) AS pageviews, toInt64({visitors}) AS visitors,
       toInt64(0) AS sessions, toInt64(0) AS bounces, toInt64(0) AS duration_ms
FROM {source}
GROUP BY t, value
"""


def side_tables(suffix: str) -> str:
    """`suffix` checked: it is spliced into table names (a what-if's `_v3`, storage/definitions.py)."""
    if not re.fullmatch(r"(_v[0-9]+)?", suffix):
        raise ValueError(f"not a side-table suffix: {suffix!r}")
    return suffix


def _piece_sql(
    q: StatsQuery, dimension: str, piece: Piece, name: str, suffix: str = ""
) -> tuple[str, dict[str, object]]:
    parameters: dict[str, object] = {}
    if piece.label is None:
        label = "toDateTime(bucket, 'UTC')" if piece.table == ROLLUP_DAY else "bucket"
    else:
        label = f"{{{name}_t:DateTime('UTC')}}"
        parameters[f"{name}_t"] = piece.label
    if piece.table != EVENTS:
        day = piece.table == ROLLUP_DAY
        parameters |= {
            f"{name}_start": piece.start.date() if day else piece.start,
            f"{name}_end": piece.end.date() if day else piece.end,
        }
        sql = _ROLLUP_PIECE.format(
            label=label, visitors=piece.visitors or "0", table=piece.table + side_tables(suffix), name=name,
            type="Date" if day else "DateTime('UTC')",
        )  # fmt: skip
        return sql, parameters
    parameters |= {f"{name}_start": piece.start, f"{name}_end": piece.end}
    # A segment inside one day: distinct visitor ids are distinct (day, visitor_id).
    if dimension in SESSION_DIMENSIONS:
        sessions = raw.raw_sessions_sql(q, (dimension,), bounds=(f"{name}_start", f"{name}_end"))
        source, value, visitors = f"({sessions})", dimension, "uniqExact(cityHash64(visitor_id))"
    else:
        source = (
            f"{EVENTS} WHERE site = {{site:String}} AND name = 'pageview' "
            f"AND ts >= {{{name}_start:DateTime64(3, 'UTC')}} AND ts < {{{name}_end:DateTime64(3, 'UTC')}}"
        )
        value, visitors = EVENT_DIMENSIONS.get(dimension, "''"), "uniqExact(visitor_key)"
    return _RAW_VISITORS_PIECE.format(label=label, value=value, visitors=visitors, source=source), parameters


def _summed(
    q: StatsQuery, dimension: str, pieces: list[Piece], suffix: str = ""
) -> tuple[str, dict[str, object]]:
    """SQL selecting t, value, pageviews, visitors, sessions, bounces, duration_ms summed over
    `pieces`, one row per (t, value) that does not net to zero; from the rollups named with
    `suffix` (a what-if's side tables) if given."""
    parts, parameters = [], {**q.parameters(), "dimension": dimension}
    for index, piece in enumerate(pieces):
        sql, piece_parameters = _piece_sql(q, dimension, piece, f"p{index}", suffix)
        parts.append(sql)
        parameters |= piece_parameters
    rows = " UNION ALL ".join(parts)
    if dimension in CLIENT_NAMES:  # rollup rows of older browser/OS names join their new name's
        rows = f"SELECT * REPLACE ({plausible_name_sql(dimension, 'value')} AS value) FROM ({rows})"
    sql = (
        "SELECT t, value, sum(pageviews) AS pageviews, sum(visitors) AS visitors, sum(sessions) AS sessions, "
        "sum(bounces) AS bounces, sum(duration_ms) AS duration_ms FROM ("
        + rows
        + ") GROUP BY t, value HAVING pageviews != 0 OR visitors != 0 OR sessions != 0"
    )
    return sql, parameters


def aggregate(client: Client, q: StatsQuery, suffix: str = "") -> dict[str, float]:
    """The aggregate report; from a what-if's side tables with `suffix` (`_v3`)."""
    pieces = plan(q.start, q.end, "day", label=UNTIMED)
    if not pieces:
        return metrics(0, 0, 0, 0, 0.0)
    sql, parameters = _summed(q, "", pieces, suffix)
    rows = client.query(sql, parameters=parameters).result_rows
    _, _, pageviews, visitors, sessions, bounces, duration_ms = rows[0] if rows else (0,) * 7
    return metrics_from_totals(pageviews, visitors, sessions, bounces, duration_ms)


def page_totals(client: Client, q: StatsQuery) -> tuple[int, int]:
    """raw.page_totals under a filter on the page alone ({"path": page}): the rollups' row of
    that page, the row breakdown(q, "path") reads."""
    pieces = plan(q.start, q.end, "day", label=UNTIMED)
    if not pieces:
        return 0, 0
    sql, parameters = _page_rows(q, pieces)
    rows = client.query(f"SELECT pageviews, visitors FROM ({sql})", parameters=parameters).result_rows
    pageviews, visitors = rows[0] if rows else (0, 0)
    return int(pageviews), int(visitors)


def _page_rows(q: StatsQuery, pieces: list[Piece]) -> tuple[str, dict[str, object]]:
    """SQL selecting t, pageviews, visitors of the page q's filter names ({"path": page}) summed
    over `pieces`: the rows of that page among the rollups' rows by page."""
    sql, parameters = _summed(replace(q, filters={}), "path", pieces)
    return (
        f"SELECT t, pageviews, visitors FROM ({sql}) WHERE value = {{page:String}}",
        {**parameters, "page": q.filters["path"]},
    )


def aligned(q: StatsQuery, interval: Interval) -> bool:
    """Whether every local bucket of the range is a UTC bucket of the same unit (UTC itself;
    hours in a whole-hour zone): then the UTC plan answers."""
    return interval in UNIT_TABLES and all(
        floor_to(start, interval) == start for start in buckets(q, interval)
    )


def day_columns_exact(q: StatsQuery, interval: Interval) -> bool:
    """Whether each local bucket's part of each UTC day (cut by the range's minutes) starts at
    that day's midnight or ends at the next: then day_first_visitors (a part starting at
    midnight) or day_last_visitors (one ending there) make its visitors sums of rollup rows. A
    Berlin or +05:30 day is the tail of one UTC day and the head of the next; a local hour of a
    +05:30 zone, or "today so far" in New York, touches no UTC midnight."""
    a, b, tz = ceil_minute(q.start), ceil_minute(q.end), zone(q.timezone)
    for start in buckets(q, interval):
        s, e = max(start, a), min(next_bucket(start, interval, tz), b)
        while s < e:
            midnight = floor_to(s, "day")
            cut = min(e, midnight + DAY)
            if s != midnight and cut != midnight + DAY:
                return False
            s = cut
    return True


# A local timeseries in one statement of constant size, whatever the number of buckets: each
# rollup row labelled with its local bucket in SQL. Whole hours lying in one local bucket come
# from rollup_hour, the minutes of the other hours in the range (a boundary at :30, the range's
# cut ends) from rollup_minute. Visitors: day_first/day_last_visitors where that is exact
# (day_columns_exact; the row's part starts at its UTC midnight: first, else last), else counted
# in the archive by local bucket. Labels are calendar.bucket_sql expressions (the zone a parameter).
_HOUR_IN_ONE_BUCKET = (
    "({h} >= {{la:DateTime('UTC')}} AND {h} + INTERVAL 1 HOUR <= {{lb:DateTime('UTC')}} "
    "AND {label_h} = {label_h_end})"
)
_LOCAL_ROLLUPS = """
SELECT {label} AS t, toInt64(pageviews) AS pageviews, toInt64({visitors}) AS visitors,
       toInt64(sessions) AS sessions, toInt64(bounces) AS bounces, toInt64(duration_ms) AS duration_ms
FROM {table}
WHERE site = {{site:String}} AND dimension = ''
  AND bucket >= {{{first}:DateTime('UTC')}} AND bucket < {{lb:DateTime('UTC')}} AND {which}
"""
_LOCAL_RAW_VISITORS = f"""
SELECT {{label}} AS t, toInt64(0), toInt64({RAW_VISITORS}), toInt64(0), toInt64(0), toInt64(0)
FROM {EVENTS}
WHERE site = {{{{site:String}}}} AND name = 'pageview'
  AND ts >= {{{{la:DateTime64(3, 'UTC')}}}} AND ts < {{{{lb:DateTime64(3, 'UTC')}}}}
GROUP BY t
"""


# A row's part of its local bucket starts at the row's UTC midnight (first visits) or ends at the next.
_DAY_COLUMN_VISITORS = (
    "if(greatest({label}, {{la:DateTime('UTC')}}) <= toStartOfDay(bucket), "
    "day_first_visitors, day_last_visitors)"
)


def _hour_in_one_bucket(interval: Interval, hour: str) -> str:
    return _HOUR_IN_ONE_BUCKET.format(
        h=hour,
        label_h=bucket_sql(interval, hour),
        label_h_end=bucket_sql(interval, f"{hour} + INTERVAL 59 MINUTE"),
    )


def local_summed(q: StatsQuery, interval: Interval) -> tuple[str, dict[str, object]]:
    """SQL selecting t, pageviews, visitors, sessions, bounces, duration_ms per local bucket of
    the minutes starting in [start, end), for a zone whose buckets are not UTC ones."""
    exact = day_columns_exact(q, interval)
    visitors = _DAY_COLUMN_VISITORS if exact else "0"
    parts = []
    for table, first, hour in (
        (ROLLUP_HOUR, "la_hour", "bucket"),
        (ROLLUP_MINUTE, "la", "toStartOfHour(bucket)"),
    ):
        which = _hour_in_one_bucket(interval, hour)
        label = bucket_sql(interval, "bucket")
        parts.append(
            _LOCAL_ROLLUPS.format(
                label=label, visitors=visitors.format(label=label), table=table, first=first,
                which=which if table == ROLLUP_HOUR else f"NOT {which}",
            )
        )  # fmt: skip
    if not exact:
        parts.append(_LOCAL_RAW_VISITORS.format(label=bucket_sql(interval, "ts")))
    a, b = ceil_minute(q.start), ceil_minute(q.end)
    parameters = {**q.parameters(), "la": a, "lb": b, "la_hour": floor_to(a, "hour")}
    sql = (
        "SELECT t, sum(pageviews) AS pageviews, sum(visitors) AS visitors, sum(sessions) AS sessions, "
        "sum(bounces) AS bounces, sum(duration_ms) AS duration_ms FROM ("
        + " UNION ALL ".join(parts)
        + ") GROUP BY t HAVING pageviews != 0 OR visitors != 0 OR sessions != 0"
    )
    return sql, parameters


def _timeseries_sql(q: StatsQuery, interval: Interval) -> tuple[str, dict[str, object]] | None:
    """The summed SQL of a timeseries in the site's zone (None: an empty range)."""
    if not aligned(q, interval):
        return local_summed(q, interval) if ceil_minute(q.start) < ceil_minute(q.end) else None
    pieces = plan(q.start, q.end, interval)
    return _summed(q, "", pieces) if pieces else None


def timeseries(client: Client, q: StatsQuery, interval: Interval) -> list[Point]:
    summed = _timeseries_sql(q, interval)
    if summed is None:
        return fill(q, interval, [])
    sql, parameters = summed
    rows = client.query(f"SELECT t, pageviews, visitors FROM ({sql}) ORDER BY t", parameters=parameters)
    return fill(q, interval, rows.result_rows)


def page_timeseries(client: Client, q: StatsQuery, interval: Interval) -> list[Point] | None:
    """raw.timeseries under a filter on the page alone ({"path": page}): the rollups' rows of that
    page per bucket, when the range's buckets are UTC ones (`aligned`); None otherwise (a local
    bucket is read from the totals rows only: local_summed)."""
    if not aligned(q, interval):
        return None
    pieces = plan(q.start, q.end, interval)
    if not pieces:
        return fill(q, interval, [])
    sql, parameters = _page_rows(q, pieces)
    rows = client.query(f"{sql} ORDER BY t", parameters=parameters)
    return fill(q, interval, rows.result_rows)


def breakdown(client: Client, q: StatsQuery, by: str, limit: int) -> list[BreakdownRow]:
    pieces = plan(q.start, q.end, "day", label=UNTIMED)
    if not pieces:
        return []
    sql, parameters = _summed(q, by, pieces)
    rows = client.query(
        f"SELECT value, pageviews, visitors FROM ({sql}) "
        "ORDER BY visitors DESC, pageviews DESC, value LIMIT {limit:UInt32}",
        parameters={**parameters, "limit": limit},
    ).result_rows
    return [BreakdownRow(value, int(pageviews), int(visitors)) for value, pageviews, visitors in rows]


def session_timeseries(client: Client, q: StatsQuery, interval: Interval) -> list[SessionPoint]:
    """Per bucket, the sessions starting in it: the rollups' totals rows count sessions,
    bounces and duration_ms by session start."""
    summed = _timeseries_sql(q, interval)
    if summed is None:
        return fill_sessions(q, interval, [])
    sql, parameters = summed
    rows = client.query(
        f"SELECT t, sessions, bounces, duration_ms FROM ({sql}) ORDER BY t", parameters=parameters
    )
    return fill_sessions(q, interval, rows.result_rows)


def session_breakdown(
    client: Client, q: StatsQuery, by: str, limit: int, suffix: str = ""
) -> list[SessionBreakdownRow]:
    """Per value of a session dimension: the rollups' session rows carry sessions, bounces and
    duration_ms with the page views and visitors (migration 0020); `suffix` as in aggregate."""
    pieces = plan(q.start, q.end, "day", label=UNTIMED)
    if not pieces:
        return []
    sql, parameters = _summed(q, by, pieces, suffix)
    rows = client.query(
        f"SELECT value, pageviews, visitors, sessions, bounces, duration_ms FROM ({sql}) "
        "ORDER BY visitors DESC, pageviews DESC, value LIMIT {limit:UInt32}",
        parameters={**parameters, "limit": limit},
    ).result_rows
    return [
        SessionBreakdownRow(
            value,
            metrics_from_totals(pageviews, visitors, sessions, bounces, duration_ms),
        )
        for value, pageviews, visitors, sessions, bounces, duration_ms in rows
    ]


# --- the archive's own aggregates at two resolutions (goals, engagement) ------------------------
# Materialized views on `events` keep them per minute (migrations 0022, 0023) and per UTC day
# (0026, 0027). A range is read as its whole days from the day tables and its edge minutes from
# the minute tables. A visitor is a (UTC day, visitor_id), so no visitor is in two days: a
# number's visitors are the sum over days of each day's exact count, and the edge minutes
# (other days than the whole ones) add up with them.


@dataclass(frozen=True)
class DaySplit:
    """The minute buckets starting in a range, as whole UTC days [first_day, end_day) (none
    when first_day >= end_day) and at most two minute ranges outside them (empty when
    start == end), always two so that the SQL has one shape."""

    first_day: date
    end_day: date
    edges: tuple[tuple[datetime, datetime], tuple[datetime, datetime]]

    def parameters(self) -> dict[str, object]:
        (e0_start, e0_end), (e1_start, e1_end) = self.edges
        return {
            "days_start": self.first_day,
            "days_end": self.end_day,
            "e0_start": e0_start,
            "e0_end": e0_end,
            "e1_start": e1_start,
            "e1_end": e1_end,
        }


def day_split(start: datetime, end: datetime) -> DaySplit:
    a, b = ceil_minute(start), ceil_minute(end)
    nothing = (a, a)
    if a >= b:
        return DaySplit(a.date(), a.date(), (nothing, nothing))
    first, last = _ceil_to(a, "day"), floor_to(b, "day")
    if first >= last:  # no whole day: the minutes of [a, b), across one midnight at most
        return DaySplit(first.date(), first.date(), ((a, b), nothing))
    return DaySplit(first.date(), last.date(), ((a, first), (last, b)))


# The day tables' condition and the minute tables' (on `bucket`), over DaySplit.parameters().
IN_DAYS = "site = {site:String} AND day >= {days_start:Date} AND day < {days_end:Date}"
IN_EDGES = (
    "site = {site:String} AND ((bucket >= {e0_start:DateTime('UTC')} AND bucket < {e0_end:DateTime('UTC')})"
    " OR (bucket >= {e1_start:DateTime('UTC')} AND bucket < {e1_end:DateTime('UTC')}))"
)

# Per page: its engaged visitors, Σ engaged ms and Σ each visitor's deepest scroll. Whole days
# from engagement_day's rows (a visitor's rows of a day grouped: parts may not be merged yet),
# edge minutes from engagement_minute's states merged (per engaged visitor its deepest point).
_ENGAGEMENT = f"""
SELECT path, sum(visitors), sum(engaged_ms), sum(depth_sum)
FROM
(
    SELECT path, count() AS visitors, sum(engaged_ms) AS engaged_ms, sum(depth) AS depth_sum
    FROM
    (
        SELECT day, path, visitor, sum(engagement_ms) AS engaged_ms, max(scroll_depth) AS depth
        FROM {ENGAGEMENT_DAY}
        WHERE {IN_DAYS} AND has({{paths:Array(String)}}, path)
        GROUP BY day, path, visitor
    )
    GROUP BY path
    UNION ALL
    SELECT path, length(depths.1), engaged_ms, arraySum(depths.2)
    FROM
    (
        SELECT path, sumMerge(engagement_ms) AS engaged_ms, maxMapMerge(scroll_depths) AS depths
        FROM {ENGAGEMENT_MINUTE}
        WHERE {IN_EDGES} AND has({{paths:Array(String)}}, path)
        GROUP BY path
    )
)
GROUP BY path
"""


def engagement(client: Client, q: StatsQuery, paths: list[str]) -> dict[str, PageEngagement]:
    """The engagement of each of `paths`: the minutes starting in the range (agg's minute
    resolution), unfiltered (a filtered report reads the archive)."""
    parameters = {**q.parameters(), **day_split(q.start, q.end).parameters(), "paths": paths}
    rows = client.query(_ENGAGEMENT, parameters=parameters).result_rows
    return {row[0]: page_engagement(*row) for row in rows}


# The newest version of each session (site, session_start, visitor_id) that is not a
# tombstone; LIMIT 1 BY over the range instead of FINAL, which would merge the whole range.
_SESSIONS = f"""
SELECT visitor_id, session_start AS start, session_end AS end, duration_s, pageviews, entry_path,
       exit_path, is_bounce, engaged_ms / 1000 AS engaged_s, referrer_domain, utm_source, country, device,
       browser, os
FROM
(
    SELECT *
    FROM {SESSIONS}
    WHERE site = {{site:String}}
      AND session_start >= {{start:DateTime64(3, 'UTC')}} AND session_start < {{end:DateTime64(3, 'UTC')}}
    ORDER BY session_start DESC, visitor_id, batch_id DESC, written_at DESC
    LIMIT 1 BY session_start, visitor_id
)
WHERE is_deleted = 0
"""


def sessions(client: Client, q: StatsQuery, limit: int) -> list[SessionRow]:
    """The newest sessions starting in the range, open ones included; looked for in the
    range's last day, then week, then all of it (as raw.sessions does)."""
    for tail in raw.recent_tails(q):
        newest = raw.newest_sessions(client, _SESSIONS, tail.parameters(), limit)
        if len(newest) >= limit:
            break
    return newest


_REALTIME = f"""
SELECT
    (SELECT uniqExact(cityHash64(visitor_id)) FROM {SESSIONS}
     WHERE site = {{site:String}}
       AND session_start >= toStartOfDay({{since:DateTime64(3, 'UTC')}}) - INTERVAL 1 DAY
       AND session_start <= {{now:DateTime64(3, 'UTC')}}
       AND session_end >= {{since:DateTime64(3, 'UTC')}} AND session_end <= {{now:DateTime64(3, 'UTC')}}),
    (SELECT sum(pageviews) FROM {ROLLUP_MINUTE}
     WHERE site = {{site:String}} AND dimension = ''
       AND bucket >= toStartOfMinute({{since:DateTime64(3, 'UTC')}})
       AND bucket <= {{now:DateTime64(3, 'UTC')}})
"""


def realtime(client: Client, site: str, now: datetime) -> dict[str, int]:
    """Live visitors: those with a session whose end (its last page view so far) is in the
    last 5 minutes; every version of a session counts, since its end only grows and each
    end is a page view of its visitor (session_start bounds the read: ids live one day).
    Page views are those of the minutes the window touches, so up to a minute's worth more
    than raw."""
    visitors, pageviews = client.query(
        _REALTIME, parameters={"site": site, "since": now - LIVE_WINDOW, "now": now}
    ).result_rows[0]
    return {"visitors": int(visitors), "pageviews": int(pageviews)}


# Whether the rollups miss page views that touch the range: late ones (older than the allowed
# lateness when they came, contract.LATE_EVENTS_RULE) within a session gap of it, which can
# merge or extend the range's sessions from just outside it.
_MISSES_LATE = f"""
SELECT count() > 0 FROM {LATE_EVENTS} FINAL
WHERE query_name = {{query:String}} AND site = {{site:String}} AND events > 0
  AND window_start >= {{start:DateTime64(3, 'UTC')}} - toIntervalMillisecond({{gap_ms:UInt64}})
  AND window_start < {{end:DateTime64(3, 'UTC')}} + toIntervalMillisecond({{gap_ms:UInt64}})
"""


def misses_late_events(client: Client, q: StatsQuery) -> bool:
    """Whether page views the rollups never counted (late: contract.LATE_EVENTS_RULE) touch
    the range, so that the archive answers it instead."""
    rows = client.query(_MISSES_LATE, parameters={**q.parameters(), "query": ACTIVITY_QUERY}).result_rows
    return bool(rows[0][0])


def late_pageviews(client: Client, q: StatsQuery) -> int:
    """Page views in the range that the rollups miss: older than the allowed lateness when they
    came, and changing a number already final (contract.LATE_EVENTS_RULE)."""
    return int(
        client.query(
            f"SELECT sum(events) FROM {LATE_EVENTS} FINAL "
            "WHERE query_name = {query:String} AND site = {site:String} "
            "AND window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}",
            parameters={**q.parameters(), "query": ACTIVITY_QUERY},
        ).result_rows[0][0]
    )


# --- goals, custom events, properties ---------------------------------------------
# Read from the ClickHouse aggregates migrations 0022 and 0026 feed from the archive (not the
# rollups): events and revenue are sums, visitors uniqExact states that merge exactly across
# minutes, paths and names, so every number equals raw's over the same minute buckets. Goals and
# custom events read whole days from the day tables and the edge minutes from
# goal_events_minute (DaySplit); properties read goal_props_minute.

_GOAL_BUCKETS = (
    "site = {site:String} AND bucket >= {agg_start:DateTime('UTC')} AND bucket < {agg_end:DateTime('UTC')}"
)
_CUSTOM_EVENT = "name NOT IN ('pageview', 'engagement')"


def _minute_bounds(q: StatsQuery) -> dict[str, object]:
    """The minute buckets whose start is in [start, end)."""
    return {**q.parameters(), "agg_start": ceil_minute(q.start), "agg_end": ceil_minute(q.end)}


# Per measure (0: the site's page views, i + 1: goal i) its visitors over the whole days: each
# day's states merged, the days' counts summed.
_DAY_VISITORS = """
SELECT measure, toUInt64(sum(visitors))
FROM (SELECT measure, day, uniqExactMerge(visitors) AS visitors FROM ({measures}) GROUP BY measure, day)
GROUP BY measure
"""


def goals(client: Client, q: StatsQuery, site_goals: list[Goal]) -> list[GoalRow]:
    """Per goal: events, revenue and revenue events are sums of the edge minutes' and the whole
    days'; visitors the edge minutes' merged (other days than the whole days') plus each whole
    day's. The site's visitors and an event goal's are read from goal_visitors_day (every path
    together), a page goal's from its matching paths' rows of goal_events_day."""
    parameters = {**q.parameters(), **day_split(q.start, q.end).parameters()}
    edge_columns, day_columns = ["uniqExactMergeIf(visitors, name = 'pageview')"], ["0"]
    day_visitors = [
        f"SELECT 0 AS measure, day, visitors FROM {GOAL_VISITORS_DAY} WHERE {IN_DAYS} AND name = 'pageview'"
    ]
    for index, goal in enumerate(site_goals):
        condition, goal_parameters = goal_condition(goal, index)
        parameters |= goal_parameters | {f"goal_{index}_currency": goal.currency}
        in_currency = f"{condition} AND currency = {{goal_{index}_currency:String}}"
        sums = [
            f"sumIf(events, {condition})",
            f"sumIf(revenue, {in_currency})",
            f"sumIf(events, {in_currency})",
        ]
        edge_columns += [sums[0], f"uniqExactMergeIf(visitors, {condition})", *sums[1:]]
        day_columns += [sums[0], "0", *sums[1:]]
        table = GOAL_EVENTS_DAY if goal.kind == "page" else GOAL_VISITORS_DAY
        day_visitors.append(
            f"SELECT {index + 1} AS measure, day, visitors FROM {table} WHERE {IN_DAYS} AND {condition}"
        )
    edges = client.query(
        f"SELECT {', '.join(edge_columns)} FROM {GOAL_EVENTS_MINUTE} WHERE {IN_EDGES}", parameters=parameters
    ).result_rows[0]
    days = client.query(
        f"SELECT {', '.join(day_columns)} FROM {GOAL_EVENTS_DAY} WHERE {IN_DAYS}", parameters=parameters
    ).result_rows[0]
    visitors = dict(
        client.query(
            _DAY_VISITORS.format(measures=" UNION ALL ".join(day_visitors)), parameters=parameters
        ).result_rows
    )
    row = [edge + day for edge, day in zip(edges, days, strict=True)]
    row[0] += visitors.get(0, 0)
    for index in range(len(site_goals)):
        row[2 + 4 * index] += visitors.get(index + 1, 0)
    return raw.goal_rows(site_goals, tuple(row))


# Per custom event name and day: events and the day's visitors, from the whole days of
# goal_visitors_day and the edge minutes of goal_events_minute; summed per name over days.
_CUSTOM_EVENTS = f"""
SELECT value, sum(day_events) AS events, sum(day_visitors) AS visitors
FROM
(
    SELECT name AS value, day, sum(events) AS day_events, uniqExactMerge(visitors) AS day_visitors
    FROM
    (
        SELECT name, day, events, visitors FROM {GOAL_VISITORS_DAY} WHERE {IN_DAYS} AND {_CUSTOM_EVENT}
        UNION ALL
        SELECT name, toDate(bucket) AS day, events, visitors
        FROM {GOAL_EVENTS_MINUTE} WHERE {IN_EDGES} AND {_CUSTOM_EVENT}
    )
    GROUP BY value, day
)
"""


def custom_events(client: Client, q: StatsQuery, limit: int) -> list[EventRow]:
    return raw.event_rows(
        client, _CUSTOM_EVENTS, {**q.parameters(), **day_split(q.start, q.end).parameters()}, limit
    )


def properties(client: Client, q: StatsQuery, key: str, goal: Goal | None, limit: int) -> list[EventRow]:
    """All custom events' values of `key`, or an event goal's (its events are one name); a page
    goal's page views have no row in goal_props_minute, as they have no custom properties."""
    if goal is not None and goal.kind == "page":
        return []
    condition, parameters = goal_condition(goal, 0) if goal else ("1", {})
    return raw.event_rows(
        client,
        f"SELECT prop_value AS value, sum(events) AS events, uniqExactMerge(visitors) AS visitors "
        f"FROM {GOAL_PROPS_MINUTE} WHERE {_GOAL_BUCKETS} AND prop_key = {{prop_key:String}} AND {condition}",
        {**_minute_bounds(q), **parameters, "prop_key": key},
        limit,
    )


def property_keys(client: Client, q: StatsQuery, limit: int, only: Sequence[str] = ()) -> list[str]:
    among = " AND prop_key IN {only:Array(String)}" if only else ""
    rows = client.query(
        f"SELECT prop_key FROM {GOAL_PROPS_MINUTE} WHERE {_GOAL_BUCKETS}{among} "
        "GROUP BY prop_key ORDER BY sum(events) DESC, prop_key LIMIT {limit:UInt32}",
        parameters={**_minute_bounds(q), "limit": limit} | ({"only": list(only)} if only else {}),
    ).result_rows
    return [row[0] for row in rows]
