-- History imported from Plausible's CSV export or a GA4 export (storage/imports.py,
-- docs/architecture.md, "Imported history"). Daily aggregates, as Plausible keeps its own
-- imports, never synthesised events: an export holds per-day counts, not the visitors behind
-- them, so events made up from it would fake visitors, sessions and their order.
--
-- imported_daily: per (site, day, dimension, value) the imported numbers of one imported file.
-- dimension '' holds the day's totals (Plausible's imported_visitors); the others are Tally's
-- dimension names (path, entry_path, exit_path, referrer_domain, utm_*, country, screen_size,
-- device, browser, os). import_id is a hash of the file's bytes, and a file's rows are summed
-- per key before the insert, so importing the same file again writes the same rows under the
-- same key: ReplacingMergeTree (read with FINAL) keeps one.
CREATE TABLE IF NOT EXISTS imported_daily
(
    site           LowCardinality(String),
    date           Date,
    dimension      LowCardinality(String),
    value          String,
    import_id      String,
    visitors       UInt64,
    pageviews      UInt64,
    visits         UInt64,
    bounces        UInt64,
    visit_duration UInt64
)
ENGINE = ReplacingMergeTree
ORDER BY (site, dimension, date, value, import_id);
-- imports: one row per imported file (what `tally import` reports and the dashboard's marker
-- names); the same file imported again finds its row here and writes nothing.
CREATE TABLE IF NOT EXISTS imports
(
    site        LowCardinality(String),
    import_id   String,
    origin      LowCardinality(String),
    file_name   String,
    first_day   Date,
    last_day    Date,
    row_count   UInt64,
    imported_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(imported_at)
ORDER BY (site, import_id)
