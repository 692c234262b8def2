-- Filtered reads at 10M events: a visit's `paths` and `journey` as arrays of LowCardinality
-- strings. A page filter reads `paths` of every visit of the range (has(paths, '/pricing'),
-- arrayExists(p -> …, paths)) and a breakdown by page ARRAY JOINs it: over the 10M bench store's
-- 3.3M visits of a month, has() read 151 MiB of strings in 202 ms, and 34 MiB of dictionary
-- positions in 98 ms once LowCardinality; the ARRAY JOIN by page went 240 → 106 ms
-- (bench/results/2026-11-29-vm-page-reads.md). A site's pages repeat across its visits, which
-- is what LowCardinality's per-part dictionaries are for; a site with millions of distinct paths
-- only gets dictionaries as large as its paths, never a wrong answer.
-- Nothing else changes: values, defaults and every reader's SQL are the same, the stream jobs'
-- Arrow inserts of list<string> convert on insert, and `CREATE TABLE … AS sessions` copies
-- (replays, what-ifs) take the new type. The rewrite is a mutation of these two columns alone;
-- parts not yet rewritten are read through a cast meanwhile.
ALTER TABLE sessions
    MODIFY COLUMN paths Array(LowCardinality(String)) DEFAULT [],
    MODIFY COLUMN journey Array(LowCardinality(String)) DEFAULT []
