"""The names of the store's tables, spelled once (created by storage/migrations/*.sql).

The stream jobs' sinks, a replay, the raw-SQL allowlist and the rate-limit panel name their
tables through this module, so a table added to DERIVED_TABLES is rebuilt by a replay and
readable by raw SQL. (The query layer's SQL text still spells `events` and its neighbours.)
"""

from __future__ import annotations

EVENTS = "events"  # the raw archive, a copy of the log
# The partition of rows written straight into the archive (tests, benchmarks, imports' fixtures):
# no topic has it, so these rows never move the archiver's resume position for a real partition.
SYNTHETIC_PARTITION = 65535
SITES = "sites"
SALTS = "salts"
# Each site's visitor identity: how long its visitor-id salt lives, and since when (migration 0073).
SITE_IDENTITY = "site_identity"
SCHEMA_MIGRATIONS = "schema_migrations"

# Rollups per (site, dimension, bucket, value) at three resolutions (migration 0020).
ROLLUP_MINUTE = "rollup_minute"
ROLLUP_HOUR = "rollup_hour"
ROLLUP_DAY = "rollup_day"
ROLLUPS = (ROLLUP_MINUTE, ROLLUP_HOUR, ROLLUP_DAY)
SESSIONS = "sessions"  # every session, open or closed, newest version per key
RATE_LIMIT_COUNTERS = "rate_limit_counters"
RATE_LIMIT_BLOCKS = "rate_limit_blocks"
LATE_EVENTS = "late_events"
STREAM_WATERMARKS = "stream_watermarks"
STREAM_OFFSETS = "stream_offsets"  # per partition, how far the stream jobs have read the log
STREAM_BATCHES = "stream_batches"  # a log of the stream jobs' runs, not derived
# Engagement per (site, minute, path), kept by a materialized view on `events` (migration
# 0023): derived from the archive, not the log, so a replay leaves it as it is.
ENGAGEMENT_MINUTE = "engagement_minute"
# The same at day resolution, one row per (site, day, path, visitor) (migration 0027).
ENGAGEMENT_DAY = "engagement_day"
# Goals and the aggregates of custom events (migration 0022): materialized views on the
# archive, not the stream jobs' tables, so a replay leaves them as they are.
GOALS = "goals"
GOAL_EVENTS_MINUTE = "goal_events_minute"
GOAL_PROPS_MINUTE = "goal_props_minute"
# A site's custom properties, the Properties report's allow-list (migration 0068).
CUSTOM_PROPERTIES = "custom_properties"
# goal_events_minute at day resolution, per path and every path together (migration 0026).
GOAL_EVENTS_DAY = "goal_events_day"
GOAL_VISITORS_DAY = "goal_visitors_day"
# Each custom event's (site, path, ts, visitor) by page (migration 0064): the visits a custom
# event at a page keeps under a page filter, for reports read from `sessions`.
CUSTOM_EVENTS_BY_PAGE = "custom_events_by_page"
# Web Vitals' histogram bucket counts per (site, quarter-hour, path, device, country, browser),
# a materialized view on the archive (migration 0070): not derived from the log, so a replay
# leaves it as it is (storage/queries/vitals.py).
VITALS_QUARTER = "vitals_quarter"
# Funnels per UTC day (migration 0046): archive_days fingerprints each (site, day) of the
# archive (a materialized view on `events`); funnel_days keeps a funnel's result per day and
# the fingerprint it was computed from (storage/queries/funnel_days.py). Derived from the
# archive, not the log: a replay leaves them as they are.
ARCHIVE_DAYS = "archive_days"
FUNNEL_DAYS = "funnel_days"
# Per (site, UTC day, partition) the archived events and their lowest and highest offset, a
# materialized view on the archive (migration 0075): what an answer's `meta` says of the log
# (storage/queries/provenance.py coverage). Derived from the archive: a replay leaves it.
ARCHIVE_OFFSETS_DAY = "archive_offsets_day"
# Alerts (migration 0032): the rules, the alerts query's own counts, the alerts fired. Not
# derived tables: a replay neither rebuilds nor fires alerts (stream_jobs/alerts.py).
ALERT_RULES = "alert_rules"
ALERT_COUNTS_MINUTE = "alert_counts_minute"
ALERTS = "alerts"
# The archive's index of event ids (migration 0021) and its accounting of the offsets not
# archived as rows: re-sent copies, dead letters, erased events (migration 0072).
ARCHIVE_IDS = "archive_ids"
ARCHIVE_DUPLICATES = "archive_duplicates"
ARCHIVE_DEADLETTERS = "archive_deadletters"
ARCHIVE_ERASED = "archive_erased"
# Every erasure of a site's events (migration 0072, storage/erasures.py).
SITE_ERASURES = "site_erasures"
# Imported aggregates (migration 0039) and the record of each import.
IMPORTED_DAILY = "imported_daily"
IMPORTS = "imports"
AUDIT_LOG = "audit_log"

#: Every table the stream jobs derive from the log: a replay rebuilds exactly these.
DERIVED_TABLES = (
    *ROLLUPS,
    SESSIONS,
    RATE_LIMIT_COUNTERS,
    RATE_LIMIT_BLOCKS,
    LATE_EVENTS,
    STREAM_WATERMARKS,
    STREAM_OFFSETS,
)

#: Every table holding rows of a site's events or figures derived from them: an erasure
#: (storage/erasures.py) deletes the site's rows from each (from `events` those received at or
#: before its cutoff). A table with a `site` column must be here or in KEPT_ON_ERASURE
#: (tests/integration/test_site_erasure.py reads the store's columns).
ERASED_TABLES = (
    EVENTS,
    ARCHIVE_IDS,
    *ROLLUPS,
    SESSIONS,
    LATE_EVENTS,
    ENGAGEMENT_MINUTE,
    ENGAGEMENT_DAY,
    GOAL_EVENTS_MINUTE,
    GOAL_PROPS_MINUTE,
    GOAL_EVENTS_DAY,
    GOAL_VISITORS_DAY,
    CUSTOM_EVENTS_BY_PAGE,
    VITALS_QUARTER,
    ARCHIVE_DAYS,
    ARCHIVE_OFFSETS_DAY,
    FUNNEL_DAYS,
    ALERT_COUNTS_MINUTE,
    ALERTS,
    IMPORTED_DAILY,
    IMPORTS,
)

#: Tables with a `site` column an erasure leaves as they are, and why.
KEPT_ON_ERASURE: dict[str, str] = {
    AUDIT_LOG: "the record of who did what, the erasure included",
    SITE_ERASURES: "the erasures themselves: what the archiver and the stream jobs drop",
    ARCHIVE_DUPLICATES: "offsets and random event ids only: they account for the log's offsets",
    # Settings: deleting the site removes them (dashboard/http_api/sites_api.py remove_settings),
    # with or without an erasure; an erasure is about events.
    GOALS: "settings",
    CUSTOM_PROPERTIES: "settings",
    ALERT_RULES: "settings",
    "annotations": "settings",
    "saved_funnels": "settings",
    "segments": "settings",
    "shared_links": "settings",
    "site_channel_rules": "settings",
    "site_exclusions": "settings",
    SITE_IDENTITY: "settings: how long its visitor ids lived, and since when (as its time zone, in `sites`)",
    "report_subscriptions": "settings",
    "report_deliveries": "settings: when a report was sent, no figures",
    "user_invites": "accounts",
    "user_roles": "accounts",
}
