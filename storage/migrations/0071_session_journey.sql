-- Journeys: a session row holds the path its visit took, so that "where do visitors go
-- next from P" and "where did they come from into P" read `sessions` (array functions over
-- `journey`) instead of sessionising the archive at read time.
-- journey: the paths of the visit's page views in time order (ties in one millisecond go to the
-- smaller event_id, as everywhere), consecutive repeats folded: a visit / → /a → /a → / → /b
-- holds ['/', '/a', '/', '/b'] (a reload is not a step; a return to a page is).
-- All of them, uncapped, as `paths` (0063): the report follows a visit's first occurrence of a
-- page wherever it falls in the visit, so a cap would drop steps raw counts and agg must equal
-- raw to the unit. The size is bounded by what the stream state already holds (every page view
-- of an open session, with its path), by the rate limit on page views per client, and by
-- `paths`' own bound times the visit's page views (never longer than `pageviews`).
-- Old data: rows written before this migration read [] until `tally replay` rebuilds the
-- sessions from the log; every visit has a page view, so an empty journey marks them, and the
-- report answers a range holding one from the archive (storage/queries/journeys.py); the stream jobs write
-- `journey` for every session row they emit after the upgrade (their checkpoint stays valid: the
-- state holds every page view's path and event_id, from which the journey is recomputed).
ALTER TABLE sessions
    ADD COLUMN IF NOT EXISTS journey Array(String) DEFAULT [] AFTER paths;
