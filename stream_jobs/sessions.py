"""Sessions: a visitor's page views whose gaps are all <= TALLY_SESSION_GAP_S → ClickHouse `sessions`.

Spark's session_window per (site, visitor_id): each page view opens a window [ts, ts + gap);
overlapping or touching windows merge, so a gap of exactly `gap` stays one session (DESIGN.md:
gaps <= 30 min), and a late page view that bridges two sessions merges them inside Spark's state.

Append mode, not update: Spark 4.0 refuses update mode for session windows
(STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION). That settles the hard part of sessions that
grow and merge: a session is written once, when the watermark has passed its last page view
+ the gap, i.e. when no event that Spark still accepts can extend or merge it. So a row in
`sessions` is final and is never superseded; its key (site, session_start, visitor_id) and
session_id (a hash of the same) never change. Sessions still open are not in this table:
the query layer stitches them from the per-visitor minutes of pageview_counts, by the same
gap rule (storage/queries.py), until this query closes them.

Arbitrary stateful processing (applyInPandasWithState) could emit open sessions from Spark,
but it runs Python on the executors (the app runs none) and fails with the pinned pyarrow 26
(its state-info column arrives as floats).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from storage import tables
from stream_jobs.clickhouse_sink import ClickHouseSink, TableOutput
from stream_jobs.context import StreamContext
from stream_jobs.late_events import LateEventsRecorder, LateRule
from stream_jobs.pageview_counts import EVENT_FIELDS as PAGEVIEW_FIELDS
from stream_jobs.pageview_counts import FIRST_PAGEVIEW_ATTRIBUTES, page_views, pageview_order

QUERY_NAME = "sessions"
TABLE = tables.SESSIONS
EVENT_FIELDS = PAGEVIEW_FIELDS
COLUMNS = (
    "site",
    "session_start",
    "visitor_id",
    "session_id",
    "session_end",
    "duration_s",
    "pageviews",
    "is_bounce",
    "entry_path",
    "exit_path",
    *FIRST_PAGEVIEW_ATTRIBUTES,
)


def session_id(site: Column, visitor_id: Column, start: Column) -> Column:
    """Deterministic: the same session gets the same id in every run and in a replay."""
    start_ms = F.unix_millis(start).cast("string")
    return F.substring(F.sha2(F.concat_ws("\x1f", site, visitor_id, start_ms), 256), 1, 32)


def sessions(events: DataFrame, gap_s: int, watermark_s: int) -> DataFrame:
    """Parsed PageViewEvents → one row per closed session."""
    first = F.struct("ts", "path", *FIRST_PAGEVIEW_ATTRIBUTES)
    grouped = (
        page_views(events)
        .withWatermark("ts", f"{watermark_s} seconds")
        .groupBy("site", "visitor_id", F.session_window("ts", f"{gap_s} seconds").alias("session"))
        .agg(
            F.count(F.lit(1)).alias("pageviews"),
            F.min_by(first, pageview_order()).alias("first"),
            F.max_by(F.struct("ts", "path"), pageview_order()).alias("last"),
        )
    )
    start, end = F.col("first.ts"), F.col("last.ts")
    return grouped.select(
        "site",
        start.alias("session_start"),
        "visitor_id",
        session_id(F.col("site"), F.col("visitor_id"), start).alias("session_id"),
        end.alias("session_end"),
        ((F.unix_micros(end) - F.unix_micros(start)) / 1_000_000).alias("duration_s"),
        "pageviews",
        (F.col("pageviews") == 1).cast("int").alias("is_bounce"),
        F.col("first.path").alias("entry_path"),
        F.col("last.path").alias("exit_path"),
        *[F.col(f"first.{name}").alias(name) for name in FIRST_PAGEVIEW_ATTRIBUTES],
    )


def late_pageviews(gap_s: int) -> LateRule:
    def rule(events: DataFrame, watermark: Column) -> DataFrame:
        # A page view's own session window is [ts, ts + gap); Spark drops it when that
        # ends at or before the watermark, before merging it into any session.
        window_end = F.col("ts") + F.expr(f"INTERVAL {gap_s} SECONDS")
        return page_views(events).where(window_end <= watermark)

    return rule


def start_sessions(events: DataFrame, context: StreamContext) -> StreamingQuery:
    settings = context.settings
    sink = ClickHouseSink(
        context,
        QUERY_NAME,
        outputs=[TableOutput(TABLE, COLUMNS)],
        steps=[LateEventsRecorder(late_pageviews(settings.session_gap_s))],
    )
    frame = sessions(events, settings.session_gap_s, settings.watermark_s)
    return context.start(frame.writeStream.outputMode("append").foreachBatch(sink), QUERY_NAME)
