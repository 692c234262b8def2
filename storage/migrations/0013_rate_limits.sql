-- Page views per client (ip_hash) per minute of event time ("panes"), derived by
-- stream_jobs/rate_limits.py; the dashboard's rate-limiting panel reads it. A client's count
-- in the sliding window [s, s + TALLY_RATE_WINDOW_S) (s on a minute) is the sum of the panes
-- with window_start in it: exact, and one row per client-minute instead of one per window.
-- Versioning as for pageviews_per_minute: ReplacingMergeTree(batch_id), read with FINAL.
CREATE TABLE IF NOT EXISTS rate_limit_counters
(
    ip_hash      String,
    window_start DateTime('UTC'),
    window_end   DateTime('UTC'),
    pageviews    UInt64,
    batch_id     UInt64,
    written_at   DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(batch_id)
PARTITION BY toYYYYMMDD(window_start)
ORDER BY (ip_hash, window_start)
TTL window_end + INTERVAL 7 DAY;

-- The sliding windows in which a client went over the limit (pageviews > TALLY_RATE_LIMIT),
-- with their count: what the blocklist topic is derived from (a block's `until` is the end
-- of the client's last window over the limit). Small, so each micro-batch can read it.
CREATE TABLE IF NOT EXISTS rate_limit_blocks
(
    ip_hash      String,
    window_start DateTime('UTC'),
    window_end   DateTime('UTC'),
    pageviews    UInt64,
    batch_id     UInt64,
    written_at   DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(batch_id)
ORDER BY (ip_hash, window_start)
TTL window_end + INTERVAL 7 DAY;
