-- Weekly and monthly email reports (storage/report_subscriptions.py,
-- dashboard/email_reports.py, docs/architecture.md, "Email reports").
--
-- report_subscriptions: who receives which site's report how often. A change is a new row; the
-- newest row per (site, email, frequency) wins (removed = 1 is an unsubscription), as for goals.
CREATE TABLE IF NOT EXISTS report_subscriptions
(
    site       LowCardinality(String),
    email      String,
    frequency  LowCardinality(String),
    removed    UInt8,
    changed_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(changed_at)
ORDER BY (site, email, frequency);
-- report_deliveries: one row per report the SMTP server accepted, keyed by what makes a report
-- (site, subscriber, frequency, first day of its period): a report with a row here is never sent
-- again, whichever sender (the dashboard's, `tally reports send`) comes next.
CREATE TABLE IF NOT EXISTS report_deliveries
(
    site         LowCardinality(String),
    email        String,
    frequency    LowCardinality(String),
    period_start Date,
    period_end   Date,
    sent_at      DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(sent_at)
ORDER BY (site, email, frequency, period_start)
