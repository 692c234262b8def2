-- Web Vitals (storage/queries/vitals.py, docs/architecture.md "Web Vitals"): per
-- (site, quarter-hour, path, device, country, browser) and vital, the page views measured in
-- each FIXED histogram bucket, named by its upper bound (`upper`, in the archive's unit: ms, CLS
-- in thousandths). The bounds are storage/queries/vitals.py's BOUNDS, written out
-- (tests/unit/test_vitals_buckets.py holds the two equal): every integer up to 40, then each
-- bound floor(1.05 x the previous one), Google's thresholds among them, 120000 the last (the
-- collector takes nothing larger). Counts add up over any quarter-hours, so the percentiles a
-- merged range gives are the archive's exactly. Quarter-hours: every time zone's midnight is on
-- one, so a period in the site's zone is whole quarter-hours.
--
-- The deduplication window: a retried archive insert that `events` drops still reaches its
-- views (migration 0023); this table drops the view's block of it too.
CREATE TABLE IF NOT EXISTS vitals_quarter
(
    site     LowCardinality(String),
    quarter  DateTime('UTC'),
    path     String,
    device   LowCardinality(String),
    country  LowCardinality(String),
    browser  LowCardinality(String),
    vital    LowCardinality(String),
    upper    UInt32,
    measured UInt64
)
ENGINE = SummingMergeTree(measured)
PARTITION BY toYYYYMM(quarter)
ORDER BY (site, quarter, vital, path, device, country, browser, upper)
SETTINGS non_replicated_deduplication_window = 1000;
-- Filled by the INSERT that archives an engagement event, each measured vital (NULL: not
-- measured) in its bucket.
CREATE MATERIALIZED VIEW IF NOT EXISTS vitals_quarter_from_events TO vitals_quarter AS
SELECT site, toStartOfFifteenMinutes(ts) AS quarter, path, device, country, browser,
       measurement.1 AS vital,
       arrayFirst(bound -> bound >= assumeNotNull(measurement.2), [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
    25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 42, 44, 46, 48, 50, 52, 54,
    56, 58, 60, 63, 66, 69, 72, 75, 78, 81, 85, 89, 93, 97, 100, 101, 106, 111, 116, 121, 127,
    133, 139, 145, 152, 159, 166, 174, 182, 191, 200, 210, 220, 231, 242, 250, 254, 266, 279,
    292, 306, 321, 337, 353, 370, 388, 407, 427, 448, 470, 493, 500, 517, 542, 569, 597, 626,
    657, 689, 723, 759, 796, 800, 835, 876, 919, 964, 1012, 1062, 1115, 1170, 1228, 1289, 1353,
    1420, 1491, 1565, 1643, 1725, 1800, 1811, 1901, 1996, 2095, 2199, 2308, 2423, 2500, 2544,
    2671, 2804, 2944, 3000, 3091, 3245, 3407, 3577, 3755, 3942, 4000, 4139, 4345, 4562, 4790,
    5029, 5280, 5544, 5821, 6112, 6417, 6737, 7073, 7426, 7797, 8186, 8595, 9024, 9475, 9948,
    10445, 10967, 11515, 12090, 12694, 13328, 13994, 14693, 15427, 16198, 17007, 17857, 18749,
    19686, 20670, 21703, 22788, 23927, 25123, 26379, 27697, 29081, 30535, 32061, 33664, 35347,
    37114, 38969, 40917, 42962, 45110, 47365, 49733, 52219, 54829, 57570, 60448, 63470, 66643,
    69975, 73473, 77146, 81003, 85053, 89305, 93770, 98458, 103380, 108549, 113976, 119674,
    120000
       ]) AS upper,
       toUInt64(count()) AS measured
FROM events
ARRAY JOIN [('lcp', lcp_ms), ('cls', cls_milli), ('inp', inp_ms), ('fcp', fcp_ms), ('ttfb', ttfb_ms)] AS measurement
WHERE name = 'engagement' AND measurement.2 IS NOT NULL
GROUP BY site, quarter, path, device, country, browser, vital, upper;
-- What the archive already holds (migrations run before the archiver starts: storage/schema.py).
INSERT INTO vitals_quarter
SELECT site, toStartOfFifteenMinutes(ts) AS quarter, path, device, country, browser,
       measurement.1 AS vital,
       arrayFirst(bound -> bound >= assumeNotNull(measurement.2), [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
    25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 42, 44, 46, 48, 50, 52, 54,
    56, 58, 60, 63, 66, 69, 72, 75, 78, 81, 85, 89, 93, 97, 100, 101, 106, 111, 116, 121, 127,
    133, 139, 145, 152, 159, 166, 174, 182, 191, 200, 210, 220, 231, 242, 250, 254, 266, 279,
    292, 306, 321, 337, 353, 370, 388, 407, 427, 448, 470, 493, 500, 517, 542, 569, 597, 626,
    657, 689, 723, 759, 796, 800, 835, 876, 919, 964, 1012, 1062, 1115, 1170, 1228, 1289, 1353,
    1420, 1491, 1565, 1643, 1725, 1800, 1811, 1901, 1996, 2095, 2199, 2308, 2423, 2500, 2544,
    2671, 2804, 2944, 3000, 3091, 3245, 3407, 3577, 3755, 3942, 4000, 4139, 4345, 4562, 4790,
    5029, 5280, 5544, 5821, 6112, 6417, 6737, 7073, 7426, 7797, 8186, 8595, 9024, 9475, 9948,
    10445, 10967, 11515, 12090, 12694, 13328, 13994, 14693, 15427, 16198, 17007, 17857, 18749,
    19686, 20670, 21703, 22788, 23927, 25123, 26379, 27697, 29081, 30535, 32061, 33664, 35347,
    37114, 38969, 40917, 42962, 45110, 47365, 49733, 52219, 54829, 57570, 60448, 63470, 66643,
    69975, 73473, 77146, 81003, 85053, 89305, 93770, 98458, 103380, 108549, 113976, 119674,
    120000
       ]) AS upper,
       toUInt64(count()) AS measured
FROM events
ARRAY JOIN [('lcp', lcp_ms), ('cls', cls_milli), ('inp', inp_ms), ('fcp', fcp_ms), ('ttfb', ttfb_ms)] AS measurement
WHERE name = 'engagement' AND measurement.2 IS NOT NULL
GROUP BY site, quarter, path, device, country, browser, vital, upper
