-- Page views per site per minute of event time, derived by stream_jobs/pageview_counts.py.
-- One row per (site, window_start, visitor_id): the visitor's page views in that minute.
-- Keeping the visitor makes visitors exact over any range: uniqExact(visitor_id) over the
-- rows of the range; page views are sum(pageviews). They equal the raw archive's counts
-- (name = 'pageview', grouped by toStartOfMinute(ts)) except for events that arrived after
-- the watermark (TALLY_WATERMARK_S) had closed their minute: Spark drops those.
--
-- The Spark query writes in update mode: a later micro-batch re-sends a row with the
-- visitor's new total. ReplacingMergeTree(batch_id) keeps the row of the highest batch per
-- key, and a batch re-delivered after a crash (same batch_id, same rows) collapses into one:
-- read with FINAL (or argMax(pageviews, batch_id) grouped by the key).
-- Rebuilding from a fresh checkpoint restarts batch_id at 0: truncate the table first.
CREATE TABLE IF NOT EXISTS pageviews_per_minute
(
    site         LowCardinality(String),
    window_start DateTime('UTC'),
    visitor_id   String,
    pageviews    UInt64,
    batch_id     UInt64,
    written_at   DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(batch_id)
PARTITION BY toYYYYMM(window_start)
ORDER BY (site, window_start, visitor_id);

-- Every micro-batch a streaming query wrote, appended after its rows (a plain log: a batch
-- re-delivered after a crash appears twice). Shows how far each query has got and when.
CREATE TABLE IF NOT EXISTS stream_batches
(
    query_name LowCardinality(String),
    batch_id   UInt64,
    rows       UInt64,
    written_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = MergeTree
ORDER BY (query_name, batch_id, written_at)
TTL toDateTime(written_at) + INTERVAL 30 DAY;
