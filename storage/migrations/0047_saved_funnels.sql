-- Saved funnels, named per site as Plausible configures them (storage/saved_funnels.py).
-- `steps` is the funnel's steps as JSON ([{"page": "/product/*"}, {"event": "Signup"}]), checked
-- when added. A change is a new row; the newest row per (site, name) wins (removed = 1 is a
-- removal). The dashboard's process computes each saved funnel's closed days into funnel_days in
-- the background (storage/queries/funnel_days.py), so its first request is fast too.
CREATE TABLE IF NOT EXISTS saved_funnels
(
    site       LowCardinality(String),
    name       String,
    steps      String,
    removed    UInt8,
    changed_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(changed_at)
ORDER BY (site, name)
