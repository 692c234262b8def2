"""The Spark application: every streaming query of Tally in one driver.

`python -m stream_jobs.app` (local, `tally up`), or on a cluster
`spark-submit --jars <.deps/spark/*.jar, comma-separated> stream_jobs/app.py` with
TALLY_SPARK_MASTER=spark://… (spark.jars set in the session only reaches a JVM this process
launches itself). The queries run no Python on executors (no UDFs; the sinks run on the
driver). On a cluster TALLY_HOME must be storage that survives the driver, since the
checkpoints live under it.

Crash-only: if a query fails, the application stops all queries and exits non-zero; the
supervisor restarts it, and each query resumes from its checkpoint (the sinks are
idempotent per batch, so a batch re-run on restart is not counted twice).
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from types import FrameType

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery, StreamingQueryListener
from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
)

from storage.migrations import apply_migrations
from stream_jobs.pageview_counts import start_pageview_counts
from stream_jobs.schema import parse_pageviews
from stream_jobs.session import build_spark_session
from tally import heartbeat
from tally.settings import Settings

log = logging.getLogger("stream_jobs")

# Caps one micro-batch when catching up on a backlog (first start, replay, after downtime):
# the sink collects a batch's aggregate rows on the driver, at most one per event.
MAX_EVENTS_PER_BATCH = 100_000
KAFKA_FETCH_MAX_WAIT_MS = 10
# The component name `tally status` checks (tally/local/components.py).
HEARTBEAT = "spark"
# Within supervisord's 30 s between SIGTERM and SIGKILL.
STOP_GRACE_S = 15.0


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


def start_queries(spark: SparkSession, settings: Settings) -> list[StreamingQuery]:
    """Start every streaming query, each on its own checkpoint under settings.checkpoints_dir."""
    pageviews = parse_pageviews(read_pageview_log(spark, settings))
    return [
        start_pageview_counts(pageviews, settings, settings.spark_trigger_s),
    ]


class ProgressListener(StreamingQueryListener):
    """Beats the `spark` heartbeat on every micro-batch and idle tick, and logs each batch
    that read events (size, duration, watermark).

    Spark posts an idle event every 10 s while there is no data, so a fresh beat means the
    queries are alive; a batch stuck (say on a ClickHouse insert) lets the beat go stale.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def onQueryStarted(self, event: QueryStartedEvent) -> None:
        log.info("query %s started (id %s, run %s)", event.name, event.id, event.runId)
        heartbeat.beat(self.settings, HEARTBEAT)

    def onQueryProgress(self, event: QueryProgressEvent) -> None:
        heartbeat.beat(self.settings, HEARTBEAT)
        progress = event.progress
        if progress.numInputRows == 0:
            return
        log.info(
            "query %s batch %d: %d events in %d ms, watermark %s",
            progress.name,
            progress.batchId,
            progress.numInputRows,
            progress.durationMs.get("triggerExecution", -1),
            progress.eventTime.get("watermark", "-"),
        )

    def onQueryIdle(self, event: QueryIdleEvent) -> None:
        heartbeat.beat(self.settings, HEARTBEAT)

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:
        if event.exception:
            log.error("query %s failed: %s", event.id, event.exception)


def run(spark: SparkSession, settings: Settings, stop: threading.Event) -> int:
    """Run the queries until `stop` is set (exit code 0) or one of them fails (1)."""
    queries = start_queries(spark, settings)
    try:
        # Poll rather than block in awaitAnyTermination: a signal handler must not make
        # Py4J calls while the main thread is inside one.
        while not stop.wait(1.0):
            failed = [query for query in queries if not query.isActive]
            if failed:
                for query in failed:
                    log.error("query %s stopped: %s", query.name, query.exception())
                return 1
        return 0
    finally:
        for query in queries:
            stop_gracefully(query)


def stop_gracefully(query: StreamingQuery, grace_s: float = STOP_GRACE_S) -> None:
    """Let a running micro-batch finish (up to `grace_s`), then stop the query.

    Stopping interrupts a batch in flight; that is safe (the batch is re-run from the
    checkpoint on the next start, and the sink is idempotent) but wasteful and noisy.
    A trigger may still begin between the check and the stop: same outcome.
    """
    deadline = time.monotonic() + grace_s
    while query.isActive and query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.1)
    query.stop()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Py4J logs every callback (each micro-batch, each listener event) at INFO.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    settings = Settings()
    stop = threading.Event()

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: stopping the queries", signum)
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    applied = apply_migrations(settings)
    if applied:
        log.info("applied migrations %s", ", ".join(applied))
    spark = build_spark_session(settings)
    spark.streams.addListener(ProgressListener(settings))
    try:
        code = run(spark, settings, stop)
    finally:
        spark.stop()
    sys.exit(code)


if __name__ == "__main__":
    main()
