"""The `pageviews` topic as Spark reads it: a stream, from the earliest retained offset."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from tally.settings import Settings

# Caps one micro-batch when catching up on a backlog (first start, replay, after downtime):
# the sinks collect a batch's aggregate rows on the driver, at most a few per event.
MAX_EVENTS_PER_BATCH = 100_000
KAFKA_FETCH_MAX_WAIT_MS = 10


def read_pageview_log(spark: SparkSession, settings: Settings) -> DataFrame:
    """The `pageviews` topic as a stream of Kafka rows, from the earliest retained offset.

    Each query keeps its own offsets in its checkpoint; `startingOffsets` only applies to a
    query starting without one. failOnDataLoss=false: offsets expired by retention (7 days)
    are skipped rather than stopping the query; the raw archive still has those events.
    """
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka_bootstrap)
        .option("subscribe", settings.pageviews_topic)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", "false")
        .option("maxOffsetsPerTrigger", MAX_EVENTS_PER_BATCH)
        # A task reads an offset range already on the broker, yet each task was seen
        # waiting out the broker's fetch.max.wait.ms (500 ms) once: a 200-event batch took
        # 1.1-1.5 s here, 0.5 s with 10 ms. A short wait costs nothing when the records
        # are there, and tasks never read past them.
        .option("kafka.fetch.max.wait.ms", KAFKA_FETCH_MAX_WAIT_MS)
        .load()
    )
