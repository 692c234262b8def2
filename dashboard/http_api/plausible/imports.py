"""Plausible's `include.imports`: imported history (storage/imports.py) added to a v2 answer.

Imported numbers are daily aggregates, so they join a report the way Plausible joins its
`imported_*` tables: only for whole days of the range (the site's local days: an export's day
is the site's own calendar day), only for days before the site's own events start (Plausible
trims an import there; storage/imports.py `used_days`), only for the metrics and dimensions an
export carries, and only without filters (an export cannot say which of its visitors a filter
keeps). Otherwise the answer is the native one and `meta.imports_skip_reason` says why, in
Plausible's words (`unsupported_query`, `unsupported_interval`, `no_imported_data`).

Numbers add up as the imported ones are defined: visitors, visits, page views, bounces and the
visits' total duration are summed per day (a visitor is a (day, visitor) pair in Tally too, so
days add up); bounce rate, visit duration and views per visit are recomputed from the sums.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date

from clickhouse_connect.driver.client import Client

from dashboard.http_api.plausible.query import (
    DIMENSIONS,
    PAGE_DIMENSION,
    SESSION_DIMENSIONS,
    PlausibleQuery,
)
from dashboard.http_api.plausible.report import ALL_ROWS, Report, Row, bucket_label, ordered, visit_metrics
from storage import imports, queries
from storage.calendar import local_date, local_midnight, zone
from storage.imports import Numbers
from storage.queries import Source, StatsQuery, questions

IMPORTED_METRICS = frozenset(
    {"visitors", "visits", "pageviews", "views_per_visit", "bounce_rate", "visit_duration"}
)
IMPORTED_DIMENSIONS = frozenset(
    {PAGE_DIMENSION, "visit:country", "visit:device", "visit:browser", "visit:os", *SESSION_DIMENSIONS}
)
IMPORTED_BUCKETS = frozenset({"day", "week", "month"})


def all_time_first_day(client: Client, site: str, include_imports: bool) -> date | None:
    """Where date_range "all" starts: the site's first native day, or, when imports are
    included, its first imported day if that is earlier (as Plausible's "all" does)."""
    native = queries.first_day(client, site)
    imported = imports.first_imported_day(client, site) if include_imports else None
    return min((day for day in (native, imported) if day is not None), default=None)


def skip_reason(query: PlausibleQuery) -> str | None:
    """Why imports cannot join this query (None: they can)."""
    if query.where is not None or query.goal or query.visits is not None or query.engine is not None:
        return "unsupported_query"
    if not set(query.metrics) <= IMPORTED_METRICS:
        return "unsupported_query"
    if query.time_bucket:
        return None if query.time_bucket in IMPORTED_BUCKETS else "unsupported_interval"
    if query.dimension is not None and query.dimension not in IMPORTED_DIMENSIONS:
        return "unsupported_query"
    return None


def with_imports(
    client: Client,
    query: PlausibleQuery,
    report: Report,
    source: Source,
    session_gap_s: int,
    engaged_bounce_ms: int,
) -> tuple[Report, dict[str, object]]:
    """`report` with the site's imported history added when the query asks for it, and the
    `meta` entries saying whether it was."""
    if not query.body.include.imports:
        return report, {}
    reason = skip_reason(query)
    if reason is None and not imports.imported(
        client, query.site, query.start, query.end, timezone=query.timezone
    ):
        reason = "no_imported_data"
    if reason is not None:
        return report, {"imports_included": False, "imports_skip_reason": reason}
    defined = questions.Defined(session_gap_s, engaged_bounce_ms)
    q = questions.question(query.site, query.start, query.end, defined, timezone=query.timezone)
    if query.dimension is None:
        rows = [
            Row((), visit_metrics(combined(queries.aggregate(client, q, source=source), totals(client, q))))
        ]
    elif query.time_bucket:
        rows = time_rows(client, q, query.time_bucket, source)
    elif query.dimension in SESSION_DIMENSIONS:
        rows = session_rows(client, q, DIMENSIONS[query.dimension], source)
    else:
        rows = event_rows(client, q, DIMENSIONS[query.dimension], report)
    # Ties keep the values' order (a stable sort), whichever source a row came from.
    rows.sort(key=lambda row: [str(value) for value in row.dimensions])
    return replace(report, rows=ordered(rows, query)), {"imports_included": True}


def totals(client: Client, q: StatsQuery) -> Numbers:
    return imports.imported(client, q.site, q.start, q.end, timezone=q.timezone).get((None, ""), Numbers())


def combined(native: dict[str, float], extra: Numbers) -> dict[str, float]:
    """Tally's aggregate numbers (contract.metrics) with imported ones added."""
    sessions = int(native["sessions"])
    bounces = round(native["bounce_rate"] * sessions) + extra.bounces
    duration_s = native["avg_session_duration_s"] * sessions + extra.visit_duration
    visits = sessions + extra.visits
    return queries.metrics(
        int(native["pageviews"]) + extra.pageviews,
        int(native["visitors"]) + extra.visitors,
        visits,
        bounces,
        duration_s / visits if visits else 0.0,
    )


def by_value(client: Client, q: StatsQuery, dimension: str) -> dict[str, Numbers]:
    return {
        value: numbers
        for (_, value), numbers in imports.imported(
            client, q.site, q.start, q.end, dimension, timezone=q.timezone
        ).items()
    }


def session_rows(client: Client, q: StatsQuery, dimension: str, source: Source) -> list[Row]:
    native = {
        row.value: row.totals for row in queries.session_breakdown(client, q, dimension, ALL_ROWS, source)
    }
    extra = by_value(client, q, dimension)
    empty = queries.metrics(0, 0, 0, 0, 0.0)
    return [
        Row((value,), visit_metrics(combined(native.get(value, empty), extra.get(value, Numbers()))))
        for value in {**native, **extra}
    ]


def event_rows(client: Client, q: StatsQuery, dimension: str, report: Report) -> list[Row]:
    """Page views and visitors per value (an event dimension's metrics) plus the imported ones;
    time on page and scroll depth stay the native page views' (an export has none)."""
    extra = by_value(client, q, dimension)
    rows = []
    for row in report.rows:
        value = str(row.dimensions[0])
        numbers = extra.pop(value, Numbers())
        metrics = dict(row.metrics)
        metrics["visitors"] = int(metrics.get("visitors") or 0) + numbers.visitors
        metrics["pageviews"] = int(metrics.get("pageviews") or 0) + numbers.pageviews
        rows.append(Row(row.dimensions, metrics))
    for value, numbers in extra.items():
        rows.append(
            Row(
                (value,),
                {
                    "visitors": numbers.visitors,
                    "pageviews": numbers.pageviews,
                    "time_on_page": None,
                    "scroll_depth": None,
                },
            )
        )
    return rows


def time_rows(client: Client, q: StatsQuery, bucket: str, source: Source) -> list[Row]:
    """Per day, week or month: the native days' numbers and the imported days' added up, both
    keyed by the site's local day (a native point starts at a local midnight, an imported row
    is a local day already)."""
    tz = zone(q.timezone)
    label = bucket_label(q.start, bucket, q.timezone)
    days: dict[date, list[int]] = {}  # pageviews, visitors, sessions, bounces, duration_ms
    for point in queries.timeseries(client, q, "day", source=source):
        day = days.setdefault(local_date(point.t, tz), [0] * 5)
        day[0] += point.pageviews
        day[1] += point.visitors
    for session_point in queries.session_timeseries(client, q, "day", source=source):
        day = days.setdefault(local_date(session_point.t, tz), [0] * 5)
        day[2] += session_point.sessions
        day[3] += session_point.bounces
        day[4] += session_point.duration_ms
    for (moment, _), numbers in imports.imported(
        client, q.site, q.start, q.end, by_day=True, timezone=q.timezone
    ).items():
        assert moment is not None  # by_day: every key has its day
        day = days.setdefault(moment, [0] * 5)
        day[0] += numbers.pageviews
        day[1] += numbers.visitors
        day[2] += numbers.visits
        day[3] += numbers.bounces
        day[4] += numbers.visit_duration * 1000
    labelled: dict[str, list[int]] = {}
    for moment, numbers in days.items():
        total = labelled.setdefault(label(local_midnight(moment, tz)), [0] * 5)
        for index, number in enumerate(numbers):
            total[index] += number
    return [
        Row((name,), visit_metrics(queries.metrics_from_totals(*n[:5])))
        for name, n in sorted(labelled.items())
        if n[0] or n[1] or n[2]
    ]
