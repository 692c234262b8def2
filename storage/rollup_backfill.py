"""The rollups and sessions of a site built by ClickHouse from the archive: what the stream
jobs' `activity` query writes (migration 0020_rollups.sql), computed in SQL.

Used where the stream jobs are not the point: the dashboard benchmark's 10M-event archive,
and the tests of the agg backend. A test compares these rows with Spark's on a sample, so
the definitions here are the migration's and the raw query layer's, exactly:
- a page view is a point of its visitor at `ts`, for the totals (dimension '') and for
  each event dimension (EVENT_DIMENSIONS: path, country, browser, os, device, language,
  screen_size) with its value;
- sessions follow the gap rule of raw_sessions_sql (ties on ts ordered by event_id), read
  from the day before to the day after, so a session crossing midnight belongs to the day
  it starts in; a session is a point of its visitor at its start for each session
  dimension (SESSION_DIMENSIONS: entry_path, exit_path, referrer_domain, utm_*), carrying
  its page views; a bounce is raw_sessions_sql's (one page view, engaged time below
  engaged_bounce_ms, from the engagement events belonging to the session);
- the totals row counts page views (and visitors) by event time and sessions, bounces and
  duration_ms by session start; session-dimension rows carry their sessions' page views,
  sessions, bounces and duration_ms; event-dimension rows have no session numbers (0);
- per (dimension, value, bucket): visitors = distinct visitors with a point in the bucket;
  day_first_visitors / day_last_visitors = visitors whose first / last point of the UTC day
  (for that dimension and value) is in the bucket; hour_first_visitors (minutes) = visitors
  whose first point of the hour is in the minute.
Every session is written to `sessions` as closed (is_closed 1, batch_id 0).

One day at a time (bounded memory). The rows are added: a SummingMergeTree sums a second
backfill of the same day, so clear the site's rows first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from uuid import uuid4

from clickhouse_connect.driver.client import Client

from storage.queries import (
    ENGAGED_BOUNCE_MS,
    EVENT_DIMENSIONS,
    SESSION_DIMENSIONS,
    SESSION_GAP_S,
    StatsQuery,
    raw_sessions_sql,
)
from storage.tables import EVENTS, ROLLUP_DAY, ROLLUP_HOUR, ROLLUP_MINUTE, SESSIONS

_EVENT_PAIRS = ", ".join(
    ["('', '')", *(f"('{name}', toString({column}))" for name, column in EVENT_DIMENSIONS.items())]
)
_SESSION_PAIRS = ", ".join(["('', '')", *(f"('{name}', toString({name}))" for name in SESSION_DIMENSIONS)])

# Every point of the day: (dimension, value, t, visitor) and what it adds. The totals row
# takes sessions from session starts, but its visitors from page views only (is_point 0).
_POINTS = f"""
SELECT pair.1 AS dimension, pair.2 AS value, ts AS t, visitor_key AS visitor, toInt64(1) AS pageviews,
       toInt64(0) AS sessions, toInt64(0) AS bounces, toInt64(0) AS duration_ms, 1 AS is_point
FROM {EVENTS}
ARRAY JOIN [{_EVENT_PAIRS}] AS pair
WHERE site = {{{{site:String}}}} AND name = 'pageview'
  AND ts >= {{{{start:DateTime64(3, 'UTC')}}}} AND ts < {{{{end:DateTime64(3, 'UTC')}}}}
UNION ALL
SELECT pair.1 AS dimension, pair.2 AS value, start AS t, cityHash64(visitor_id) AS visitor,
       toInt64(if(pair.1 = '', 0, pageviews)) AS pageviews, toInt64(1) AS sessions,
       toInt64(is_bounce) AS bounces,
       toInt64(dateDiff('millisecond', start, end)) AS duration_ms, pair.1 != '' AS is_point
FROM ({{sessions}})
ARRAY JOIN [{_SESSION_PAIRS}] AS pair
"""

# One row per (dimension, bucket, value): the bucket's sums and distinct visitors, plus the
# visitors whose first (last) point of the day, or first of the hour, falls in the bucket.
_ROLLUP = """
INSERT INTO {table} (site, dimension, bucket, value, pageviews, visitors, {histograms}
                     sessions, bounces, duration_ms)
WITH points AS ({points})
SELECT {{site:String}}, dimension, bucket, value, sum(pageviews), sum(visitors), {summed_histograms}
       sum(sessions), sum(bounces), sum(duration_ms)
FROM
(
    SELECT dimension, value, {bucket}(t) AS bucket, sum(pageviews) AS pageviews,
           toInt64(uniqExactIf(visitor, is_point)) AS visitors, toInt64(0) AS hour_first,
           toInt64(0) AS day_first, toInt64(0) AS day_last, sum(sessions) AS sessions,
           sum(bounces) AS bounces, sum(duration_ms) AS duration_ms
    FROM points GROUP BY dimension, value, bucket
    {firsts}
)
GROUP BY dimension, bucket, value
"""
_FIRST = """
    UNION ALL
    SELECT dimension, value, {bucket}(moment) AS bucket, toInt64(0), toInt64(0), {columns},
           toInt64(0), toInt64(0), toInt64(0)
    FROM (SELECT dimension, value, {moment} AS moment FROM points WHERE is_point
          GROUP BY dimension, value, visitor{by})
    GROUP BY dimension, value, bucket
"""
_HOUR_FIRST, _DAY_FIRST, _DAY_LAST = (
    "toInt64(count()), toInt64(0), toInt64(0)",
    "toInt64(0), toInt64(count()), toInt64(0)",
    "toInt64(0), toInt64(0), toInt64(count())",
)
# table → (bucket function, histogram columns, their firsts: (columns, moment, extra key))
_TABLES = {
    ROLLUP_MINUTE: (
        "toStartOfMinute",
        ("hour_first_visitors", "day_first_visitors", "day_last_visitors"),
        (
            (_HOUR_FIRST, "min(t)", ", toStartOfHour(t)"),
            (_DAY_FIRST, "min(t)", ""),
            (_DAY_LAST, "max(t)", ""),
        ),
    ),
    ROLLUP_HOUR: (
        "toStartOfHour",
        ("day_first_visitors", "day_last_visitors"),
        ((_DAY_FIRST, "min(t)", ""), (_DAY_LAST, "max(t)", "")),
    ),
    ROLLUP_DAY: ("toDate", (), ()),
}
_SUMMED = {
    "hour_first_visitors": "sum(hour_first)",
    "day_first_visitors": "sum(day_first)",
    "day_last_visitors": "sum(day_last)",
}

# The `sessions` columns each session's properties fill (stream_jobs/activity.py
# SESSION_ATTRIBUTES, in the order Spark writes them).
SESSION_COLUMNS = (
    "entry_path", "exit_path", "referrer_domain", "utm_source", "utm_medium", "utm_campaign",
    "country", "device", "browser", "os", "utm_content", "utm_term", "screen_size", "language",
)  # fmt: skip
# Then the distinct paths its page views viewed, in order of first view (raw.SESSION_ARRAYS;
# stream_jobs/activity.py SESSION_PATHS, migration 0063), and the journey: its page views' paths
# in time order, consecutive repeats folded (raw.SESSION_SEQUENCES; SESSION_JOURNEY, migration 0071).
SESSION_ARRAY_COLUMNS = ("paths",)
SESSION_SEQUENCE_COLUMNS = ("journey",)
_WRITTEN = ", ".join((*SESSION_COLUMNS, *SESSION_ARRAY_COLUMNS, *SESSION_SEQUENCE_COLUMNS))
_SESSIONS = f"""
INSERT INTO {{table}} (site, session_start, visitor_id, session_end, duration_s, pageviews, is_bounce,
    engaged_ms, {_WRITTEN}, is_closed, is_deleted, batch_id)
SELECT {{{{site:String}}}}, start, visitor_id, end, duration_s, pageviews, is_bounce, engaged_ms,
    {_WRITTEN}, 1, 0, 0
FROM ({{sessions}})
"""


# A day's points, computed once and read by the three rollup inserts: as a CTE they were
# computed again at each of its eight references (sessionising the day each time).
_POINTS_TABLE = """
CREATE TABLE {name}
(
    dimension String, value String, t DateTime64(3, 'UTC'), visitor UInt64, pageviews Int64,
    sessions Int64, bounces Int64, duration_ms Int64, is_point UInt8
)
ENGINE = MergeTree ORDER BY (dimension, value, t)
"""


def points_sql(points_table: str, session_gap_q: StatsQuery) -> str:
    """The INSERT of the day [start, end) of `session_gap_q`'s points into `points_table`."""
    sessions = raw_sessions_sql(session_gap_q, tuple(SESSION_DIMENSIONS))
    return f"INSERT INTO {points_table} " + _POINTS.format(sessions=sessions)


def rollup_sql(table: str, points_table: str, suffix: str = "") -> str:
    """The INSERT … SELECT of one rollup table from a day's points (points_sql)."""
    bucket, histograms, firsts = _TABLES[table]
    points = f"SELECT * FROM {points_table}"
    return _ROLLUP.format(
        table=table + suffix,
        histograms="".join(f"{name}, " for name in histograms),
        summed_histograms="".join(f"{_SUMMED[name]}, " for name in histograms),
        points=points,
        bucket=bucket,
        firsts="".join(
            _FIRST.format(bucket=bucket, columns=columns, moment=moment, by=by)
            for columns, moment, by in firsts
        ),
    )


def backfill_rollups(
    client: Client,
    site: str,
    start_day: date,
    end_day: date,
    table_suffix: str = "",
    session_gap_s: int = SESSION_GAP_S,
    engaged_bounce_ms: int = ENGAGED_BOUNCE_MS,
    on_day: Callable[[date], None] | None = None,
) -> None:
    """Add the rollup rows and sessions of `site` for the UTC days [start_day, end_day) to
    rollup_minute/hour/day and sessions (each name + `table_suffix`, e.g. '_replay');
    `on_day(day)` once each day is written."""
    if not re.fullmatch(r"[A-Za-z0-9_]*", table_suffix):
        raise ValueError(f"table suffix must be letters, digits and underscores: {table_suffix!r}")
    points_table = f"backfill_points_{uuid4().hex[:12]}"
    client.command(_POINTS_TABLE.format(name=points_table))
    try:
        day = start_day
        while day < end_day:
            midnight = datetime.combine(day, time(), UTC)
            q = StatsQuery(
                site,
                midnight,
                midnight + timedelta(days=1),
                session_gap_s=session_gap_s,
                engaged_bounce_ms=engaged_bounce_ms,
            )
            client.command(f"TRUNCATE TABLE {points_table}")
            client.command(points_sql(points_table, q), parameters=q.parameters())
            for table in _TABLES:
                client.command(rollup_sql(table, points_table, table_suffix), parameters=q.parameters())
            sessions = raw_sessions_sql(
                q, (*SESSION_COLUMNS, *SESSION_ARRAY_COLUMNS, *SESSION_SEQUENCE_COLUMNS)
            )
            client.command(
                _SESSIONS.format(table=SESSIONS + table_suffix, sessions=sessions), parameters=q.parameters()
            )
            if on_day is not None:
                on_day(day)
            day += timedelta(days=1)
    finally:
        client.command(f"DROP TABLE IF EXISTS {points_table} SYNC")
