-- Sign-ins (ok / failed) and API key use (at most one row per key per minute and dashboard
-- process), shown to owners (`tally users audit`, the dashboard's Team panel). Append-only.
CREATE TABLE IF NOT EXISTS audit_log
(
    ts      DateTime64(3, 'UTC') DEFAULT now64(3),
    action  LowCardinality(String),
    email   String,
    key_id  String,
    outcome LowCardinality(String),
    address String,
    detail  String
)
ENGINE = MergeTree
ORDER BY ts;
