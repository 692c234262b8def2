-- Where a range's events came from on the log, without reading every one of them. Each answer's
-- `meta` names per partition the range's archived events and their first and last offsets
-- (storage/queries/provenance.py coverage); read from `events`, that was every row's partition
-- and offset: 605 ms at 10M events, more than the answer itself.
-- archive_offsets_day: per (site, UTC day, partition) the events archived, their lowest and
-- highest offset. Kept by a materialized view on `events`, with the archive's deduplication
-- window (a retried archive insert is dropped here too, as in archive_days, migration 0046).
-- It sees inserts only: an erasure deletes its rows with the archive's (storage/tables.py
-- ERASED_TABLES), and an archive that lost rows and had them written again (a broken part
-- repaired by the audit) counts those twice here; the reader compares the total with the
-- archive's own count of the range and reads the archive whenever they differ, so `meta` stays
-- exact (provenance.coverage).
CREATE TABLE IF NOT EXISTS archive_offsets_day
(
    site            LowCardinality(String),
    day             Date,
    kafka_partition UInt16,
    events          SimpleAggregateFunction(sum, UInt64),
    first_offset    SimpleAggregateFunction(min, UInt64),
    last_offset     SimpleAggregateFunction(max, UInt64)
)
ENGINE = AggregatingMergeTree
ORDER BY (site, day, kafka_partition)
SETTINGS non_replicated_deduplication_window = 1000;
CREATE MATERIALIZED VIEW IF NOT EXISTS archive_offsets_day_from_events TO archive_offsets_day AS
SELECT site, toDate(ts) AS day, kafka_partition, toUInt64(count()) AS events,
       min(kafka_offset) AS first_offset, max(kafka_offset) AS last_offset
FROM events
GROUP BY site, day, kafka_partition;
-- What the archive already holds (migrations run before the archiver starts: storage/schema.py).
INSERT INTO archive_offsets_day
SELECT site, toDate(ts) AS day, kafka_partition, toUInt64(count()) AS events,
       min(kafka_offset) AS first_offset, max(kafka_offset) AS last_offset
FROM events
GROUP BY site, day, kafka_partition
