"""Count the events a query dropped behind its watermark → ClickHouse `late_events`.

Spark drops an event as late inside the stateful operator and says only how many
(numRowsDroppedByWatermark, in the progress report, after the batch). To know which, the
sink re-reads the batch's own offset range from Kafka (from the query's offset log, so
exactly the events the batch read) and applies the query's own lateness rule against the
watermark Spark used for that batch (the previous batch's, see offset_log.py). This is the
same data, the same parser and the same rule as the query, so it finds exactly the events
the operator dropped; a re-run batch finds the same ones and writes the same rows.

A separate stateless query comparing event times to a published watermark could not do
that: its micro-batches are not the aggregate's, so around the watermark it would count
some events both as late and in a window, or as neither. The cost is one more read of the
batch's offsets, skipped until the query has a watermark.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from storage import tables
from stream_jobs.clickhouse_sink import MicroBatch, insert_rows
from stream_jobs.schema import parse_pageviews
from stream_jobs.source import read_offset_range

TABLE = tables.LATE_EVENTS

# (the batch's parsed events, the watermark they were checked against) → the dropped ones
LateRule = Callable[[DataFrame, Column], DataFrame]
# What a lateness rule may read (besides the required fields, which decide what is skipped).
LATE_RULE_FIELDS = ("name", "ts")


class LateEventsRecorder:
    """A sink step: count per site and minute of event time the batch's late events."""

    def __init__(self, late_events: LateRule) -> None:
        self.late_events = late_events

    def __call__(self, batch: MicroBatch) -> None:
        watermark_ms = batch.progress.late_watermark_ms
        if watermark_ms <= 0 or batch.progress.offsets.is_empty():
            return  # nothing can be behind a watermark that does not exist yet
        kafka_rows = read_offset_range(batch.spark, batch.settings, batch.progress.offsets)
        events = parse_pageviews(kafka_rows, fields=LATE_RULE_FIELDS)
        late = self.late_events(events, F.timestamp_millis(F.lit(watermark_ms)))
        counts = (
            late.groupBy("site", F.date_trunc("minute", "ts").alias("window_start"))
            .agg(F.count(F.lit(1)).alias("events"))
            .toArrow()
        )
        if counts.num_rows:
            names = pa.array([batch.query_name] * counts.num_rows, pa.string())
            insert_rows(
                batch.client,
                batch.context.table(TABLE),
                counts.append_column("query_name", names),
                batch.batch_id,
            )
