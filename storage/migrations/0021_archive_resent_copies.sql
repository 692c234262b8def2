-- An event its sender re-sent (same site and event_id, after a lost 202, a 503, a
-- timeout) is archived once; see docs/architecture.md, "Retries count once".
--
-- archive_ids: every archived event's (site, event_id) and where it is on the log, kept 8 days
-- after it was archived (the 7-day window, TALLY_DEDUP_WINDOW_S, and a day for an archiver
-- behind the log). Ordered by event_id alone: a batch's 10,000 ids are one IN set over one
-- UUID column, and the site is compared on the rows found (not a ReplacingMergeTree: one
-- site's ids must never collapse another site's). Random ids hit a granule each, anywhere in
-- the table: uncompressed ids (they do not compress) in 4 KiB blocks make each hit read 4 KiB,
-- where the default 64 KiB-1 MiB LZ4 blocks made a lookup decompress the whole column (10,000
-- fresh ids against 10M: about 100 ms instead of 315; EmbeddedRocksDB 175; docs/architecture.md).
CREATE TABLE IF NOT EXISTS archive_ids
(
    event_id        UUID CODEC(NONE),
    site            LowCardinality(String),
    kafka_partition UInt16,
    kafka_offset    UInt64,
    received_at     DateTime64(3, 'UTC'),
    indexed_at      DateTime DEFAULT now()
)
ENGINE = MergeTree
ORDER BY event_id
TTL indexed_at + INTERVAL 8 DAY
SETTINGS index_granularity = 256, min_compress_block_size = 4096, max_compress_block_size = 4096;
-- Filled by the very INSERT that archives a row (the archiver's, the audit's repair): no crash
-- of a writer can leave an archived id out. A retried insert that `events` drops as a
-- duplicate block still reaches the view (measured: chDB 26.9), so an insert whose first try
-- failed half-way indexes its rows on the retry. Rows written straight into the archive by
-- tests and benchmarks (partition 65535) never came from the log and are left out.
CREATE MATERIALIZED VIEW IF NOT EXISTS archive_ids_from_events TO archive_ids AS
SELECT event_id, site, kafka_partition, kafka_offset, received_at FROM events
WHERE kafka_partition != 65535;
-- archive_duplicates: the offsets whose event was a copy of one already archived (the first
-- copy's position alongside). With `events` and `archive_deadletters` they account for every
-- offset of the log, so the archive stays a gapless copy of each partition.
CREATE TABLE IF NOT EXISTS archive_duplicates
(
    kafka_partition       UInt16,
    kafka_offset          UInt64,
    site                  LowCardinality(String),
    event_id              UUID,
    first_kafka_partition UInt16,
    first_kafka_offset    UInt64,
    recorded_at           DateTime DEFAULT now()
)
ENGINE = ReplacingMergeTree
ORDER BY (kafka_partition, kafka_offset);
-- The ids already archived within the window (after the view exists: an event archived
-- meanwhile is indexed twice, which is harmless).
INSERT INTO archive_ids (event_id, site, kafka_partition, kafka_offset, received_at)
SELECT event_id, site, kafka_partition, kafka_offset, received_at FROM events
WHERE kafka_partition != 65535 AND received_at >= now64(3) - INTERVAL 7 DAY
