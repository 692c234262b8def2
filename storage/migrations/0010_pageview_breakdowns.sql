-- Page views and visitors per site, minute of event time and value of one event dimension,
-- derived by stream_jobs/pageview_counts.py in the same query as pageviews_per_minute (so
-- both see the same events and drop the same late ones).
-- One row per (site, window_start, dimension, value, visitor_id): that visitor's page views
-- with that value in that minute. Visitors per value over any range are exact:
-- uniqExact(visitor_id); page views are sum(pageviews). Dimensions: the event-level ones of
-- storage/queries.py (path, country, browser, os, device); entry/exit page, referrer and
-- utm_source are session properties (`sessions`). An empty value is kept as '', as in `events`.
-- Versioning as for pageviews_per_minute: ReplacingMergeTree(batch_id), read with FINAL.
CREATE TABLE IF NOT EXISTS pageviews_by_dimension
(
    site         LowCardinality(String),
    window_start DateTime('UTC'),
    dimension    LowCardinality(String),
    value        String,
    visitor_id   String,
    pageviews    UInt64,
    batch_id     UInt64,
    written_at   DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(batch_id)
PARTITION BY toYYYYMM(window_start)
ORDER BY (site, dimension, window_start, value, visitor_id);

-- The visitor's minute as a piece of a session: its first and last page view, the paths
-- of those, and the attributes of the first. Gaps inside one minute are < 60 s, below any
-- session gap, so these rows are enough to stitch the sessions not yet closed by the
-- sessions query (storage/queries.py); closed sessions are in `sessions`.
-- Tie on ts between page views of one visitor: the smaller event_id (as a string) is first.
ALTER TABLE pageviews_per_minute
    ADD COLUMN IF NOT EXISTS first_ts DateTime64(3, 'UTC') AFTER pageviews,
    ADD COLUMN IF NOT EXISTS last_ts DateTime64(3, 'UTC') AFTER first_ts,
    ADD COLUMN IF NOT EXISTS entry_path String AFTER last_ts,
    ADD COLUMN IF NOT EXISTS exit_path String AFTER entry_path,
    ADD COLUMN IF NOT EXISTS referrer_domain LowCardinality(String) AFTER exit_path,
    ADD COLUMN IF NOT EXISTS utm_source LowCardinality(String) AFTER referrer_domain,
    ADD COLUMN IF NOT EXISTS utm_medium LowCardinality(String) AFTER utm_source,
    ADD COLUMN IF NOT EXISTS utm_campaign LowCardinality(String) AFTER utm_medium,
    ADD COLUMN IF NOT EXISTS country LowCardinality(String) AFTER utm_campaign,
    ADD COLUMN IF NOT EXISTS device LowCardinality(String) AFTER country,
    ADD COLUMN IF NOT EXISTS browser LowCardinality(String) AFTER device,
    ADD COLUMN IF NOT EXISTS os LowCardinality(String) AFTER browser;
