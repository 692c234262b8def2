-- Streaming alerts (docs/architecture.md, "Alerts").
--
-- alert_rules: per site, by rule_id. A change is a new row; the newest row per rule wins
-- (removed = 1 is a removal), as for `goals`. kind 'pageviews_above': page views in the
-- current window of window_minutes above threshold, or above factor × the mean of the
-- baseline_windows windows before it; 'goal_absent': goal `goal` not seen for window_minutes;
-- 'event_rate_above': custom events named event_name, or page views whose path matches
-- page_pattern, above threshold in a minute. webhook_url: where the delivery process POSTs.
CREATE TABLE IF NOT EXISTS alert_rules
(
    rule_id          String,
    site             LowCardinality(String),
    kind             LowCardinality(String),
    window_minutes   UInt32,
    threshold        UInt64,
    factor           Float64,
    baseline_windows UInt32,
    goal             String,
    event_name       String,
    page_pattern     String,
    webhook_url      String,
    created_at       DateTime64(3, 'UTC'),
    removed          UInt8,
    changed_at       DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(changed_at)
ORDER BY rule_id;
-- alert_counts_minute: the alerts query's own counts of the log, per (site, minute, event name,
-- path): events and the latest event time. Deltas per micro-batch, each insert carrying a
-- deduplication token (a re-run batch's insert is dropped), as the rollups. Kept 8 days: the
-- longest look-back of a rule (a baseline of windows) is far shorter.
CREATE TABLE IF NOT EXISTS alert_counts_minute
(
    site      LowCardinality(String),
    bucket    DateTime('UTC'),
    name      LowCardinality(String),
    path      String,
    events    SimpleAggregateFunction(sum, UInt64),
    last_seen SimpleAggregateFunction(max, DateTime64(3, 'UTC'))
)
ENGINE = AggregatingMergeTree
ORDER BY (site, bucket, name, path)
TTL bucket + INTERVAL 8 DAY
SETTINGS non_replicated_deduplication_window = 1000;
-- alerts: every alert fired, by alert_id (deterministic per rule and window: a re-run batch
-- fires the same id). stage 0: fired (by the alerts query, after publishing it to the `alerts`
-- topic); stage 1: its delivery's outcome (by the delivery process: delivered, failed or
-- refused, attempts, the last HTTP status or error). The highest stage per id wins, whichever
-- process wrote first.
CREATE TABLE IF NOT EXISTS alerts
(
    alert_id      String,
    rule_id       String,
    site          LowCardinality(String),
    kind          LowCardinality(String),
    window_start  DateTime64(3, 'UTC'),
    observed      Float64,
    threshold     Float64,
    fired_at      DateTime64(3, 'UTC'),
    summary       String,
    status        LowCardinality(String),
    attempts      UInt32,
    last_error    String,
    stage         UInt8,
    updated_at    DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(stage)
ORDER BY (site, alert_id)
