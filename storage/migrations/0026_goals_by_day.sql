-- Goals at day resolution next to goal_events_minute (migration 0022), so a month of goals
-- merges a few thousand day states instead of every minute's (docs/architecture.md, "Goals").
-- A range is read as its whole UTC days from these tables and its edge minutes from
-- goal_events_minute (storage/queries/agg.py). Exact: a visitor is a (UTC day, visitor_id), so a
-- day's states hold the same visitors as the day's minutes' states merged.
--
-- goal_events_day: per (site, day, name, path, currency), as goal_events_minute per minute.
-- Ordered by (name, path) before the day, in granules of 64 rows: a page goal's matching paths
-- are neighbouring rows, so the states of the other paths are never read (index_granularity
-- 8192 read every path's state of a day: a month of /blog/* took 67 ms, 32 ms ordered so).
CREATE TABLE IF NOT EXISTS goal_events_day
(
    site     LowCardinality(String),
    day      Date,
    name     LowCardinality(String),
    path     String,
    currency LowCardinality(String),
    events   SimpleAggregateFunction(sum, UInt64),
    visitors AggregateFunction(uniqExact, UInt64),
    revenue  SimpleAggregateFunction(sum, Decimal(38, 6))
)
ENGINE = AggregatingMergeTree
ORDER BY (site, name, path, day, currency)
SETTINGS index_granularity = 64, non_replicated_deduplication_window = 1000;
-- goal_visitors_day: per (site, day, event name), every path together: events and visitors,
-- for the site's page-view visitors (a conversion rate's base), an event goal's visitors and the
-- custom events breakdown, without merging a state per path (a month of the page-view states
-- per path: ~300 ms at 10M events; per day, every path together: ~35 ms).
CREATE TABLE IF NOT EXISTS goal_visitors_day
(
    site     LowCardinality(String),
    day      Date,
    name     LowCardinality(String),
    events   SimpleAggregateFunction(sum, UInt64),
    visitors AggregateFunction(uniqExact, UInt64)
)
ENGINE = AggregatingMergeTree
ORDER BY (site, name, day)
SETTINGS index_granularity = 64, non_replicated_deduplication_window = 1000;
-- Filled by the INSERT that archives a row, as goal_events_minute is, with the same
-- deduplication window: a retried archive insert (dropped by `events`, still pushed through
-- the views) is dropped here too, under the archiver's
-- deduplicate_blocks_in_dependent_materialized_views (archiver/rows.py).
CREATE MATERIALIZED VIEW IF NOT EXISTS goal_events_day_from_events TO goal_events_day AS
SELECT site, toDate(ts) AS day, name, path, revenue_currency AS currency,
       toUInt64(count()) AS events,
       uniqExactState(cityHash64(cityHash64(visitor_id), toDate(ts))) AS visitors,
       sum(toDecimal128OrZero(revenue_amount, 6)) AS revenue
FROM events
WHERE name != 'engagement'
GROUP BY site, day, name, path, currency;
CREATE MATERIALIZED VIEW IF NOT EXISTS goal_visitors_day_from_events TO goal_visitors_day AS
SELECT site, toDate(ts) AS day, name, toUInt64(count()) AS events,
       uniqExactState(cityHash64(cityHash64(visitor_id), toDate(ts))) AS visitors
FROM events
WHERE name != 'engagement'
GROUP BY site, day, name;
-- What the archive already holds (migrations run before the archiver starts: storage/schema.py).
INSERT INTO goal_events_day
SELECT site, toDate(ts) AS day, name, path, revenue_currency AS currency,
       toUInt64(count()) AS events,
       uniqExactState(cityHash64(cityHash64(visitor_id), toDate(ts))) AS visitors,
       sum(toDecimal128OrZero(revenue_amount, 6)) AS revenue
FROM events
WHERE name != 'engagement'
GROUP BY site, day, name, path, currency;
INSERT INTO goal_visitors_day
SELECT site, toDate(ts) AS day, name, toUInt64(count()) AS events,
       uniqExactState(cityHash64(cityHash64(visitor_id), toDate(ts))) AS visitors
FROM events
WHERE name != 'engagement'
GROUP BY site, day, name
