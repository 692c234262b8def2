"""Page views and visitors per site per minute of event time, in total and per dimension value.

One stateful aggregation, two tables:
* `pageviews_per_minute`: one row per (site, window_start, visitor_id) — that visitor's page
  views in that minute, plus the first/last page view of the minute (enough to stitch the
  sessions that are still open, see storage/queries.py);
* `pageviews_by_dimension`: one row per (site, window_start, dimension, value, visitor_id).

Spark cannot count distinct values exactly in a streaming aggregation (only
approx_count_distinct), and a per-minute distinct count could not be added up anyway: the
visitors of an hour are not the sum of the visitors of its minutes. Keeping the visitor in
the key makes both metrics exact and mergeable over any range at query time:
`sum(pageviews)` and `uniqExact(visitor_id)`. The cost is one row per visitor-minute (and
per visitor-minute-value for the breakdowns) instead of one per site-minute.

Both tables come from one query so that they agree: the same micro-batches, the same
watermark, the same late events (recorded in `late_events` under this query's name).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from storage import tables
from stream_jobs.clickhouse_sink import ClickHouseSink, TableOutput
from stream_jobs.context import StreamContext
from stream_jobs.late_events import LateEventsRecorder

QUERY_NAME = "pageview_counts"
TABLE = tables.PAGEVIEWS_PER_MINUTE
BREAKDOWN_TABLE = tables.PAGEVIEWS_BY_DIMENSION
WINDOW_S = 60
# Custom events (signups, clicks) travel on the same topic under other names; the metric
# `pageviews` counts only these, as the raw path does (name = 'pageview').
PAGEVIEW_EVENT_NAME = "pageview"
# The breakdowns counted per page view (storage/queries.py EVENT_DIMENSIONS). Entry/exit page,
# referrer and utm_source are properties of a session (its first/last page view): `sessions`.
DIMENSIONS = ("path", "country", "browser", "os", "device")
# The dimension of the per-visitor-minute rows (no value): they go to `pageviews_per_minute`.
TOTAL = ""
# Of a session's first page view (DESIGN.md: attribution and client of the session).
FIRST_PAGEVIEW_ATTRIBUTES = (
    "referrer_domain",
    "utm_source",
    "utm_medium",
    "utm_campaign",
    "country",
    "device",
    "browser",
    "os",
)
COLUMNS = (
    "site",
    "window_start",
    "visitor_id",
    "pageviews",
    "first_ts",
    "last_ts",
    "entry_path",
    "exit_path",
    *FIRST_PAGEVIEW_ATTRIBUTES,
)
BREAKDOWN_COLUMNS = ("site", "window_start", "dimension", "value", "visitor_id", "pageviews")
# The PageViewEvent fields this query (and sessions) reads; the parser skips the others.
EVENT_FIELDS = ("name", "ts", "path", *DIMENSIONS, *FIRST_PAGEVIEW_ATTRIBUTES)


def page_views(events: DataFrame) -> DataFrame:
    return events.where(F.col("name") == PAGEVIEW_EVENT_NAME)


def pageview_order() -> Column:
    """Which of a visitor's page views comes first: event time, then event_id on a tie."""
    return F.struct("ts", "event_id")


def pageview_counts(events: DataFrame, watermark_s: int) -> DataFrame:
    """Parsed PageViewEvents → page views per (site, minute, dimension, value, visitor).

    The watermark bounds the state: a window is final, and its state dropped, once the
    largest event time seen is `watermark_s` past its end. Events later than that are
    not counted here; the sink records them in `late_events` (the raw archive has them).
    """
    facets = F.array(
        F.struct(F.lit(TOTAL).alias("dimension"), F.lit("").alias("value")),
        *[F.struct(F.lit(name).alias("dimension"), F.col(name).alias("value")) for name in DIMENSIONS],
    )
    rows = (
        page_views(events)
        .withWatermark("ts", f"{watermark_s} seconds")
        .select("*", F.explode(facets).alias("facet"))
    )
    # First/last page view only for the per-visitor rows: a null ordering leaves the
    # breakdown rows' aggregation buffers empty instead of carrying eight more columns each.
    order = F.when(F.col("facet.dimension") == TOTAL, pageview_order())
    first = F.struct("ts", "path", *FIRST_PAGEVIEW_ATTRIBUTES)
    return (
        rows.groupBy(
            "site",
            F.window("ts", f"{WINDOW_S} seconds").alias("window"),
            F.col("facet.dimension").alias("dimension"),
            F.col("facet.value").alias("value"),
            "visitor_id",
        )
        .agg(
            F.count(F.lit(1)).alias("pageviews"),
            F.min_by(first, order).alias("first"),
            F.max_by(F.struct("ts", "path"), order).alias("last"),
        )
        .select(
            "site",
            F.col("window.start").alias("window_start"),
            "dimension",
            "value",
            "visitor_id",
            "pageviews",
            F.col("first.ts").alias("first_ts"),
            F.col("last.ts").alias("last_ts"),
            F.col("first.path").alias("entry_path"),
            F.col("last.path").alias("exit_path"),
            *[F.col(f"first.{name}").alias(name) for name in FIRST_PAGEVIEW_ATTRIBUTES],
        )
    )


def late_pageviews(events: DataFrame, watermark: Column) -> DataFrame:
    """The page views this query drops: their minute ended at or before the watermark."""
    window_end = F.date_trunc("minute", "ts") + F.expr(f"INTERVAL {WINDOW_S} SECONDS")
    return page_views(events).where(window_end <= watermark)


def _totals(rows: pa.Table) -> pa.Table:
    return rows.filter(pc.equal(rows["dimension"], TOTAL))


def _breakdowns(rows: pa.Table) -> pa.Table:
    return rows.filter(pc.not_equal(rows["dimension"], TOTAL))


def start_pageview_counts(events: DataFrame, context: StreamContext) -> StreamingQuery:
    """Start the query writing `pageview_counts(events)` into ClickHouse each trigger."""
    sink = ClickHouseSink(
        context,
        QUERY_NAME,
        outputs=[
            TableOutput(TABLE, COLUMNS, _totals),
            TableOutput(BREAKDOWN_TABLE, BREAKDOWN_COLUMNS, _breakdowns),
        ],
        steps=[LateEventsRecorder(late_pageviews)],
    )
    # Update: every micro-batch re-emits the rows whose count changed, so a minute shows
    # up within seconds and is corrected as its page views arrive. The sink replaces a
    # row by its newer version (see clickhouse_sink.py).
    writer = pageview_counts(events, context.settings.watermark_s).writeStream.outputMode("update")
    return context.start(writer.foreachBatch(sink), QUERY_NAME)
