-- Closed sessions, derived by stream_jobs/sessions.py with Spark's session_window: a
-- visitor's page views whose gaps are all <= TALLY_SESSION_GAP_S. Spark emits a session
-- once, when the watermark has passed its last page view + the gap: it can no longer grow
-- or merge with another, so a row here is final. Sessions still open are stitched at read
-- time from pageviews_per_minute (storage/queries.py).
-- session_id is a hash of (site, visitor_id, session_start): the key. A batch re-run after a
-- crash writes the same rows with the same batch_id, which collapse: read with FINAL.
-- duration_s = last page view - first page view; is_bounce = exactly one page view. The
-- attribution (referrer, utm_*) and the client (country, device, browser, os) are those of
-- the first page view; ties on ts go to the smaller event_id.
CREATE TABLE IF NOT EXISTS sessions
(
    site            LowCardinality(String),
    session_start   DateTime64(3, 'UTC'),
    visitor_id      String,
    session_id      String,
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
    batch_id        UInt64,
    written_at      DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(batch_id)
PARTITION BY toYYYYMM(session_start)
ORDER BY (site, session_start, visitor_id);
