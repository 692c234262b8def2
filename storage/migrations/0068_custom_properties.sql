-- A site's custom properties (storage/custom_properties.py), set through Plausible's
-- Sites API (PUT|DELETE /api/v1/sites/custom-props). Empty: the dashboard's Properties report
-- offers every property the events carry; with names: only those. The stats APIs answer any
-- property either way. A removal is a new row (removed = 1): the newest row per (site, property)
-- wins, as for `goals`.
CREATE TABLE IF NOT EXISTS custom_properties
(
    site       LowCardinality(String),
    property   String,
    removed    UInt8,
    changed_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(changed_at)
ORDER BY (site, property)
