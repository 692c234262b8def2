-- Saved segments, named filter expressions per site (storage/segments.py). `filters`
-- is the segment's filter list in Plausible's v2 syntax (JSON), checked when it was added. A
-- change is a new row; the newest row per (site, id) wins (removed = 1 is a removal). `id` is a
-- number, as Plausible's segment ids are, for its `["is", "segment", [id]]` filter.
CREATE TABLE IF NOT EXISTS segments
(
    site       LowCardinality(String),
    id         UInt32,
    name       String,
    filters    String,
    removed    UInt8,
    changed_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(changed_at)
ORDER BY (site, id)
