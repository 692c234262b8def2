-- The sites Tally accepts events for (`tally sites add|list|remove`). A removal is a row
-- with removed = 1: the latest row per domain wins, so the history of changes is kept.
CREATE TABLE IF NOT EXISTS sites
(
    domain     String,
    removed    UInt8 DEFAULT 0,
    changed_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(changed_at)
ORDER BY domain;
