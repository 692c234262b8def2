"""The one streaming query: every number Tally derives from the log, from one read of it.

Each trigger reads the new offsets of `pageviews` once, parses each value once, and hands the
page views, keyed by (site, visitor_id), to one stateful operator: VisitorActivity
(stream_jobs/jvm/, Spark's arbitrary stateful processing, state in RocksDB). It keeps each
visitor's page views until no number of theirs can change, and emits per trigger:
* rollup deltas per (site, minute, dimension, value): page views, exact visitors (distinct per
  minute, and where they were first/last seen in the hour and the day), sessions, bounces,
  duration. Summed here over visitors into `rollup_minute`, and by hour and day into
  `rollup_hour` and `rollup_day` (migration 0020 says what each column means);
* sessions, open ones included, whenever one starts, grows, merges or closes → `sessions`;
* page views per (ip_hash, minute) → `rate_limit_counters`, from which the rate limits and
  the blocklist follow (rate_limits.py, a step of this sink);
* late page views (and late engagement events) per (site, minute) → `late_events` (no second read):
  those older than the allowed lateness (TALLY_ALLOWED_LATENESS_S) that would change a number
  already final; every other page view is counted exactly, however late.
A re-sent event (same event_id, same visitor) counts once, as its first copy in the log: the
one the archive keeps (VisitorActivity says how, and what it cannot recognise).

Why a JVM function: PySpark's applyInPandasWithState measured 1,700 visitors/s here (a pandas
frame per visitor per trigger), far below the 20,000 events/s the stream must sustain; the
same logic in the JVM costs microseconds per visitor, and the application still runs no Python
on executors (a cluster needs only the jar). The SQL in storage/rollup_backfill.py builds the
same rows from the archive (tests/integration/test_stream_activity.py compares them).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from storage import tables
from storage.queries.contract import SCREEN_SIZE_WIDEST, SCREEN_SIZES
from stream_jobs import rate_limits
from stream_jobs.clickhouse_sink import ClickHouseSink, TableOutput
from stream_jobs.context import StreamContext

QUERY_NAME = "activity"
# Custom events (signups, clicks) travel on the same topic under other names; every number
# here counts page views only, as the raw path does (name = 'pageview'). Engagement events go
# to VisitorActivity too, flagged, for one thing only: the engaged time of their session, which
# decides its bounce (storage/queries/contract.py); they count as no page view anywhere.
PAGEVIEW_EVENT_NAME = "pageview"
ENGAGEMENT_EVENT_NAME = "engagement"
# Spark's own watermark delay: longer than any lateness Tally accepts or reports, so that Spark
# never drops a row itself (a page view this far behind the newest is older than any log).
SPARK_WATERMARK_DELAY_S = 3650 * 86400
# What VisitorActivity reads of each page view (besides site, visitor_id, event_id, ts and
# screen_size, the class of screen_width: screen_size()), in its EVENT_FIELDS' order.
PAGEVIEW_FIELDS = (
    "path",
    "referrer_domain",
    "utm_source",
    "utm_medium",
    "utm_campaign",
    "country",
    "device",
    "browser",
    "os",
    "ip_hash",
    "utm_content",
    "utm_term",
    "language",
)
EVENT_FIELDS = ("name", "ts", "screen_width", "engagement_ms", *PAGEVIEW_FIELDS)
# The Kafka offset orders copies of one event_id (a re-sent event): VisitorActivity counts the
# first, as the archive keeps it.
KAFKA_COLUMNS = ("offset",)
METRICS = (
    "pageviews",
    "visitors",
    "hour_first_visitors",
    "day_first_visitors",
    "day_last_visitors",
    "sessions",
    "bounces",
    "duration_ms",
)
ROLLUP_KEY = ("site", "dimension", "bucket", "value")
# A session's pages, attribution (of its first page view) and client, as VisitorActivity
# emits them (SESSION_ROW_FIELDS after the two paths) and `sessions` stores them.
SESSION_ATTRIBUTES = (
    "entry_path",
    "exit_path",
    "referrer_domain",
    "utm_source",
    "utm_medium",
    "utm_campaign",
    "country",
    "device",
    "browser",
    "os",
    "utm_content",
    "utm_term",
    "screen_size",
    "language",
)
# Then the distinct paths its page views viewed, in order of first view (VisitorActivity's
# `paths`, an array, after SESSION_ROW_FIELDS; migration 0063): what a page filter's visits read.
SESSION_PATHS = "paths"
# Then the paths of its page views in time order, consecutive repeats folded (VisitorActivity's
# `journey`, an array after `paths`; migration 0071): what the journeys report reads.
SESSION_JOURNEY = "journey"
SESSION_COLUMNS = (
    "site",
    "session_start",
    "visitor_id",
    "session_end",
    "duration_s",
    "pageviews",
    "is_bounce",
    "engaged_ms",
    *SESSION_ATTRIBUTES,
    SESSION_PATHS,
    SESSION_JOURNEY,
    "is_closed",
    "is_deleted",
)


def visitor_activity(
    events: DataFrame, gap_s: int, watermark_s: int, engaged_bounce_ms: int, allowed_lateness_s: int
) -> DataFrame:
    """Parsed PageViewEvents, with their Kafka offset (KAFKA_COLUMNS) → VisitorActivity's rows
    (kind: rollup, session, pane, late). Page views and engagement events go in (is_engagement
    tells them apart); a session with engaged_bounce_ms of engaged time is no bounce.

    Two horizons: the watermark (newest event time - watermark_s) closes sessions for
    the live views and bounds the rate-limit panes; the lateness horizon (watermark -
    allowed_lateness_s) bounds what is still counted exactly. A page view after the horizon
    counts in every derived table as raw counts it, whoever its visitor; the state keeps a
    visitor's page views until the horizon has passed their sessions and UTC days, so it holds
    the visitors of the last allowed_lateness_s + 1 day (3 to 4 days at the default 72 h).

    Spark drops rows behind its watermark before the stateful function sees them, silently;
    VisitorActivity decides lateness itself (a page view behind the watermark may still be
    counted, and a late one must be counted as late). So Spark's watermark lags by
    SPARK_WATERMARK_DELAY_S and the function adds the difference back: its watermark is the
    newest event time - TALLY_WATERMARK_S, as everywhere else (watermark_shift_ms()).
    """
    pageviews = (
        events.where(F.col("name").isin(PAGEVIEW_EVENT_NAME, ENGAGEMENT_EVENT_NAME))
        .withWatermark("ts", f"{SPARK_WATERMARK_DELAY_S} seconds")
        .select(
            "site",
            "visitor_id",
            "event_id",
            "ts",
            F.unix_millis("ts").alias("ts_ms"),
            (F.col("name") == ENGAGEMENT_EVENT_NAME).alias("is_engagement"),
            F.col("engagement_ms").cast("long").alias("engagement_ms"),
            *KAFKA_COLUMNS,
            *PAGEVIEW_FIELDS,
            # The width as the archive keeps it (UInt16: the collector now refuses more than
            # 65,535, but older events in the log may be wider, and ClickHouse wraps them),
            # so that agg classes each page view as raw does.
            screen_size(F.pmod(F.col("screen_width"), F.lit(65536))).alias("screen_size"),
        )
    )
    spark = events.sparkSession
    activity = spark._jvm.tally.stream.VisitorActivity.apply(
        pageviews._jdf,
        gap_s * 1000,
        watermark_shift_ms(watermark_s),
        engaged_bounce_ms,
        allowed_lateness_s * 1000,
    )
    return DataFrame(activity, spark)


def screen_size(width: Column) -> Column:
    """The screen-size class of a width, as storage.queries.contract.screen_size_sql classes it."""
    classed = F.when(width == 0, F.lit(""))
    for name, below in SCREEN_SIZES:
        classed = classed.when(width < below, F.lit(name))
    return classed.otherwise(F.lit(SCREEN_SIZE_WIDEST))


def watermark_shift_ms(watermark_s: int) -> int:
    """Spark's watermark + this = the activity query's watermark (newest event time - watermark_s)."""
    return (SPARK_WATERMARK_DELAY_S - watermark_s) * 1000


# What identifies an output row: rollup deltas add up per (site, minute, dimension, value),
# panes per (ip_hash, minute), late page views per (site, minute); a session row is unique in
# its batch (one call per visitor), so grouping by all of its columns (its paths too: Spark
# groups by an array's elements) passes it through.
_GROUPING = (
    "kind",
    "site",
    "bucket_ms",
    "dimension",
    "value",
    "ip_hash",
    "visitor_id",
    "session_start_ms",
    "session_end_ms",
    "session_pageviews",
    *SESSION_ATTRIBUTES,
    SESSION_PATHS,
    SESSION_JOURNEY,
    "session_engaged_ms",
    "is_bounce",
    "is_closed",
    "is_deleted",
)


def collect_batch(batch: DataFrame) -> pa.Table:
    """One trigger's activity rows, summed over visitors in Spark, collected once.

    One aggregation over every kind: the deltas of a key are summed (partially before the
    shuffle, so the driver receives a few rows per minute and value, not one per visitor),
    session rows pass through. One job: the stateful operator runs once per batch (a second
    action on `batch` would run it again).
    """
    pane_site = F.when(F.col("kind") == "pane", F.lit("")).otherwise(F.col("site")).alias("site")
    rows = batch.select(*[pane_site if name == "site" else F.col(name) for name in batch.columns])
    return rows.groupBy(*_GROUPING).agg(*[F.sum(metric).alias(metric) for metric in METRICS]).toArrow()


def _of_kind(rows: pa.Table, kind: str) -> pa.Table:
    return rows.filter(pc.equal(rows["kind"], kind))


def _bucket(rows: pa.Table, unit: str) -> pa.Array:
    minute = pc.cast(rows["bucket_ms"], pa.timestamp("ms", tz="UTC"))
    return pc.floor_temporal(minute, unit=unit)


def _nonzero(rows: pa.Table, metrics: tuple[str, ...]) -> pa.Table:
    """Rows where some delta is not 0 (a visitor's retraction and addition may cancel out)."""
    changed = pc.not_equal(rows[metrics[0]], 0)
    for metric in metrics[1:]:
        changed = pc.or_(changed, pc.not_equal(rows[metric], 0))
    return rows.filter(changed)


def minute_rollups(rows: pa.Table) -> pa.Table:
    deltas = _of_kind(rows, "rollup")
    deltas = deltas.set_column(
        deltas.schema.get_field_index("bucket_ms"), "bucket", _bucket(deltas, "minute")
    )
    return _nonzero(deltas.select([*ROLLUP_KEY, *METRICS]), METRICS)


def _coarser(rows: pa.Table, unit: str, visitors: str, metrics: tuple[str, ...]) -> pa.Table:
    """The minute deltas summed into hour or day buckets; `visitors` of a coarser bucket is the
    sum of the minute column that counts each visitor once per such bucket."""
    deltas = _of_kind(rows, "rollup")
    deltas = deltas.set_column(deltas.schema.get_field_index("bucket_ms"), "bucket", _bucket(deltas, unit))
    summed_columns = [m for m in metrics if m != "visitors"] + [visitors]
    summed = deltas.group_by(list(ROLLUP_KEY)).aggregate([(m, "sum") for m in summed_columns])
    summed = summed.rename_columns([*ROLLUP_KEY, *[m for m in metrics if m != "visitors"], "visitors"])
    return _nonzero(summed.select([*ROLLUP_KEY, *metrics]), metrics)


HOUR_METRICS = (
    "pageviews",
    "visitors",
    "day_first_visitors",
    "day_last_visitors",
    "sessions",
    "bounces",
    "duration_ms",
)
DAY_METRICS = ("pageviews", "visitors", "sessions", "bounces", "duration_ms")


def hour_rollups(rows: pa.Table) -> pa.Table:
    return _coarser(rows, "hour", "hour_first_visitors", HOUR_METRICS)


def day_rollups(rows: pa.Table) -> pa.Table:
    summed = _coarser(rows, "day", "day_first_visitors", DAY_METRICS)
    return summed.set_column(2, "bucket", pc.cast(summed["bucket"], pa.date32()))


def session_rows(rows: pa.Table) -> pa.Table:
    found = _of_kind(rows, "session")
    start = pc.cast(found["session_start_ms"], pa.timestamp("ms", tz="UTC"))
    end = pc.cast(found["session_end_ms"], pa.timestamp("ms", tz="UTC"))
    duration = pc.divide(
        pc.cast(pc.subtract(found["session_end_ms"], found["session_start_ms"]), pa.float64()), 1000.0
    )
    columns = {
        "site": found["site"],
        "session_start": start,
        "visitor_id": found["visitor_id"],
        "session_end": end,
        "duration_s": duration,
        "pageviews": pc.cast(found["session_pageviews"], pa.uint64()),
        "is_bounce": pc.cast(found["is_bounce"], pa.uint8()),
        "engaged_ms": pc.cast(found["session_engaged_ms"], pa.uint64()),
        **{name: found[name] for name in SESSION_ATTRIBUTES},
        SESSION_PATHS: found[SESSION_PATHS],
        SESSION_JOURNEY: found[SESSION_JOURNEY],
        "is_closed": pc.cast(found["is_closed"], pa.uint8()),
        "is_deleted": pc.cast(found["is_deleted"], pa.uint8()),
    }
    return pa.table(columns)


def late_rows(rows: pa.Table) -> pa.Table:
    late = _of_kind(rows, "late")
    return pa.table(
        {
            "query_name": pa.array([QUERY_NAME] * late.num_rows, pa.string()),
            "site": late["site"],
            "window_start": _bucket(late, "minute"),
            "events": pc.cast(late["pageviews"], pa.uint64()),
        }
    )


def pane_rows(rows: pa.Table) -> pa.Table:
    panes = _of_kind(rows, "pane")
    start = _bucket(panes, "minute")
    end = pc.cast(pc.add(panes["bucket_ms"], rate_limits.PANE_S * 1000), pa.timestamp("ms", tz="UTC"))
    return pa.table(
        {
            "ip_hash": panes["ip_hash"],
            "window_start": start,
            "window_end": end,
            "pageviews": panes["pageviews"],
        }
    )


OUTPUTS = (
    TableOutput(tables.ROLLUP_MINUTE, (*ROLLUP_KEY, *METRICS), minute_rollups, versioned=False),
    TableOutput(tables.ROLLUP_HOUR, (*ROLLUP_KEY, *HOUR_METRICS), hour_rollups, versioned=False),
    TableOutput(tables.ROLLUP_DAY, (*ROLLUP_KEY, *DAY_METRICS), day_rollups, versioned=False),
    TableOutput(tables.SESSIONS, SESSION_COLUMNS, session_rows),
    TableOutput(tables.LATE_EVENTS, ("query_name", "site", "window_start", "events"), late_rows),
    TableOutput(tables.RATE_LIMIT_COUNTERS, rate_limits.COLUMNS, pane_rows),
)


def start_activity(events: DataFrame, context: StreamContext) -> StreamingQuery:
    """Start the query writing every derived table from `events` each trigger."""
    settings = context.settings
    rate_limits.check_window(settings)
    sink = ClickHouseSink(
        context,
        QUERY_NAME,
        outputs=OUTPUTS,
        steps=[rate_limits.enforce_rate_limit],
        collect=collect_batch,
        watermark_shift_ms=watermark_shift_ms(settings.watermark_s),
    )
    frame = visitor_activity(
        events,
        settings.session_gap_s,
        settings.watermark_s,
        settings.engaged_bounce_ms,
        settings.allowed_lateness_s,
    )
    return context.start(frame.writeStream.outputMode("update").foreachBatch(sink), QUERY_NAME)
