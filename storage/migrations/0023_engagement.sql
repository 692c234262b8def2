-- Engagement (time on page, scroll depth) from the `engagement` events of Tally's
-- tracker and Plausible's (docs/architecture.md, "Engagement").
--
-- The event's two measurements, 0 on every other event (tally/event.py): the deepest point of
-- the page seen so far, in percent, and the engaged time since the page view's previous
-- engagement event, in ms (at most a day: collector/payload.py).
ALTER TABLE events ADD COLUMN IF NOT EXISTS scroll_depth UInt8 DEFAULT 0;
ALTER TABLE events ADD COLUMN IF NOT EXISTS engagement_ms UInt32 DEFAULT 0;
-- engagement_minute: per (site, minute of the event, path), states that merge exactly over any
-- range of minutes:
-- - engagement_ms: the engaged time of the engagement events, summed;
-- - scroll_depths: per visitor, a (UTC day, visitor_id) as cityHash64(visitor_key, day), the
--   deepest scroll depth sent. Its keys are the visitors with engagement on the page, its
--   values their maxima: merged over minutes, each visitor keeps its deepest point of the
--   range, so "average over visitors of their maximum" is exact for any range (a depth of 0
--   keeps its key: measured, chDB 26.9).
-- The deduplication window: a retried archive insert that `events` drops as a duplicate block
-- still reaches its views (migration 0021); with the archiver's
-- deduplicate_blocks_in_dependent_materialized_views (archiver/rows.py) this table drops
-- the view's block of it too, so a retry never adds an event's engaged time twice.
CREATE TABLE IF NOT EXISTS engagement_minute
(
    site          LowCardinality(String),
    bucket        DateTime('UTC'),
    path          String,
    engagement_ms AggregateFunction(sum, UInt64),
    scroll_depths AggregateFunction(maxMap, Array(UInt64), Array(UInt8))
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(bucket)
ORDER BY (site, bucket, path)
SETTINGS non_replicated_deduplication_window = 1000;
-- Filled by the very INSERT that archives an engagement event: an event counts where the
-- archive's exactly-once insert lands it (a copy the archive drops as a re-sent event never
-- reaches `events`, hence never this view).
CREATE MATERIALIZED VIEW IF NOT EXISTS engagement_minute_from_events TO engagement_minute AS
SELECT
    site,
    toStartOfMinute(ts) AS bucket,
    path,
    sumState(toUInt64(engagement_ms)) AS engagement_ms,
    maxMapState([cityHash64(visitor_key, toDate(ts))], [scroll_depth]) AS scroll_depths
FROM events
WHERE name = 'engagement'
GROUP BY site, bucket, path;
-- The engagement events archived before the view existed. Migrations run before the archiver
-- starts writing (storage/schema.py), so no event is both here and in the view.
INSERT INTO engagement_minute
SELECT
    site,
    toStartOfMinute(ts) AS bucket,
    path,
    sumState(toUInt64(engagement_ms)),
    maxMapState([cityHash64(visitor_key, toDate(ts))], [scroll_depth])
FROM events
WHERE name = 'engagement'
GROUP BY site, bucket, path
