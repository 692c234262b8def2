"""Every streaming query of Tally, by name, and how to start them: what the application runs
(app.py) and what `tally replay` reruns (replay.py). One module each: activity.py, alerts.py."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from storage import erasures
from storage.client import connect
from stream_jobs import activity, alerts
from stream_jobs.context import StreamContext
from stream_jobs.schema import parse_pageviews
from stream_jobs.source import read_pageview_log
from tally.settings import Settings


@dataclass(frozen=True)
class Query:
    start: Callable[[DataFrame, StreamContext], StreamingQuery]
    event_fields: tuple[str, ...]  # what it reads of each PageViewEvent
    kafka_columns: tuple[str, ...] = ()  # what it reads of each Kafka record besides the value
    # Whether `tally replay` runs it: the alerts query is about the present (a replay would
    # fire past alerts again).
    replayed: bool = True


# Every streaming query of Tally, by name: one module each.
QUERIES: dict[str, Query] = {
    activity.QUERY_NAME: Query(activity.start_activity, activity.EVENT_FIELDS, activity.KAFKA_COLUMNS),
    alerts.QUERY_NAME: Query(alerts.start_alerts, alerts.EVENT_FIELDS, replayed=False),
}
REPLAYED_QUERIES = tuple(name for name, query in QUERIES.items() if query.replayed)


def start_queries(
    spark: SparkSession, context: StreamContext | Settings, names: Iterable[str] | None = None
) -> list[StreamingQuery]:
    """Start the queries (all, or those named), each on its own checkpoint and Kafka reader."""
    if isinstance(context, Settings):
        context = StreamContext.live(context)
    erased = erasures.erased_until(connect(context.settings))  # read once per start
    queries = []
    for name in names or QUERIES:
        query = QUERIES[name]
        pageviews = parse_pageviews(
            read_pageview_log(spark, context.settings),
            fields=query.event_fields,
            kafka_columns=query.kafka_columns,
        )
        if context.events_from is not None:  # the days before are the archive's
            pageviews = pageviews.where(F.col("ts") >= F.lit(context.events_from))
        queries.append(query.start(without_erased(pageviews, erased), context))
    return queries


def without_erased(pageviews: DataFrame, erased: dict[str, erasures.Erasure]) -> DataFrame:
    """The events but those an erasure covers (storage/erasures.py): the log still holds a
    site's events after they were erased, and neither the live queries nor a replay may count
    them again. Events received after the cutoff (the site registered again) are kept."""
    if not erased:
        return pageviews
    covered = F.lit(False)
    for site, erasure in erased.items():
        covered = covered | ((F.col("site") == F.lit(site)) & (F.col("received_at") <= F.lit(erasure.cutoff)))
    return pageviews.where(~covered)
