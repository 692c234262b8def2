"""Page views and visitors per site per minute of event time → ClickHouse `pageviews_per_minute`.

Grain: one row per (site, window_start, visitor_id) holding that visitor's page views in
that minute. Spark cannot count distinct values exactly in a streaming aggregation (only
approx_count_distinct), and a per-minute distinct count could not be added up anyway: the
visitors of an hour are not the sum of the visitors of its minutes. Keeping the visitor in
the key makes both metrics exact and mergeable over any range at query time:
`sum(pageviews)` and `uniqExact(visitor_id)` (storage/queries.py). The cost is one row per
visitor-minute instead of one per site-minute, still far fewer than raw events.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from stream_jobs.clickhouse_sink import ClickHouseSink
from tally.settings import Settings

QUERY_NAME = "pageview_counts"
TABLE = "pageviews_per_minute"
WINDOW = "1 minute"
# Custom events (signups, clicks) travel on the same topic under other names; the metric
# `pageviews` counts only these, as the raw path does (name = 'pageview').
PAGEVIEW_EVENT_NAME = "pageview"
COLUMNS = ("site", "window_start", "visitor_id", "pageviews")


def pageview_counts(events: DataFrame, watermark_s: int) -> DataFrame:
    """Parsed PageViewEvents → page views per (site, 1-minute window, visitor).

    The watermark bounds the state: a window is final, and its state dropped, once the
    largest event time seen is `watermark_s` past its end. Events later than that are
    not counted here (the raw archive still has them).
    """
    return (
        events.where(F.col("name") == PAGEVIEW_EVENT_NAME)
        .withWatermark("ts", f"{watermark_s} seconds")
        .groupBy(F.col("site"), F.window("ts", WINDOW).alias("window"), F.col("visitor_id"))
        .agg(F.count(F.lit(1)).alias("pageviews"))
        .select("site", F.col("window.start").alias("window_start"), "visitor_id", "pageviews")
    )


def start_pageview_counts(events: DataFrame, settings: Settings, trigger_s: float) -> StreamingQuery:
    """Start the query writing `pageview_counts(events)` into ClickHouse every `trigger_s`."""
    return (
        pageview_counts(events, settings.watermark_s)
        .writeStream.queryName(QUERY_NAME)
        # Update: every micro-batch re-emits the rows whose count changed, so a minute shows
        # up within seconds and is corrected as its page views arrive. The sink replaces a
        # row by its newer version (see clickhouse_sink.py).
        .outputMode("update")
        .option("checkpointLocation", str(settings.checkpoints_dir / QUERY_NAME))
        .trigger(processingTime=f"{trigger_s} seconds")
        .foreachBatch(ClickHouseSink(settings, QUERY_NAME, TABLE, COLUMNS))
        .start()
    )
