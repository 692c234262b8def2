"""The stats API's answers to a question, shared by `/api/v1` (dashboard/http_api/stats.py) and `tally stats`
(ops/cli/stats.py): which report a question reads and the JSON each row is given as. No Flask here,
so the CLI prints the API's numbers from the API's own code path without importing the web app."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime

from clickhouse_connect.driver.client import Client

from dashboard import comparisons
from dashboard.http_api.parameters import EVENT_NAME_BREAKDOWN, PROP_BREAKDOWN
from storage import queries
from storage.queries import EventRow, GoalRow, Interval, Point, Source, StatsQuery
from storage.queries.retention import RetentionReport
from storage.queries.vitals import VitalsRow
from tally.clock import as_utc


def aggregate(
    client: Client, q: StatsQuery, compared: StatsQuery | None, source: Source
) -> dict[str, object]:
    """`/stats/aggregate`: the top-line numbers, with the compared range's and each change."""
    current = queries.aggregate(client, q, source=source)
    if compared is None:
        return dict(current)
    previous = queries.aggregate(client, compared, source=source)
    span = {"from": iso(compared.start, q.timezone), "to": iso(compared.end, q.timezone)}
    return current | {"comparison": span | previous, "change": comparisons.changes(current, previous)}


def timeseries(
    client: Client, q: StatsQuery, compared: StatsQuery | None, interval: Interval, source: Source
) -> list[dict[str, object]]:
    """`/stats/timeseries`: each bucket's numbers, paired with the compared range's."""
    points = [point_json(point, q.timezone) for point in queries.timeseries(client, q, interval, source)]
    if compared is None:
        return points
    previous = queries.timeseries(client, compared, interval, source=source)
    return comparisons.paired(points, [point_json(point, q.timezone) for point in previous])


def breakdown(client: Client, q: StatsQuery, by: str, goal: str, limit: int, source: Source) -> list[dict]:
    """`/stats/breakdown`: a dimension's, the custom events' or a property's top rows."""
    if by == EVENT_NAME_BREAKDOWN:
        return [event_json(row) for row in queries.custom_events(client, q, limit, source)]
    if by.startswith(PROP_BREAKDOWN):
        key = by.removeprefix(PROP_BREAKDOWN)  # an unknown goal: 400 naming it
        return [event_json(row) for row in queries.properties(client, q, key, goal, limit, source)]
    rows = queries.breakdown(client, q, by, limit, source=source)
    answer: list[dict] = [{"value": r.value, "pageviews": r.pageviews, "visitors": r.visitors} for r in rows]
    if by == "path":  # a page's engagement (storage/queries/contract.py), 0 without any
        engaged = queries.engagement(client, q, [r.value for r in rows], source=source)
        for row in answer:
            page = engaged.get(str(row["value"]))
            row["time_on_page_s"] = page.time_on_page_s if page else 0.0
            row["scroll_depth"] = page.scroll_depth if page else 0.0
    return answer


def goals(client: Client, q: StatsQuery, source: Source) -> list[dict[str, object]]:
    """`/stats/goals`: each goal's conversions."""
    return [goal_json(row) for row in queries.goals(client, q, source=source)]


def iso(moment: datetime, timezone: str = "UTC") -> str:
    """ISO-8601 as the API's parameters take it: in UTC with a Z, or in the site's zone with its
    offset (a bucket of a Berlin site starts at 2026-03-29T00:00:00+01:00)."""
    moment = as_utc(moment)
    if timezone != "UTC":
        return moment.astimezone(queries.zone(timezone)).isoformat()
    return moment.isoformat().replace("+00:00", "Z")


def point_json(point: Point, timezone: str = "UTC") -> dict[str, object]:
    return {"t": iso(point.t, timezone), "pageviews": point.pageviews, "visitors": point.visitors}


def event_json(row: EventRow) -> dict[str, object]:
    return {"value": row.value, "events": row.events, "visitors": row.visitors}


def vitals_json(row: VitalsRow) -> dict[str, object]:
    """A row of the Web Vitals report: its value and, per vital measured, its summary."""
    return {"value": row.value, **{vital: asdict(summary) for vital, summary in row.vitals.items()}}


def goal_json(row: GoalRow) -> dict[str, object]:
    """A goal's numbers; revenue as exact decimal strings (2 places), null for other goals."""
    revenue = None
    if row.currency:
        revenue = {
            "currency": row.currency,
            "total": f"{row.revenue_total:.2f}",
            "average": f"{row.revenue_average:.2f}",
            "events": row.revenue_events,
        }
    return {
        "goal": row.goal,
        "kind": row.kind,
        "visitors": row.visitors,
        "events": row.events,
        "conversion_rate": row.conversion_rate,
        "revenue": revenue,
    }


def retention_json(report: RetentionReport, timezone: str, source: Source) -> dict[str, object]:
    """`/stats/retention`: the weeks, the identity the numbers rest on, and each cohort's row
    (`returning[i]`: the cohort's visitors back i + 1 weeks later; `retention[i]`: that share)."""
    return {
        "timezone": timezone,
        "source": source,
        "weeks": [week.isoformat() for week in report.weeks],
        "identity": [
            {"rotation": change.rotation, "since": iso(change.since) if change.since else None}
            for change in report.identity
        ],
        "identity_note": report.identity_note,
        "cohorts": [
            {
                "week": cohort.week.isoformat(),
                "visitors": cohort.visitors,
                "returning": list(cohort.returning),
                "retention": list(cohort.shares),
                "note": cohort.note,
            }
            for cohort in report.cohorts
        ],
    }
