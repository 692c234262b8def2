-- The custom events of each page, for the reports' page filter on `sessions`
-- (stats/sessions_sql.py, PAGE). Under `path = /pricing` raw counts a visit that viewed the page
-- or that holds a custom event at it (its visitor's, within [first page view, last page view +
-- gap]); `sessions.paths` holds the page views' paths only, so the custom events of the page are
-- looked up here by (site, path) instead of scanning the archive's month for them (at 10M events:
-- ~560 ms for the archive's scan of name and path, a few ms here).
-- A copy of the archive's rows by a materialized view, as goal_events_minute is (migration 0022):
-- derived from the archive, not the log, so a replay leaves it as it is. A copy landing twice
-- (an archive insert retried, the view's block not deduplicated) changes nothing: the reader asks
-- whether a visit holds ANY custom event at the page.
CREATE TABLE IF NOT EXISTS custom_events_by_page
(
    site       LowCardinality(String),
    path       String,
    ts         DateTime64(3, 'UTC'),
    visitor_id String,
    name       LowCardinality(String)
)
ENGINE = MergeTree
ORDER BY (site, path, ts);
CREATE MATERIALIZED VIEW IF NOT EXISTS custom_events_by_page_from_events TO custom_events_by_page AS
SELECT site, path, ts, visitor_id, name
FROM events
WHERE name NOT IN ('pageview', 'engagement');
-- The custom events archived before this migration (one archived meanwhile may land twice: harmless).
INSERT INTO custom_events_by_page
SELECT site, path, ts, visitor_id, name
FROM events
WHERE name NOT IN ('pageview', 'engagement');
