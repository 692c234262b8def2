"""A foreachBatch sink: each micro-batch of a streaming aggregate → one ClickHouse table.

Idempotent per (query name, batch_id). Spark's Kafka source and checkpoint make a batch
deterministic: after a crash between "batch written" and "batch committed", the restarted
query runs the same batch_id again over the same offsets from the same state, so it
produces the same rows. Every row carries `batch_id`, and the tables are
ReplacingMergeTree(batch_id) keyed by the aggregate's key (e.g. site, window_start,
visitor_id): a re-delivered batch only adds copies that collapse into one, and an update
from a later batch supersedes the earlier value of the same key. Readers use FINAL (or
argMax(…, batch_id)) so they never see the not-yet-merged copies.

Each written batch is also appended to `stream_batches`, a plain log: a re-delivered batch
appears there twice, which is how one sees it happened.

batch_id is only monotonic within one checkpoint: rebuilding a query from a fresh
checkpoint (replay) must empty its table first, or the old rows' higher versions win.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from clickhouse_connect.driver.client import Client
from pyspark.sql import DataFrame

from storage.client import connect
from tally.settings import Settings

log = logging.getLogger(__name__)

VERSION_COLUMN = "batch_id"
BATCH_LOG_TABLE = "stream_batches"


class ClickHouseSink:
    """`writeStream.foreachBatch(ClickHouseSink(settings, query_name, table, columns))`."""

    def __init__(
        self,
        settings: Settings,
        query_name: str,
        table: str,
        columns: Sequence[str],
        connect: Callable[[Settings], Client] = connect,
    ) -> None:
        self.settings = settings
        self.query_name = query_name
        self.table = table
        self.columns = tuple(columns)
        self._connect = connect
        self._client: Client | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        # Batches are small aggregates (bounded by maxOffsetsPerTrigger and the key space),
        # so the driver can hold one; Arrow avoids a row-by-row Python conversion.
        table = batch.select(*self.columns).toArrow()
        data: list[list[Any]] = [table.column(name).to_pylist() for name in self.columns]
        data.append([batch_id] * table.num_rows)
        client = self.client()
        if table.num_rows:
            client.insert(
                self.table,
                data,
                column_names=[*self.columns, VERSION_COLUMN],
                column_oriented=True,
            )
        # After the rows: an entry here means the batch's rows are in the table.
        client.insert(
            BATCH_LOG_TABLE,
            [[self.query_name, batch_id, table.num_rows]],
            column_names=["query_name", "batch_id", "rows"],
        )
        log.debug("%s: batch %d wrote %d rows to %s", self.query_name, batch_id, table.num_rows, self.table)

    def client(self) -> Client:
        # Made on first use, in the process that runs the batch (the driver), not pickled.
        if self._client is None:
            self._client = self._connect(self.settings)
        return self._client

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None}
