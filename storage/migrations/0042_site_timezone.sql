-- Each site's IANA time zone (`tally sites add DOMAIN --timezone ZONE`, `tally sites timezone`):
-- where its days, weeks and months start in the dashboard and the stats API. The newest row
-- per domain carries it, as it carries `removed`; sites added before have UTC.
ALTER TABLE sites ADD COLUMN IF NOT EXISTS timezone String DEFAULT 'UTC';
