-- Web Vitals of a page view, sent with its engagement event (tally/event.py,
-- docs/architecture.md "Web Vitals"): NULL where not measured, which is not 0 (a TTFB of 0 ms
-- from the back/forward cache is a measurement). Times in ms; CLS in thousandths (an integer,
-- exact: 250 is CLS 0.25). Events archived before this migration, and events of older
-- collectors, read NULL: not measured.
ALTER TABLE events ADD COLUMN IF NOT EXISTS lcp_ms Nullable(UInt32);
ALTER TABLE events ADD COLUMN IF NOT EXISTS cls_milli Nullable(UInt32);
ALTER TABLE events ADD COLUMN IF NOT EXISTS inp_ms Nullable(UInt32);
ALTER TABLE events ADD COLUMN IF NOT EXISTS fcp_ms Nullable(UInt32);
ALTER TABLE events ADD COLUMN IF NOT EXISTS ttfb_ms Nullable(UInt32)
