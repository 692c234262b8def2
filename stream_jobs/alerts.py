"""The alerts query: alert rules (storage/alert_rules.py) evaluated on every trigger, alerts
published to the Kafka topic `alerts` within seconds of the event that triggered them.

Its own query (not a branch of `activity`): its own checkpoint and offsets, no state, and a
trigger that runs even without traffic. Each trigger:
1. counts the batch's events per (site, minute, name, path) in Spark (one small aggregation,
   no state: memory bounded by the batch), and adds them to `alert_counts_minute` with a
   deduplication token, as the rollups (a re-run batch's insert is dropped);
2. evaluates the rules in force (re-read from ClickHouse every RULES_REFRESH_S) against those
   counts, with the rule semantics of storage/alert_conditions.py (the backtest's too): the
   "above" rules of the sites this batch touched (a count only rises with events), every
   `goal_absent` rule;
3. publishes the alerts not fired before to `alerts` (Spark's Kafka writer, acks=all), then
   records them in `alerts` (stage 0, status fired).

"A goal not seen for M minutes" must fire while nothing arrives, and Structured Streaming
runs no micro-batch without new input. So the query reads, besides `pageviews`, Spark's
`rate` source at a few rows per second, a heartbeat: every trigger has input, and the
heartbeat rows' timestamps are the clock the rules are evaluated at. That clock is part of
the checkpointed input (the rate source derives row timestamps from its offsets), so a batch
re-run after a crash evaluates at the same instant and fires the same alerts. Cheaper
alternatives were weighed: a processing-time timeout in a stateful operator needs a key per
rule and an event to create its state; a timer thread in the driver would evaluate outside
any batch, with no checkpointed clock to make it repeatable.

Alert ids are deterministic per (rule, window): uuid5 of the rule id and the window's start
(an "above" rule's aligned window — the current one, and the one before for WINDOW_GRACE_S
after it ended, whose last events arrive after its end; for `goal_absent`, the instant since which
the goal is absent). An alert fires once per id: ids already recorded in `alerts` are not
published again; one published but not recorded (a crash in between) is published again with
the same id, which the webhook's receiver deduplicates (at-least-once).

Not replayed by `tally replay`: alerts are about the present, and a replay would fire the
past again.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc
from clickhouse_connect.driver.client import Client
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from storage import tables
from storage.alert_conditions import Predicate, absent_long_enough, exceeded, rule_predicate
from storage.alert_conditions import window_start as aligned
from storage.alert_rules import ALERT_COLUMNS, FIRED, AlertRule, list_rules
from storage.client import connect
from stream_jobs.clickhouse_sink import insert_rows
from stream_jobs.context import StreamContext
from stream_jobs.rate_limits import messages_frame
from tally.clock import as_utc
from tally.settings import Settings

log = logging.getLogger(__name__)

QUERY_NAME = "alerts"
EVENT_FIELDS = ("name", "ts", "path")
COUNTS_TABLE = tables.ALERT_COUNTS_MINUTE
ALERTS_TABLE = tables.ALERTS
# How stale a rule added or removed may be: the rules are re-read this often.
RULES_REFRESH_S = 5.0
# Several a second, so that nearly every batch holds a beat (a batch begun right after a slow
# one may fall within the same second as the previous beat).
HEARTBEAT_ROWS_PER_S = 4
# A window that ended this recently is evaluated too: the events of its last seconds reach a
# trigger after it ended (the trigger's interval, a slow batch).
WINDOW_GRACE_S = 30
# The namespace of alert ids (uuid5 of rule id and window).
ALERT_ID_NAMESPACE = uuid.UUID("6b1f4c1e-5a0e-4c4e-9a57-7a11e7a1e127")


@dataclass(frozen=True)
class Alert:
    alert_id: str
    rule: AlertRule
    window_start: datetime
    observed: float
    threshold: float
    fired_at: datetime
    summary: str

    def message(self) -> str:
        """The value published on `alerts` (and, without the webhook URL, POSTed)."""
        return json.dumps(
            {
                "alert_id": self.alert_id,
                "rule_id": self.rule.rule_id,
                "site": self.rule.site,
                "kind": self.rule.kind,
                "window_start": self.window_start.isoformat(),
                "observed": self.observed,
                "threshold": self.threshold,
                "fired_at": self.fired_at.isoformat(),
                "summary": self.summary,
                "webhook_url": self.rule.webhook_url,
            }
        )


def alert_id(rule_id: str, window_start: datetime) -> str:
    return str(uuid.uuid5(ALERT_ID_NAMESPACE, f"{rule_id}@{window_start.isoformat()}"))


def with_heartbeat(events: DataFrame) -> DataFrame:
    """The events (site, name, path, ts) and one heartbeat row per second (site '', ts = now)."""
    beats = (
        events.sparkSession.readStream.format("rate")
        .option("rowsPerSecond", HEARTBEAT_ROWS_PER_S)
        .load()
        .select(
            F.lit("").alias("site"),
            F.lit("").alias("name"),
            F.lit("").alias("path"),
            F.col("timestamp").alias("ts"),
        )
    )
    return events.select("site", "name", "path", "ts").unionByName(beats)


def collect_counts(batch: DataFrame) -> pa.Table:
    """The batch's events per (site, minute, name, path), and the heartbeat's latest instant
    (site ''): one aggregation in Spark, a few rows per site and minute to the driver."""
    return (
        batch.groupBy("site", F.date_trunc("minute", "ts").alias("bucket"), "name", "path")
        .agg(F.count(F.lit(1)).alias("events"), F.max("ts").alias("last_seen"))
        .toArrow()
    )


class AlertsSink:
    """`writeStream.foreachBatch(AlertsSink(context))`: count, evaluate, publish, record."""

    def __init__(self, context: StreamContext) -> None:
        self.context = context
        self._client: Client | None = None
        self._checkpoint_id: str | None = None
        self._rules: list[tuple[AlertRule, Predicate]] = []
        self._rules_read_at = float("-inf")
        # Sites with events counted but not evaluated yet (their batch had no beat, no clock).
        self._pending_sites: set[str] = set()

    @property
    def settings(self) -> Settings:
        return self.context.settings

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        rows = collect_counts(batch)
        is_beat = pc.equal(rows["site"], "")
        counts = rows.filter(pc.invert(is_beat))
        client = self.client()
        token = f"{self.checkpoint_id()}:{COUNTS_TABLE}:{batch_id}"
        insert_rows(client, COUNTS_TABLE, counts, None, token)
        self._pending_sites |= set(counts["site"].to_pylist())
        beats = rows.filter(is_beat)
        if beats.num_rows == 0:
            return  # no clock in this batch: the next one (with a beat) evaluates
        clock = as_utc(pc.max(beats["last_seen"]).as_py())
        touched, self._pending_sites = self._pending_sites, set()
        alerts = [
            alert
            for rule, predicate in self.rules(client)
            if rule.kind == "goal_absent" or rule.site in touched
            for alert in evaluate(client, rule, predicate, clock)
        ]
        fresh = not_yet_fired(client, alerts)
        if fresh:
            publish(batch, self.settings, fresh)
            record_fired(client, fresh)
            log.info("alerts: batch %d fired %s", batch_id, ", ".join(a.alert_id for a in fresh))

    def rules(self, client: Client) -> list[tuple[AlertRule, Predicate]]:
        if time.monotonic() - self._rules_read_at >= RULES_REFRESH_S:
            self._rules = [
                (rule, predicate)
                for rule in list_rules(client)
                for predicate in [rule_predicate(client, rule)]
                if predicate is not None
            ]
            self._rules_read_at = time.monotonic()
        return self._rules

    def client(self) -> Client:
        if self._client is None:
            self._client = connect(self.settings)
        return self._client

    def checkpoint_id(self) -> str:
        if self._checkpoint_id is None:
            metadata = self.context.checkpoint(QUERY_NAME) / "metadata"
            self._checkpoint_id = json.loads(metadata.read_text())["id"]
        return self._checkpoint_id

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "_client": None}


_WINDOW_COUNTS = """
SELECT sumIf(events, bucket >= toDateTime({{start:UInt32}}, 'UTC')),
       sumIf(events, bucket < toDateTime({{start:UInt32}}, 'UTC'))
FROM {table}
WHERE site = {{site:String}}
  AND bucket >= toDateTime({{since:UInt32}}, 'UTC') AND bucket < toDateTime({{end:UInt32}}, 'UTC')
  AND {predicate}
"""

_LAST_SEEN = """
SELECT max(last_seen) FROM {table}
WHERE site = {{site:String}} AND bucket >= toDateTime({{since:UInt32}}, 'UTC') AND {predicate}
"""


def evaluate(client: Client, rule: AlertRule, predicate: Predicate, clock: datetime) -> list[Alert]:
    """The alerts the rule fires at `clock`, if its condition holds."""
    if rule.kind == "goal_absent":
        return [alert for alert in [evaluate_absence(client, rule, predicate, clock)] if alert]
    return [
        alert
        for start in window_starts(rule.window_minutes * 60, clock)
        for alert in [evaluate_window(client, rule, predicate, clock, start)]
        if alert is not None
    ]


def window_starts(width_s: int, clock: datetime) -> list[int]:
    """The aligned window holding `clock`, and the one before while it ended less than
    WINDOW_GRACE_S ago: events of its last seconds are counted in the next trigger."""
    now = int(clock.timestamp())
    current = aligned(now, width_s)
    previous = aligned(now - WINDOW_GRACE_S, width_s)
    return [current] if previous == current else [previous, current]


def evaluate_window(
    client: Client, rule: AlertRule, predicate: Predicate, clock: datetime, start: int
) -> Alert | None:
    """An "above" rule over the aligned window from `start` (and, for a factor, the windows before)."""
    width = rule.window_minutes * 60
    baseline = rule.baseline_windows if rule.factor else 0
    parameters = {
        **predicate.parameters,
        "site": rule.site,
        "start": start,
        "since": start - baseline * width,
        "end": start + width,
    }
    sql = _WINDOW_COUNTS.format(table=COUNTS_TABLE, predicate=predicate.sql)
    [(current, before)] = client.query(sql, parameters=parameters).result_rows
    bound = exceeded(rule, current, before)  # the semantics the backtest follows too
    if bound is None:
        return None
    summary = f"{rule.describe()}: {current} in the window from {_hhmm(start)}"
    if bound.mean is not None:
        summary += f", mean {bound.mean:g}"
    window_start = datetime.fromtimestamp(start, UTC)
    return Alert(
        alert_id(rule.rule_id, window_start), rule, window_start, current, bound.threshold, clock, summary
    )


def evaluate_absence(client: Client, rule: AlertRule, predicate: Predicate, clock: datetime) -> Alert | None:
    """A goal_absent rule: absent since the later of its last event and the rule's creation."""
    created = as_utc(rule.created_at)
    parameters = {**predicate.parameters, "site": rule.site, "since": int(created.timestamp()) // 60 * 60}
    sql = _LAST_SEEN.format(table=COUNTS_TABLE, predicate=predicate.sql)
    [(last_seen,)] = client.query(sql, parameters=parameters).result_rows
    since = max(created, as_utc(last_seen)) if last_seen else created
    absent_s = (clock - since).total_seconds()
    if not absent_long_enough(rule, absent_s):
        return None
    minutes = round(absent_s / 60, 1)
    summary = f"{rule.describe()}: none since {since.isoformat(timespec='seconds')}"
    return Alert(alert_id(rule.rule_id, since), rule, since, minutes, rule.window_minutes, clock, summary)


def not_yet_fired(client: Client, alerts: list[Alert]) -> list[Alert]:
    if not alerts:
        return []
    ids = [alert.alert_id for alert in alerts]
    fired = {
        row[0]
        for row in client.query(
            f"SELECT DISTINCT alert_id FROM {ALERTS_TABLE} WHERE alert_id IN {{ids:Array(String)}}",
            parameters={"ids": ids},
        ).result_rows
    }
    return [alert for alert in alerts if alert.alert_id not in fired]


def publish(batch: DataFrame, settings: Settings, alerts: list[Alert]) -> None:
    """To the `alerts` topic, keyed by rule, through Spark's Kafka writer (acks=all)."""
    (
        messages_frame(batch.sparkSession, [(alert.rule.rule_id, alert.message()) for alert in alerts])
        .write.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka_bootstrap)
        .option("kafka.acks", "all")
        .option("topic", settings.alerts_topic)
        .save()
    )


def record_fired(client: Client, alerts: list[Alert]) -> None:
    rows = [
        [
            a.alert_id,
            a.rule.rule_id,
            a.rule.site,
            a.rule.kind,
            a.window_start,
            float(a.observed),
            float(a.threshold),
            a.fired_at,
            a.summary,
            FIRED,
            0,
            "",
            0,
        ]
        for a in alerts
    ]
    client.insert(ALERTS_TABLE, rows, column_names=[*ALERT_COLUMNS, "stage"])


def _hhmm(epoch_s: int) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%H:%M")


def start_alerts(events: DataFrame, context: StreamContext) -> StreamingQuery:
    """Start the alerts query over the parsed page views (and custom events) of `pageviews`."""
    frame = with_heartbeat(events)
    return context.start(frame.writeStream.outputMode("append").foreachBatch(AlertsSink(context)), QUERY_NAME)
