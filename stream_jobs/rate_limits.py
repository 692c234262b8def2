"""Page views per client (ip_hash) over sliding windows → ClickHouse, and the blocklist topic.

The rule: a client with more than TALLY_RATE_LIMIT page views in a window of
TALLY_RATE_WINDOW_S that starts on any minute is blocked until the end of its last window over
the limit, and lifted once the watermark passes that end (then no event Spark still accepts
can raise a window that has ended, and no later window is over the limit, or `until` would be
later).

How, exactly and cheaply: the activity query (activity.py, the one read of the log) counts
each trigger's page views per (ip_hash, minute) — "panes" — and writes them as deltas to
`rate_limit_counters` (SummingMergeTree: a pane's count is the sum of its rows). A
sliding window starting on a minute is the union of its 60 panes, so its count is the sum of
their counts: after writing a batch's panes, this step sums, in ClickHouse, the windows that
contain a pane of this batch for the clients in it, and records those over the limit in
`rate_limit_blocks`. Measured first with Spark's own sliding `window(ts, 1 h, 1 min)`: each
page view lands in 60 windows, so 60 state rows per active client and up to 60 output rows per
client per batch; a 100k-event backlog ran the 768m driver out of heap (bench/stream.py).
Panes keep about one state row and one output row per client-minute, for the same numbers.

Topic `blocklist` (compacted, key ip_hash): `{"until": ISO-8601 UTC, "count": n}` when a
client goes over or its block is extended, a tombstone (null value) when it is lifted. Each
batch, after its panes and windows are written:
* clients with a window over the limit in this batch → their block, from all their windows
  over the limit in `rate_limit_blocks` (`until` = the last one's end, `count` = its count);
* clients whose block ends in (watermark of the previous batch, watermark of this batch] →
  a tombstone.
Both follow from the tables and the batch's watermarks alone, so a re-run batch publishes the
same messages again: on a compacted topic read as "latest value per key" that changes nothing.
A replay publishes the history again the same way; blocks whose `until` has passed mean
nothing to the collector, and the last message per client is the live one.

Page views at or behind the watermark are late: counted in `late_events`, in no pane
(the raw archive has them; the panel is about the present).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from storage import tables
from stream_jobs.clickhouse_sink import MicroBatch, insert_rows
from tally.clock import as_utc
from tally.settings import Settings

QUERY_NAME = "rate_limits"
TABLE = tables.RATE_LIMIT_COUNTERS
BLOCKS_TABLE = tables.RATE_LIMIT_BLOCKS
PANE_S = 60
COLUMNS = ("ip_hash", "window_start", "window_end", "pageviews")

BlocklistMessage = tuple[str, str | None]  # key (ip_hash), value (JSON, None = tombstone)


def check_window(settings: Settings) -> None:
    if settings.rate_window_s % PANE_S:
        raise ValueError(f"TALLY_RATE_WINDOW_S must be whole minutes, not {settings.rate_window_s}")


# The tables' names are ours (live or _replay), filled in with str.format; values travel as
# parameters. The sliding windows [start, start + window_s) that contain a pane written by
# this batch, summed over all their panes, for the clients of this batch; those over the limit.
_WINDOWS_OVER_LIMIT = """
SELECT panes.ip_hash AS ip_hash, window_start, window_start + {{window_s:UInt32}} AS window_end,
       sum(panes.pageviews) AS total
FROM {panes} AS panes
INNER JOIN
(
    SELECT ip_hash, min(window_start) AS first_pane, max(window_start) AS last_pane
    FROM {panes} WHERE batch_id = {{batch:UInt64}} GROUP BY ip_hash
) AS touched ON touched.ip_hash = panes.ip_hash
ARRAY JOIN arrayMap(k -> panes.window_start - k * {pane_s}, range({{panes_per_window:UInt32}}))
    AS window_start
WHERE panes.window_start > touched.first_pane - {{window_s:UInt32}}
  AND panes.window_start < touched.last_pane + {{window_s:UInt32}}
  AND window_start > touched.first_pane - {{window_s:UInt32}}
  AND window_start <= touched.last_pane
GROUP BY ip_hash, window_start
HAVING total > {{limit:UInt64}}
ORDER BY ip_hash, window_start
"""

_BLOCKS = """
SELECT ip_hash, max(window_end) AS until, argMax(pageviews, window_end) AS count
FROM {blocks} FINAL
WHERE ip_hash IN {{clients:Array(String)}}
GROUP BY ip_hash
ORDER BY ip_hash
"""

_LIFTED = """
SELECT ip_hash
FROM {blocks} FINAL
WHERE window_end > {{after:DateTime64(3, 'UTC')}}
GROUP BY ip_hash
HAVING max(window_end) <= {{upto:DateTime64(3, 'UTC')}}
ORDER BY ip_hash
"""


def windows_over_limit(batch: MicroBatch) -> list[str]:
    """Record this batch's windows over the limit; returns the clients they belong to."""
    settings = batch.settings
    sql = _WINDOWS_OVER_LIMIT.format(panes=batch.context.table(TABLE), pane_s=PANE_S)
    parameters = {
        "batch": batch.batch_id,
        "window_s": settings.rate_window_s,
        "panes_per_window": settings.rate_window_s // PANE_S,
        "limit": settings.rate_limit,
    }
    windows = batch.client.query_arrow(sql, parameters=parameters)
    if windows.num_rows == 0:
        return []
    windows = windows.rename_columns(["ip_hash", "window_start", "window_end", "pageviews"])
    insert_rows(batch.client, batch.context.table(BLOCKS_TABLE), windows, batch.batch_id)
    return sorted(set(windows.column("ip_hash").to_pylist()))


def block_value(until: datetime, count: int) -> str:
    instant = until.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return json.dumps({"until": instant, "count": int(count)})


def blocklist_messages(batch: MicroBatch, over: list[str]) -> list[BlocklistMessage]:
    """Blocks for the clients over the limit in this batch, then tombstones for blocks ended."""
    blocks_table = batch.context.table(BLOCKS_TABLE)
    messages: list[BlocklistMessage] = []
    if over:
        blocks = batch.client.query(_BLOCKS.format(blocks=blocks_table), parameters={"clients": over})
        messages += [(ip, block_value(as_utc(until), count)) for ip, until, count in blocks.result_rows]
    progress = batch.progress
    if progress.watermark_ms > progress.late_watermark_ms:
        window = {"after": _instant(progress.late_watermark_ms), "upto": _instant(progress.watermark_ms)}
        lifted = batch.client.query(_LIFTED.format(blocks=blocks_table), parameters=window).result_rows
        messages += [(ip_hash, None) for (ip_hash,) in lifted]
    return messages


def _instant(epoch_ms: int) -> datetime:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)


def enforce_rate_limit(batch: MicroBatch) -> None:
    """A sink step: windows over the limit, then the blocklist messages, in order, to the
    compacted topic — through Spark's own Kafka writer (the JVM's producer, acks=all), in one
    partition so that a block and a tombstone for one client in one batch keep their order."""
    messages = blocklist_messages(batch, windows_over_limit(batch))
    if not messages:
        return
    settings = batch.settings
    (
        messages_frame(batch.spark, messages)
        .write.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka_bootstrap)
        .option("kafka.acks", "all")
        .option("topic", settings.blocklist_topic)
        .save()
    )


def messages_frame(spark: SparkSession, messages: list[BlocklistMessage]) -> DataFrame:
    """The messages as a one-partition DataFrame (key, value), in order. Built from literals:
    createDataFrame from Python rows would start Python workers, and the app runs none."""
    keys = F.array(*[F.lit(key) for key, _ in messages])
    values = F.array(*[F.lit(value).cast("string") for _, value in messages])
    position = F.col("id").cast("int") + 1
    return spark.range(0, len(messages), 1, numPartitions=1).select(
        F.element_at(keys, position).alias("key"), F.element_at(values, position).alias("value")
    )
