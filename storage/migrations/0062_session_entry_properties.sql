-- A session row carries what session-scoped filters and breakdowns need, so that they
-- read `sessions` and not a sessionised archive. New columns, each its first page view's value
-- (as utm_source): utm_content and utm_term (visit properties), and the class of its screen width
-- (screen_size: Mobile < 576 px, Tablet < 992, Laptop < 1440, Desktop, '' when 0) and its
-- language. screen_size and language stay event dimensions (each page view counts by its own
-- value, stats/catalogue.py); here they are the visit's entry page view's, as country, device,
-- browser and os are. Not stored: the entry page view's hostname (the stream operator's state
-- does not keep it).
-- Old data: rows written before this migration read '' in these columns; the stream jobs write
-- them for every session they emit after the upgrade (their checkpoint stays valid: the visitor
-- state has held these fields since engagement was added). `tally replay` rebuilds the sessions from the
-- log, so periods before the upgrade show them too.
ALTER TABLE sessions
    ADD COLUMN IF NOT EXISTS utm_content LowCardinality(String) DEFAULT '' AFTER utm_campaign,
    ADD COLUMN IF NOT EXISTS utm_term LowCardinality(String) DEFAULT '' AFTER utm_content,
    ADD COLUMN IF NOT EXISTS screen_size LowCardinality(String) DEFAULT '' AFTER os,
    ADD COLUMN IF NOT EXISTS language LowCardinality(String) DEFAULT '' AFTER screen_size;
