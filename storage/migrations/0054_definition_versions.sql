-- What-if: the definitions that shape the derived tables, as numbered versions.
-- A version is never changed once written: `tally whatif` records a proposed one, and a swap
-- (or a rollback) appends to `definition_switches`. The current version is the newest switch's;
-- with no switch yet, version 1, recorded on first use from the environment
-- (storage/definitions.py says how the environment and the stored versions relate).
-- `definitions` is JSON: {"session_gap_s": …, "engaged_bounce_ms": …, "watermark_s": …,
-- "rules": {name: fingerprint}} (rules the log is not replayed through, recorded as they were).
CREATE TABLE IF NOT EXISTS definition_versions
(
    version     UInt32,
    definitions String,
    note        String,
    created_at  DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree
ORDER BY version;

-- Which version became current when, and which it replaced: rollback goes back one switch.
CREATE TABLE IF NOT EXISTS definition_switches
(
    at       DateTime64(3, 'UTC') DEFAULT now64(3),
    version  UInt32,
    previous UInt32,
    reason   LowCardinality(String)
)
ENGINE = MergeTree
ORDER BY at
