-- What-if from the dashboard: a swap or discard of a definitions version asked for in
-- the dashboard's Definitions panel, carried out by the stream jobs between two micro-batches
-- (stream_jobs/definition_requests.py): they own the derived tables and their checkpoints, so
-- the dashboard never stops them or touches their files. A request is written once as
-- 'pending' and again as 'done' or 'refused' with the outcome; the newest row per id wins.
CREATE TABLE IF NOT EXISTS definition_requests
(
    id           UUID,
    version      UInt32,
    action       LowCardinality(String),
    requested_by String,
    requested_at DateTime64(3, 'UTC'),
    state        LowCardinality(String),
    outcome      String,
    updated_at   DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY id
