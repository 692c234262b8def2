-- Per-site channel rules, checked before GA4's default grouping (storage/channels.py,
-- storage/channel_rules.py). A rule: sessions whose source (utm_source, else the referrer domain)
-- is `source` as a name or domain (subdomains and TLD suffixes match), and whose medium is
-- `medium` when it is not '', belong to `channel`. A site's rules are checked in `position`
-- order. A change is a new row; the newest row per (site, source, medium) wins (removed = 1 is
-- a removal).
CREATE TABLE IF NOT EXISTS site_channel_rules
(
    site       LowCardinality(String),
    source     String,
    medium     String,
    channel    String,
    position   UInt32,
    removed    UInt8,
    changed_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(changed_at)
ORDER BY (site, source, medium)
