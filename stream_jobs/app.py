"""The Spark application: every streaming query of Tally in one driver.

`activity` (activity.py): one Kafka read and one parse per trigger, one stateful operator per
visitor (stream_jobs/jvm/VisitorActivity.java), and one sink that writes every derived table —
the minute/hour/day rollups, sessions (open and closed), late events, the rate-limit panes —
then enforces the rate limits (rate_limits.py) and publishes the watermark
(clickhouse_sink.py). `tally replay` rebuilds it all (replay.py).
`alerts` (alerts.py): its own read of the log and a heartbeat, no state; evaluates the alert
rules every trigger and publishes alerts to the `alerts` topic. Not replayed.

`python -m stream_jobs.app` (local, `tally up`), or on a cluster
`spark-submit --jars <.deps/spark/*.jar and .deps/spark-app/*.jar, comma-separated>
stream_jobs/app.py` with TALLY_SPARK_MASTER=spark://… (spark.jars set in the session only
reaches a JVM this process launches itself). The query runs no Python on executors (no UDFs;
the stateful operator is JVM code; the sink runs on the driver; the blocklist goes through
Spark's Kafka writer). On a cluster TALLY_HOME must be
storage that survives the driver and that the driver can read as a local path: the
checkpoints live under it and the sinks read each batch's offsets and watermark there.

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
from collections.abc import Callable
from datetime import datetime, timedelta
from types import FrameType

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery, StreamingQueryListener
from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
)

from storage import definitions
from storage.client import connect
from storage.schema import apply_migrations
from stream_jobs import activity, alerts
from stream_jobs.definition_requests import DefinitionRequests
from stream_jobs.queries import start_queries
from stream_jobs.session import build_spark_session
from tally import heartbeat
from tally.settings import Settings

log = logging.getLogger("stream_jobs")

# The component name `tally status` checks (ops/local/components.py).
HEARTBEAT = "spark"
# Within supervisord's 30 s between SIGTERM and SIGKILL.
STOP_GRACE_S = 15.0


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
        # The alerts query reads a heartbeat every second; its sink logs the alerts it fires.
        if progress.numInputRows == 0 or progress.name == alerts.QUERY_NAME:
            return
        log.info(
            "query %s batch %d: %d events in %d ms, watermark %s",
            progress.name,
            progress.batchId,
            progress.numInputRows,
            progress.durationMs.get("triggerExecution", -1),
            self.watermark(progress.eventTime.get("watermark")),
        )

    def watermark(self, spark_watermark: str | None) -> str:
        """The activity query's watermark: Spark's lags by design (activity.py)."""
        if not spark_watermark:
            return "-"
        moment = datetime.fromisoformat(spark_watermark.replace("Z", "+00:00"))
        if moment.timestamp() <= 0:
            return "-"
        shift = timedelta(milliseconds=activity.watermark_shift_ms(self.settings.watermark_s))
        return (moment + shift).isoformat()

    def onQueryIdle(self, event: QueryIdleEvent) -> None:
        heartbeat.beat(self.settings, HEARTBEAT)

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:
        if event.exception:
            log.error("query %s failed: %s", event.id, event.exception)


def run(
    spark: SparkSession,
    settings: Settings,
    stop: threading.Event,
    between: Callable[[list[StreamingQuery]], list[StreamingQuery]] | None = None,
) -> int:
    """Run the queries until `stop` is set (exit code 0) or one of them fails (1). `between`,
    called every second with the running queries, may replace them (a definitions swap asked
    for in the dashboard: stream_jobs/definition_requests.py)."""
    queries = start_queries(spark, settings)
    try:
        # Poll rather than block in awaitAnyTermination: a signal handler must not make
        # Py4J calls while the main thread is inside one.
        while not stop.wait(1.0):
            if between is not None:
                queries = between(queries)
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
    """Let the micro-batch running now finish (up to `grace_s`), then stop the query.

    Stopping interrupts a batch in flight; that is safe (the batch is re-run from the
    checkpoint on the next start, and the sink is idempotent) but wasteful and noisy.
    A trigger may still begin between the check and the stop: same outcome.

    The wait ends when that batch has reported its progress, not at the first moment no
    trigger is active: a query whose batches run back to back (the alerts query's heartbeat
    gives every trigger input; a batch slower than the trigger interval starts the next at
    once) has almost no such moment, and waiting for one cost the whole grace every stop.
    """
    deadline = time.monotonic() + grace_s
    in_flight = _next_batch_id(query)
    while (
        query.isActive
        and query.status["isTriggerActive"]
        and _next_batch_id(query) <= in_flight
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)
    query.stop()


def _next_batch_id(query: StreamingQuery) -> int:
    """The id of the batch after the last one that completed: the one running, if any."""
    progress = query.lastProgress
    return 0 if progress is None else int(progress["batchId"]) + 1


def with_current_definitions(settings: Settings) -> Settings:
    """`settings` with the current definitions version's (storage/definitions.py): read once, at
    start; `tally whatif --swap` and `rollback` restart the stream jobs."""
    version = definitions.current(connect(settings), settings)
    for difference in definitions.environment_differences(settings, version.definitions):
        log.warning("ignoring %s: the stored definitions version applies", difference)
    log.info("definitions version %d: %s", version.number, version.definitions.replayed())
    return definitions.applied(settings, version.definitions)


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
    settings = with_current_definitions(settings)
    spark = build_spark_session(settings)
    spark.streams.addListener(ProgressListener(settings))

    requests = DefinitionRequests(settings, lambda now: start_queries(spark, now), stop_gracefully)
    try:
        code = run(spark, settings, stop, requests)
    finally:
        spark.stop()
    sys.exit(code)


if __name__ == "__main__":
    main()
