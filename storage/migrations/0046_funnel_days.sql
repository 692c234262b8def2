-- Funnels within 300 ms: a funnel becomes derived data per UTC day
-- (docs/architecture.md, "Funnels"). Sessions count on the UTC day they start and a visitor is a
-- (UTC day, visitor_id), so a funnel's sessions and visitors per step add up over whole days.
--
-- archive_days: per (site, UTC day) how many archived events (engagement events aside: they are
-- never part of a funnel's session) and the sum of cityHash64(event_id) — a fingerprint of the
-- day's events that any insert into the day changes. Kept by a materialized view on `events`,
-- with the archive's deduplication window (a retried archive insert is dropped here too, under
-- the archiver's deduplicate_blocks_in_dependent_materialized_views). Sums of UInt64 wrap
-- modulo 2^64, in any merge order alike.
CREATE TABLE IF NOT EXISTS archive_days
(
    site     LowCardinality(String),
    day      Date,
    events   SimpleAggregateFunction(sum, UInt64),
    checksum SimpleAggregateFunction(sum, UInt64)
)
ENGINE = AggregatingMergeTree
ORDER BY (site, day)
SETTINGS non_replicated_deduplication_window = 1000;
CREATE MATERIALIZED VIEW IF NOT EXISTS archive_days_from_events TO archive_days AS
SELECT site, toDate(ts) AS day, toUInt64(count()) AS events, sum(cityHash64(event_id)) AS checksum
FROM events
WHERE name != 'engagement'
GROUP BY site, day;
-- What the archive already holds (migrations run before the archiver starts: storage/schema.py).
INSERT INTO archive_days
SELECT site, toDate(ts) AS day, toUInt64(count()) AS events, sum(cityHash64(event_id)) AS checksum
FROM events
WHERE name != 'engagement'
GROUP BY site, day;
-- funnel_days: a funnel's result for the sessions starting on one UTC day: per step (1-based
-- position in the arrays) the sessions and the visitors reaching it. `funnel` fingerprints the
-- definition (steps, filters, session gap: storage/queries/funnel_days.py); `archive` the
-- archive_days of day - 1, day and day + 1 it was computed from (a session starting on `day`
-- is split from the day before and may run past midnight). A row whose `archive` no longer
-- matches is recomputed on read, never served; the newest row per day wins.
CREATE TABLE IF NOT EXISTS funnel_days
(
    site        LowCardinality(String),
    funnel      UInt64,
    day         Date,
    archive     UInt64,
    sessions    Array(UInt64),
    visitors    Array(UInt64),
    computed_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(computed_at)
ORDER BY (site, funnel, day)
