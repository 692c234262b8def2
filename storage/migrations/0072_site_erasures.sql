-- Deleting a site may erase its events (storage/erasures.py).
-- site_erasures: every erasure, recorded before anything is deleted. The archiver, the audit's
-- repairs and the stream jobs read it to drop the events of `site` received at or before
-- `cutoff` that the log still holds, so the log never brings them back. `version` numbers the
-- erasures of the installation (1, 2, …); `meta` names a site's latest.
CREATE TABLE IF NOT EXISTS site_erasures
(
    version   UInt64,
    site      LowCardinality(String),
    cutoff    DateTime64(3, 'UTC'),
    erased_at DateTime64(3, 'UTC') DEFAULT now64(3),
    actor     String
)
ENGINE = ReplacingMergeTree
ORDER BY (site, version);
-- archive_erased: the offsets of the log whose event was erased, and by which erasure. No
-- personal data: with `events`, `archive_deadletters` and `archive_duplicates` they account for
-- every offset of the log (archiver/rows.py ACCOUNTED_OFFSETS), so the archive stays gapless
-- and an audit does not re-read the erased events from the log as holes.
CREATE TABLE IF NOT EXISTS archive_erased
(
    kafka_partition UInt16,
    kafka_offset    UInt64,
    erasure         UInt64,
    recorded_at     DateTime DEFAULT now()
)
ENGINE = ReplacingMergeTree
ORDER BY (kafka_partition, kafka_offset)
