"""A foreachBatch sink: each micro-batch of a streaming query → ClickHouse tables.

Idempotent per (query name, batch_id). Spark's Kafka source and checkpoint make a batch
deterministic: after a crash between "batch written" and "batch committed", the restarted
query runs the same batch_id again over the same offsets from the same state, so it
produces the same rows. Two kinds of table take them:
* versioned (ReplacingMergeTree(batch_id), e.g. sessions): every row carries `batch_id`; a
  re-delivered batch only adds copies that collapse into one, and a later batch's row
  supersedes the earlier value of the same key;
* deltas (SummingMergeTree, the rollups): each insert carries a deduplication token (the
  checkpoint's query id, the table, the batch), and the table keeps the tokens of its last
  inserts (non_replicated_deduplication_window): a re-delivered batch's insert is dropped.
Every insert carries the token; the Arrow format needs no DESCRIBE TABLE round trip.

After the rows, a batch may run further steps (record its late events, publish blocks), each
idempotent in the same way; then the query's watermark is published (`stream_watermarks`:
windows ending at or before it are closed, their rows final) and the batch is appended to
`stream_batches`, a plain log: a re-delivered batch appears there twice, which is how one
sees it happened.

batch_id is only monotonic within one checkpoint: rebuilding a query from a fresh
checkpoint must write fresh tables (replay writes `<table>_replay`, then swaps them in).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from clickhouse_connect.driver.client import Client
from pyspark.sql import DataFrame, SparkSession

from storage import tables
from storage.client import connect
from stream_jobs.context import StreamContext
from stream_jobs.offset_log import BatchProgress, batch_progress, read_end_offsets
from tally.settings import Settings

log = logging.getLogger(__name__)

VERSION_COLUMN = "batch_id"
BATCH_LOG_TABLE = tables.STREAM_BATCHES
WATERMARK_TABLE = tables.STREAM_WATERMARKS
OFFSETS_TABLE = tables.STREAM_OFFSETS

RowFilter = Callable[[pa.Table], pa.Table]


@dataclass(frozen=True)
class TableOutput:
    """Rows of the batch that go to one table: `select` picks them, `columns` are written,
    with the batch_id column unless the table takes deltas (`versioned=False`)."""

    table: str
    columns: tuple[str, ...]
    select: RowFilter | None = None
    versioned: bool = True

    def rows(self, batch_rows: pa.Table) -> pa.Table:
        rows = self.select(batch_rows) if self.select else batch_rows
        return rows.select(list(self.columns))


@dataclass(frozen=True)
class MicroBatch:
    """One micro-batch as the sink's steps see it, after its rows were written."""

    query_name: str
    batch_id: int
    rows: pa.Table
    spark: SparkSession
    client: Client
    progress: BatchProgress
    context: StreamContext

    @property
    def settings(self) -> Settings:
        return self.context.settings


BatchStep = Callable[[MicroBatch], None]


class ClickHouseSink:
    """`writeStream.foreachBatch(ClickHouseSink(context, query_name, outputs, steps))`."""

    def __init__(
        self,
        context: StreamContext,
        query_name: str,
        outputs: Sequence[TableOutput],
        steps: Sequence[BatchStep] = (),
        connect: Callable[[Settings], Client] = connect,
        collect: Callable[[DataFrame], pa.Table] = DataFrame.toArrow,
        watermark_shift_ms: int = 0,
    ) -> None:
        self.context = context
        self.query_name = query_name
        self.outputs = tuple(outputs)
        self.steps = tuple(steps)
        self._connect = connect
        self._collect = collect
        self.watermark_shift_ms = watermark_shift_ms
        self._client: Client | None = None
        self._checkpoint_id: str | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        # Batches are aggregates bounded by maxOffsetsPerTrigger and the key space, so the
        # driver can hold one; Arrow keeps it columnar all the way into ClickHouse.
        started = time.monotonic()
        rows = self._collect(batch)
        collected = time.monotonic()
        client = self.client()
        written = 0
        for output in self.outputs:
            token = f"{self.checkpoint_id()}:{output.table}:{batch_id}"
            table = self.context.table(output.table)
            version = batch_id if output.versioned else None
            written += insert_rows(client, table, output.rows(rows), version, token)
        micro_batch = MicroBatch(
            query_name=self.query_name,
            batch_id=batch_id,
            rows=rows,
            spark=batch.sparkSession,
            client=client,
            progress=batch_progress(self.context.checkpoint(self.query_name), batch_id).shifted(
                self.watermark_shift_ms
            ),
            context=self.context,
        )
        inserted = time.monotonic()
        for step in self.steps:
            step(micro_batch)
        stepped = time.monotonic()
        publish_watermark(micro_batch)
        publish_offsets(micro_batch)
        # Last: an entry here means everything of the batch above is in the store.
        client.insert_arrow(
            BATCH_LOG_TABLE,
            pa.table(
                {
                    "query_name": [self.context.query_name(self.query_name)],
                    "batch_id": pa.array([batch_id], pa.uint64()),
                    "rows": pa.array([written], pa.uint64()),
                }
            ),
        )
        log.info(
            "%s: batch %d: %d rows, computed+collected %.2f s, inserted %.2f s, steps %.2f s",
            self.query_name,
            batch_id,
            written,
            collected - started,
            inserted - collected,
            stepped - inserted,
        )

    def client(self) -> Client:
        # Made on first use, in the process that runs the batch (the driver), not pickled.
        if self._client is None:
            self._client = self._connect(self.context.settings)
        return self._client

    def checkpoint_id(self) -> str:
        """The query's id, kept in its checkpoint: a fresh checkpoint (a replay) gets a new
        one, so its batch ids, which start again at 0, never collide with older tokens."""
        if self._checkpoint_id is None:
            metadata = self.context.checkpoint(self.query_name) / "metadata"
            self._checkpoint_id = json.loads(metadata.read_text())["id"]
        return self._checkpoint_id

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None}


def insert_rows(
    client: Client, table: str, rows: pa.Table, batch_id: int | None, token: str | None = None
) -> int:
    """Insert `rows` (with the version column `batch_id` unless None), deduplicated by
    `token` where the table keeps tokens; returns the number of rows."""
    if rows.num_rows == 0:
        return 0
    if batch_id is not None:
        rows = rows.append_column(VERSION_COLUMN, pa.array([batch_id] * rows.num_rows, pa.uint64()))
    settings = {"insert_deduplication_token": token} if token else None
    client.insert_arrow(table, rows, settings=settings)
    return rows.num_rows


def publish_watermark(batch: MicroBatch) -> None:
    """Record the watermark after this batch: windows ending at or before it are closed."""
    watermark = datetime.fromtimestamp(batch.progress.watermark_ms / 1000, tz=UTC)
    batch.client.insert_arrow(
        batch.context.table(WATERMARK_TABLE),
        pa.table(
            {
                "query_name": [batch.query_name],
                "watermark": pa.array([watermark], pa.timestamp("ms", tz="UTC")),
                VERSION_COLUMN: pa.array([batch.batch_id], pa.uint64()),
            }
        ),
    )


def publish_offsets(batch: MicroBatch) -> None:
    """Record how far this batch read each partition (end offsets, exclusive): a stats answer's
    provenance (storage/queries/provenance.py) says which part of the log agg covers."""
    ends = read_end_offsets(batch.context.checkpoint(batch.query_name), batch.batch_id)
    rows = [(topic, p, end) for topic, partitions in ends.items() for p, end in partitions.items()]
    if not rows:
        return
    batch.client.insert_arrow(
        batch.context.table(OFFSETS_TABLE),
        pa.table(
            {
                "query_name": [batch.query_name] * len(rows),
                "topic": [topic for topic, _, _ in rows],
                "partition": pa.array([partition for _, partition, _ in rows], pa.uint16()),
                "end_offset": pa.array([end for _, _, end in rows], pa.uint64()),
                VERSION_COLUMN: pa.array([batch.batch_id] * len(rows), pa.uint64()),
            }
        ),
    )
