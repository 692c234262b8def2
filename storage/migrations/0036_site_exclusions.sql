-- Traffic a site's owner does not want counted (`tally sites exclude`): client IP ranges (CIDR,
-- IPv4 or IPv6), page path patterns (storage/page_patterns.py) and countries (ISO 3166 alpha-2).
-- The collector holds them in memory and drops matching events before they reach the log, so
-- the archive never holds them. A removal is a new row with removed = 1: the latest row per
-- (site, kind, value) wins (argMax over changed_at), as for `sites`.
CREATE TABLE IF NOT EXISTS site_exclusions
(
    site       String,
    kind       LowCardinality(String),
    value      String,
    removed    UInt8 DEFAULT 0,
    changed_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(changed_at)
ORDER BY (site, kind, value);
