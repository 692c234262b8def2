-- The raw archive: one row per PageViewEvent, exactly as it was on the log.
-- kafka_partition/kafka_offset record where each row came from: the archiver resumes from
-- the highest archived offset per partition, so the archive itself is the progress record
-- (see docs/architecture.md, "Exactly once into the archive").
CREATE TABLE IF NOT EXISTS events
(
    event_id        UUID,
    schema_version  UInt8,
    site            LowCardinality(String),
    name            LowCardinality(String),
    ts              DateTime64(3, 'UTC'),
    received_at     DateTime64(3, 'UTC'),
    url             String,
    hostname        LowCardinality(String),
    path            String,
    referrer        String,
    referrer_domain LowCardinality(String),
    utm_source      LowCardinality(String),
    utm_medium      LowCardinality(String),
    utm_campaign    LowCardinality(String),
    utm_content     String,
    utm_term        String,
    visitor_id      String,
    ip_hash         String,
    country         LowCardinality(String),
    browser         LowCardinality(String),
    os              LowCardinality(String),
    device          LowCardinality(String),
    screen_width    UInt16,
    language        LowCardinality(String),
    props           Map(String, String),
    kafka_partition UInt16,
    kafka_offset    UInt64
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(ts)
ORDER BY (site, toDate(ts), visitor_id, ts)
SETTINGS index_granularity = 8192;
