-- A session with one page view is a bounce only if its visitor was not engaged in it
-- (storage/queries/contract.py, "engaged session"): engaged_ms is the sum of engagement_ms of
-- the engagement events belonging to the session, and is_bounce now means pageviews = 1 AND
-- engaged_ms < TALLY_ENGAGED_BOUNCE_MS. Rows written before this migration read 0 here and keep
-- the old is_bounce (the rollups' bounces too) until `tally replay` rebuilds them from the log.
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS engaged_ms UInt64 DEFAULT 0 AFTER is_bounce;
