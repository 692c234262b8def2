-- The derived tables become aggregates. Their size grows with sites x dimension
-- values x time buckets, not with visitors. They are a cache of the log: the old per-visitor
-- tables are dropped, and the stream jobs' new query (`activity`, fresh checkpoint) rebuilds
-- the new ones from the log (`tally replay` does the same on demand).
DROP TABLE IF EXISTS pageviews_per_minute SYNC;
DROP TABLE IF EXISTS pageviews_by_dimension SYNC;
DROP TABLE IF EXISTS sessions SYNC;

-- Rollups, per (site, dimension, bucket, value), at three resolutions: minute, hour, day.
-- Written by stream_jobs/activity.py as signed deltas (a session that grows retracts its old
-- contribution and adds the new one), so the tables are SummingMergeTree and read with
-- sum() ... GROUP BY, never FINAL: unmerged parts add up to the same totals. A row whose
-- columns all sum to 0 disappears on merge (a retracted exit page, say).
--
-- dimension '' is the site's totals (value ''). Event dimensions (path, country, browser, os,
-- device) count page views: `pageviews` are the page views in the bucket with that value.
-- Session dimensions (entry_path, exit_path, referrer_domain, utm_source) count sessions by
-- their start: `pageviews` there are the page views of the sessions starting in the bucket.
-- The totals row carries both: page views by event time, sessions by start.
--
-- Visitors are exact (DESIGN.md: a visitor is a distinct (UTC day, visitor_id)). A visitor
-- is counted at its "points": its page views (event dimensions and totals) or its sessions'
-- starts (session dimensions).
--   visitors            distinct visitors with a point in this bucket (exact per bucket)
--   day_first_visitors  visitors whose first point of the UTC day is in this bucket: summed
--                       from midnight to t they give the visitors of [midnight, t)
--   day_last_visitors   visitors whose last point of the day is in this bucket: summed from
--                       t to midnight they give the visitors of [t, midnight)
--   hour_first_visitors (minute table) visitors whose first point of the hour is in this
--                       minute: summed over an hour they give that hour's visitors
-- sessions / bounces / duration_ms: sessions starting in the bucket, those with one page
-- view, and the sum of their durations (last page view - first, in ms).
-- Re-delivered batches: each insert carries a deduplication token (query, table, batch,
-- checkpoint), so a batch re-run after a crash is not added twice.
CREATE TABLE IF NOT EXISTS rollup_minute
(
    site                LowCardinality(String),
    dimension           LowCardinality(String),
    bucket              DateTime('UTC'),
    value               String,
    pageviews           Int64,
    visitors            Int64,
    hour_first_visitors Int64,
    day_first_visitors  Int64,
    day_last_visitors   Int64,
    sessions            Int64,
    bounces             Int64,
    duration_ms         Int64
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(bucket)
ORDER BY (site, dimension, bucket, value)
SETTINGS non_replicated_deduplication_window = 10000;

CREATE TABLE IF NOT EXISTS rollup_hour
(
    site                LowCardinality(String),
    dimension           LowCardinality(String),
    bucket              DateTime('UTC'),
    value               String,
    pageviews           Int64,
    visitors            Int64,
    day_first_visitors  Int64,
    day_last_visitors   Int64,
    sessions            Int64,
    bounces             Int64,
    duration_ms         Int64
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(bucket)
ORDER BY (site, dimension, bucket, value)
SETTINGS non_replicated_deduplication_window = 10000;

CREATE TABLE IF NOT EXISTS rollup_day
(
    site                LowCardinality(String),
    dimension           LowCardinality(String),
    bucket              Date,
    value               String,
    pageviews           Int64,
    visitors            Int64,
    sessions            Int64,
    bounces             Int64,
    duration_ms         Int64
)
ENGINE = SummingMergeTree
PARTITION BY toYear(bucket)
ORDER BY (site, dimension, bucket, value)
SETTINGS non_replicated_deduplication_window = 10000;

-- Every session, open or closed, as Spark's `activity` query sees it after each batch: a
-- row is written when a session starts, grows, merges with another (a late page view that
-- bridges two) or closes (the watermark passed its last page view + the gap; is_closed = 1,
-- final). A session whose start moved (merged, or a late page view before it) leaves a
-- tombstone at its old key (is_deleted = 1). Newest version per (site, session_start,
-- visitor_id) wins: ReplacingMergeTree(batch_id, is_deleted); readers take the newest
-- version per key (LIMIT 1 BY, or FINAL on small ranges).
CREATE TABLE IF NOT EXISTS sessions
(
    site            LowCardinality(String),
    session_start   DateTime64(3, 'UTC'),
    visitor_id      String,
    session_end     DateTime64(3, 'UTC'),
    duration_s      Float64,
    pageviews       UInt64,
    is_bounce       UInt8,
    entry_path      String,
    exit_path       String,
    referrer_domain LowCardinality(String),
    utm_source      LowCardinality(String),
    utm_medium      LowCardinality(String),
    utm_campaign    LowCardinality(String),
    country         LowCardinality(String),
    device          LowCardinality(String),
    browser         LowCardinality(String),
    os              LowCardinality(String),
    is_closed       UInt8,
    is_deleted      UInt8,
    batch_id        UInt64,
    written_at      DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(batch_id, is_deleted)
PARTITION BY toYYYYMM(session_start)
ORDER BY (site, session_start, visitor_id);

-- Rate-limit panes (page views per ip_hash and minute) are now deltas from the activity
-- query: a pane's count is the sum of its rows; batch_id stays in the key so that the
-- rate-limit step finds the panes its batch touched. No FINAL needed.
DROP TABLE IF EXISTS rate_limit_counters SYNC;
CREATE TABLE IF NOT EXISTS rate_limit_counters
(
    ip_hash      String,
    window_start DateTime('UTC'),
    window_end   DateTime('UTC'),
    pageviews    UInt64,
    batch_id     UInt64,
    written_at   DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = SummingMergeTree(pageviews)
PARTITION BY toYYYYMMDD(window_start)
ORDER BY (ip_hash, window_start, window_end, batch_id)
TTL window_end + INTERVAL 7 DAY
SETTINGS non_replicated_deduplication_window = 10000;
