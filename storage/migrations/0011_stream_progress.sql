-- Each streaming query's event-time watermark after each micro-batch, written by the sink
-- after the batch's rows. A window (or session) that ends at or before the watermark is
-- closed: Spark drops any later event for it as late, so its rows are final. The query
-- layer reads the newest row per query (FINAL) to know which windows are closed.
-- batch_id only grows within one checkpoint; replay rebuilds this table with the others.
CREATE TABLE IF NOT EXISTS stream_watermarks
(
    query_name LowCardinality(String),
    watermark  DateTime64(3, 'UTC'),
    batch_id   UInt64,
    written_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(batch_id)
ORDER BY query_name;

-- Events a query dropped because they came behind its watermark (their window or session
-- was already closed), counted per site and minute of event time. They are still in the
-- raw archive; this is where the derived tables say what they are missing.
-- One row per (query, site, minute, batch): a batch re-run after a crash writes the same row
-- again, which collapses; the late events of a minute are sum(events) over its batches.
-- Written by stream_jobs/late_events.py.
CREATE TABLE IF NOT EXISTS late_events
(
    query_name   LowCardinality(String),
    site         LowCardinality(String),
    window_start DateTime('UTC'),
    batch_id     UInt64,
    events       UInt64,
    written_at   DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree
ORDER BY (query_name, site, window_start, batch_id);
