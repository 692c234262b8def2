-- Annotations: notes on a site's timeline (storage/annotations.py), written by admins from the
-- dashboard, the CLI and the API (a CI pipeline's deploy). `day` set (whole_day = 1): a note on
-- a date, drawn at that date's midnight in the site's zone as it is when read; else `at`, an
-- instant (UTC). `text` is data, never markup. A removal is a new row (removed = 1): the newest
-- row per (site, id) wins. The automatic annotations (definitions versions applied, imports,
-- alerts fired) are not stored here: they are read from those features' own tables.
CREATE TABLE IF NOT EXISTS annotations
(
    site       LowCardinality(String),
    id         String,
    whole_day  UInt8,
    day        Date,
    at         DateTime64(3, 'UTC'),
    text       String,
    author     String,
    kind       LowCardinality(String),
    removed    UInt8,
    changed_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(changed_at)
ORDER BY (site, id)
