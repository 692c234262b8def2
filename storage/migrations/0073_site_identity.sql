-- Retention: each site's visitor identity, chosen by its owner. The visitor id is
-- HMAC(salt, site ‖ ip ‖ user agent); `rotation` says how long the salt, and so the id, lives:
-- `daily` (the default, a visitor is recognisable within one UTC day), `weekly` (one ISO week,
-- Monday to Sunday UTC) or `monthly` (one calendar month UTC). A site without a row is daily.
-- Append-only: every choice is a row, the newest per site is in force, and the rows before it
-- say since when (the retention report names the identity each cohort rests on).
CREATE TABLE IF NOT EXISTS site_identity
(
    site       LowCardinality(String),
    rotation   LowCardinality(String),
    changed_at DateTime64(3, 'UTC') DEFAULT now64(3),
    actor      String DEFAULT ''
)
ENGINE = MergeTree
ORDER BY (site, changed_at);
-- The salts of each rotation: `day` is the first day of the salt's period (a day, the Monday of
-- an ISO week, the 1st of a month, UTC). Salts written before are the daily ones.
ALTER TABLE salts ADD COLUMN IF NOT EXISTS period LowCardinality(String) DEFAULT 'daily'
