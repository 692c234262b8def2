-- The archive is a gapless copy of each partition of `pageviews`, and checks it.
-- archive_deadletters: the offsets the archiver sent to `deadletter` (malformed messages). With
-- `events` they account for every offset read, so an audit tells a hole from a dead letter.
CREATE TABLE IF NOT EXISTS archive_deadletters
(
    kafka_partition UInt16,
    kafka_offset    UInt64,
    reason          String,
    recorded_at     DateTime DEFAULT now()
)
ENGINE = ReplacingMergeTree
ORDER BY (kafka_partition, kafka_offset);
-- An insert block identical to a recent one is dropped: an archiver batch retried after an
-- insert whose answer was lost (the store restarting mid-insert), and a hole repaired twice at
-- once (the archiver's audit and `tally verify`, same deduplication token), land once.
ALTER TABLE events MODIFY SETTING non_replicated_deduplication_window = 1000
