-- Two archivers fenced. A thawed archiver's stale batch (its partitions were reassigned
-- while it was frozen) lands nothing.
-- archive_fences: per partition of a topic, who may write its offsets into the archive. An
-- archiver takes a partition's fence when the group assigns it the partition, before it reads
-- where the archive ends: a new epoch, one above the highest written, with its own owner name.
-- The fence that holds is the highest (epoch, owner); every insert of the archiver into
-- `events`, `archive_duplicates` and `archive_deadletters` keeps only the rows of partitions
-- whose fence is still its own, in the INSERT itself (archiver/fences.py), so a batch whose
-- partitions have moved on inserts nothing. A few rows per rebalance: never cleaned up.
CREATE TABLE IF NOT EXISTS archive_fences
(
    topic      LowCardinality(String),
    partition  UInt16,
    epoch      UInt64,
    owner      String,
    written_at DateTime64(6, 'UTC') DEFAULT now64(6)
)
ENGINE = ReplacingMergeTree(written_at)
ORDER BY (topic, partition, epoch, owner)
