-- Goals, custom events, properties and revenue (docs/architecture.md, "Goals").
--
-- Revenue an event carries: a decimal string ('' for none; summed as Decimal(18, 6)) and its
-- ISO-4217 currency. Strings, so that the archiver's JSONEachRow rows need no conversion.
ALTER TABLE events ADD COLUMN IF NOT EXISTS revenue_amount String DEFAULT '' AFTER props;
ALTER TABLE events ADD COLUMN IF NOT EXISTS revenue_currency LowCardinality(String) DEFAULT '' AFTER revenue_amount;
-- goals: per site, by name. kind 'event': a custom event named event_name; kind 'page': page
-- views whose path matches page_pattern (storage/page_patterns.py). currency: a revenue goal.
-- A change is a new row; the newest row per (site, goal) wins (removed = 1 is a removal).
CREATE TABLE IF NOT EXISTS goals
(
    site         LowCardinality(String),
    goal         String,
    kind         LowCardinality(String),
    event_name   String,
    page_pattern String,
    currency     LowCardinality(String),
    removed      UInt8,
    changed_at   DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(changed_at)
ORDER BY (site, goal);
-- goal_events_minute: every event but engagement events, per (site, minute, name, path,
-- currency): events, visitors as uniqExact states (a visitor is a (UTC day, visitor_id), as in
-- storage/queries/contract.py), revenue. Fed by the archive itself: a row counts exactly once
-- where the archive's exactly-once insert lands it. The states merge exactly across minutes,
-- paths and names, so wildcard page goals are exact. A deduplication window, as on `events`:
-- an archive insert retried after its first try landed (`events` drops the copy) still reaches
-- the view; with deduplicate_blocks_in_dependent_materialized_views (archiver/rows.py)
-- the view's block is dropped here too. Its identity derives from the insert's (the archiver's
-- deduplication token, else the source block), not from its content, so two inserts that
-- aggregate to identical blocks (one visitor's one Signup in two batches) both count
-- (tests/integration/test_goals.py).
CREATE TABLE IF NOT EXISTS goal_events_minute
(
    site     LowCardinality(String),
    bucket   DateTime('UTC'),
    name     LowCardinality(String),
    path     String,
    currency LowCardinality(String),
    events   SimpleAggregateFunction(sum, UInt64),
    visitors AggregateFunction(uniqExact, UInt64),
    revenue  SimpleAggregateFunction(sum, Decimal(38, 6))
)
ENGINE = AggregatingMergeTree
ORDER BY (site, bucket, name, path, currency)
SETTINGS non_replicated_deduplication_window = 1000;
CREATE MATERIALIZED VIEW IF NOT EXISTS goal_events_from_events TO goal_events_minute AS
SELECT site, toStartOfMinute(ts) AS bucket, name, path, revenue_currency AS currency,
       toUInt64(count()) AS events,
       uniqExactState(cityHash64(cityHash64(visitor_id), toDate(ts))) AS visitors,
       sum(toDecimal128OrZero(revenue_amount, 6)) AS revenue
FROM events
WHERE name != 'engagement'
GROUP BY site, bucket, name, path, currency;
-- goal_props_minute: the custom events' properties, one row per (site, minute, event name,
-- property key, value): events and visitors.
CREATE TABLE IF NOT EXISTS goal_props_minute
(
    site       LowCardinality(String),
    bucket     DateTime('UTC'),
    name       LowCardinality(String),
    prop_key   String,
    prop_value String,
    events     SimpleAggregateFunction(sum, UInt64),
    visitors   AggregateFunction(uniqExact, UInt64)
)
ENGINE = AggregatingMergeTree
ORDER BY (site, bucket, name, prop_key, prop_value)
SETTINGS non_replicated_deduplication_window = 1000;
CREATE MATERIALIZED VIEW IF NOT EXISTS goal_props_from_events TO goal_props_minute AS
SELECT site, toStartOfMinute(ts) AS bucket, name, prop_key, prop_value,
       toUInt64(count()) AS events,
       uniqExactState(cityHash64(cityHash64(visitor_id), toDate(ts))) AS visitors
FROM events
ARRAY JOIN mapKeys(props) AS prop_key, mapValues(props) AS prop_value
WHERE name NOT IN ('pageview', 'engagement')
GROUP BY site, bucket, name, prop_key, prop_value;
-- What the archive already holds (rows archived while this ran may be counted twice: run
-- migrations before the archiver starts, as `tally up` does).
INSERT INTO goal_events_minute
SELECT site, toStartOfMinute(ts) AS bucket, name, path, revenue_currency AS currency,
       toUInt64(count()) AS events,
       uniqExactState(cityHash64(cityHash64(visitor_id), toDate(ts))) AS visitors,
       sum(toDecimal128OrZero(revenue_amount, 6)) AS revenue
FROM events
WHERE name != 'engagement'
GROUP BY site, bucket, name, path, currency;
INSERT INTO goal_props_minute
SELECT site, toStartOfMinute(ts) AS bucket, name, prop_key, prop_value,
       toUInt64(count()) AS events,
       uniqExactState(cityHash64(cityHash64(visitor_id), toDate(ts))) AS visitors
FROM events
ARRAY JOIN mapKeys(props) AS prop_key, mapValues(props) AS prop_value
WHERE name NOT IN ('pageview', 'engagement')
GROUP BY site, bucket, name, prop_key, prop_value
