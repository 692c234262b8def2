"""`tally replay`: rebuild every derived table from the log, then swap the rebuilt tables in.

The derived tables are caches of computations over the `pageviews` topic; a replay computes
them again from the earliest retained offset (after a bug fix, a change of definition, or a
lost table) without stopping the dashboard:

1. The live queries stop: `tally replay` (ops/local/replay.py, operator code) stops the
   `spark` component of the local stack (and starts it again at the end). A live run's
   checkpoints and batch_id versions belong to the old tables, so the live queries must not
   run during the swap; stream jobs running outside `tally up` are refused (stop them first).
2. Every query runs from fresh checkpoints (`$TALLY_HOME/checkpoints-replay`) with
   Trigger.AvailableNow — the log up to its end as it is at the start, in micro-batches of at
   most 100k events, then stop — into fresh `<table>_replay` tables. The dashboard keeps
   reading the old tables meanwhile.
3. `EXCHANGE TABLES t AND t_replay` for each derived table (each exchange is atomic; the
   old tables, now `<table>_replay`, are dropped), then the replay's checkpoints replace the
   live ones. The live queries resume from them: from the offsets, state and batch_ids the
   replay reached, i.e. consistent with the tables they now write to.
If it fails before step 3 nothing live has changed; if it fails during step 3, run it again
before starting the stream jobs.

What it equals: for windows the log holds entirely and in order, the live tables exactly
(tests/integration/test_stream_replay.py). A watermark depends on how events were batched, so
an event the live run dropped as late may be counted by the replay, whose batches are larger.
The log keeps 7 days (topic retention). Where it has expired its beginning, the days before
the first one it holds whole are rebuilt from the archive instead, which keeps every event with
its log offset (`rebuild_with_history`, storage/expired_history.py: where the split falls and
what it changes); only with no archived copy of the expired events does a replay need --force.
The blocklist topic receives the history again (blocks whose `until` has passed mean nothing;
the last message per client is the live one). The alerts query is not replayed (it would fire
past alerts again) and keeps its checkpoint across the swap.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date

from aiokafka import AIOKafkaConsumer, TopicPartition
from pyspark.sql import SparkSession

from storage.client import connect
from storage.expired_history import ExpiredHistory
from storage.rollup_backfill import backfill_rollups
from storage.tables import DERIVED_TABLES
from stream_jobs import activity
from stream_jobs.context import StreamContext
from stream_jobs.queries import QUERIES, REPLAYED_QUERIES, start_queries
from tally.settings import Settings

log = logging.getLogger(__name__)


class ReplayError(RuntimeError):
    pass


@dataclass(frozen=True)
class ReplaySummary:
    batches: dict[str, int]  # query → micro-batches run
    events: int  # events read by the activity query


def prepare(settings: Settings, context: StreamContext) -> None:
    """Empty `<table>_replay` tables (same schema and engine) and no replay checkpoints."""
    client = connect(settings)
    for table in DERIVED_TABLES:
        client.command(f"DROP TABLE IF EXISTS {context.table(table)} SYNC")
        client.command(f"CREATE TABLE {context.table(table)} AS {table}")
    shutil.rmtree(context.checkpoints_dir, ignore_errors=True)


def rebuild(spark: SparkSession, settings: Settings, context: StreamContext | None = None) -> ReplaySummary:
    """Run every query over the whole retained log into `<table>_replay` (or the side tables
    of `context`, with its settings' definitions: a what-if); wait until done."""
    context = context or StreamContext.replay(settings)
    prepare(settings, context)
    queries = start_queries(spark, context, REPLAYED_QUERIES)
    try:
        for query in queries:
            query.awaitTermination()
            if query.exception():
                raise ReplayError(f"{query.name} failed: {query.exception()}")
        batches = {query.name: len(query.recentProgress) for query in queries}
        counts = [q for q in queries if q.name == context.query_name(activity.QUERY_NAME)]
        events = sum(p["numInputRows"] for q in counts for p in q.recentProgress)
        return ReplaySummary(batches, events)
    finally:
        for query in queries:
            query.stop()


def rebuild_with_history(
    spark: SparkSession,
    settings: Settings,
    history: ExpiredHistory | None,
    on_day: Callable[[str, date], None] | None = None,
    context: StreamContext | None = None,
) -> ReplaySummary:
    """`rebuild` into `<table>_replay` (or `context`'s side tables: a what-if); where the log has
    expired its beginning (`history`), the log only from the cut on and the days before it from
    the archive (storage/expired_history.py), `on_day(site, day)` after each."""
    events_from = history.cut_at if history is not None else None
    context = replace(context or StreamContext.replay(settings), events_from=events_from)
    summary = rebuild(spark, settings, context)
    if history is not None:
        client = connect(settings)
        for site, first in history.first_day.items():
            backfill_rollups(
                client, site, first, history.cut, table_suffix=context.table_suffix,
                session_gap_s=settings.session_gap_s, engaged_bounce_ms=settings.engaged_bounce_ms,
                on_day=(lambda day, site=site: on_day(site, day)) if on_day else None,
            )  # fmt: skip
    return summary


def swap(settings: Settings) -> None:
    """Exchange each `<table>_replay` with its live table, drop the old ones, and make the
    replay's checkpoints the live ones. The live queries must be stopped."""
    context = StreamContext.replay(settings)
    client = connect(settings)
    for table in DERIVED_TABLES:
        client.command(f"EXCHANGE TABLES {table} AND {context.table(table)}")
    for table in DERIVED_TABLES:
        client.command(f"DROP TABLE IF EXISTS {context.table(table)} SYNC")
    live = settings.checkpoints_dir
    # A query a replay does not run (alerts) keeps its own checkpoint: started afresh, it would
    # read the whole log again and count its events twice.
    for name in QUERIES:
        if name not in REPLAYED_QUERIES and (live / name).exists():
            (live / name).rename(context.checkpoints_dir / name)
    retired = live.with_name(live.name + "-retired")
    shutil.rmtree(retired, ignore_errors=True)
    if live.exists():
        live.rename(retired)
    context.checkpoints_dir.rename(live)
    shutil.rmtree(retired, ignore_errors=True)


def exchange(settings: Settings, side: StreamContext, retired: StreamContext) -> None:
    """A what-if's swap (and its rollback): exchange each live table with `side`'s tables and
    keep the old ones as `retired`'s, likewise the checkpoints, so that swapping back later
    resumes the old tables from the offsets they were left at. The live queries must be
    stopped. `retired`'s tables and checkpoints must not exist (they are the old live ones)."""
    client = connect(settings)
    for table in DERIVED_TABLES:
        client.command(f"EXCHANGE TABLES {table} AND {side.table(table)}")
        client.command(f"RENAME TABLE {side.table(table)} TO {retired.table(table)}")
    live = settings.checkpoints_dir
    side.checkpoints_dir.mkdir(parents=True, exist_ok=True)
    for name in QUERIES:  # the alerts query keeps its checkpoint (as in swap)
        if name not in REPLAYED_QUERIES and (live / name).exists():
            (live / name).rename(side.checkpoints_dir / name)
    if live.exists():
        live.rename(retired.checkpoints_dir)
    side.checkpoints_dir.rename(live)


def discard(settings: Settings, side: StreamContext) -> None:
    """Drop a what-if's side tables and checkpoints."""
    client = connect(settings)
    for table in DERIVED_TABLES:
        client.command(f"DROP TABLE IF EXISTS {side.table(table)} SYNC")
    shutil.rmtree(side.checkpoints_dir, ignore_errors=True)


def beginning_offsets(settings: Settings) -> dict[int, int]:
    """Per partition of `pageviews`, the first offset the log still holds."""
    return asyncio.run(_beginning_offsets(settings))


async def _beginning_offsets(settings: Settings) -> dict[int, int]:
    # Subscribed (no group, nothing consumed): start() then loads the topic's metadata, which
    # partitions_for_topic reads. consumer.topics() alone was seen to leave it empty, and the
    # expired log then looked whole.
    consumer = AIOKafkaConsumer(
        settings.pageviews_topic, bootstrap_servers=settings.kafka_bootstrap, enable_auto_commit=False
    )
    await consumer.start()
    try:
        partitions = consumer.partitions_for_topic(settings.pageviews_topic) or set()
        offsets = await consumer.beginning_offsets(
            [TopicPartition(settings.pageviews_topic, p) for p in partitions]
        )
        return {tp.partition: offset for tp, offset in offsets.items()}
    finally:
        await consumer.stop()
