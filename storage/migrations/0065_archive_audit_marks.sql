-- The archive audit checks only what was written since it last found a partition whole.
-- archive_audit_marks: per partition, the offset below which the audit last found the archive
-- complete and nothing archived twice (archiver/audit.py). Shared by every archiver and
-- `tally verify`; the latest mark written is the one that holds (`tally verify --full` may
-- lower it, to the first offset it found wrong).
CREATE TABLE IF NOT EXISTS archive_audit_marks
(
    kafka_partition UInt16,
    clean_below     UInt64,
    marked_at       DateTime64(6, 'UTC') DEFAULT now64(6)
)
ENGINE = ReplacingMergeTree(marked_at)
ORDER BY kafka_partition;
-- `events` is ordered by site and day, not by offset: a min/max of kafka_offset per granule lets
-- the audit's `kafka_offset >= mark` skip every granule written before the mark (offsets grow
-- with time, so old days' granules hold only old offsets). Materialized in the background for
-- the rows already archived (a mutation: the migration does not wait for it).
ALTER TABLE events ADD INDEX IF NOT EXISTS events_kafka_offset kafka_offset TYPE minmax GRANULARITY 1;
ALTER TABLE events MATERIALIZE INDEX events_kafka_offset
