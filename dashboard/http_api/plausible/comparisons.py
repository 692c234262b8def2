"""Plausible's `include.comparisons` on `POST /api/v2/query`: the same query over a compared
range — `{"mode": "previous_period"}` (as many local days just before), `{"mode":
"year_over_year"}` (the same local dates a year before) or `{"mode": "custom", "date_range":
[date, date]}` — answered per result as Plausible does: `"comparison": {"dimensions": [...],
"metrics": [...], "change": [...]}` and `meta.comparison_date_range`.

Rows are paired by their dimension values (time buckets by their place in the range, since
their labels differ); a value absent from the compared range compares with zeros. The
change follows Plausible's rule: percent rounded to a whole number, 100 against 0 (0 when both
are 0), bounce_rate as the difference in points (null when it was 0), null for metrics without
a number (time_on_page of a page without engagement).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timedelta
from typing import Any

from dashboard.http_api.plausible.query import PlausibleQuery, QueryError
from dashboard.http_api.plausible.report import Report
from storage.calendar import local_date, local_midnight, shift_local, zone

MODES = ("previous_period", "year_over_year", "custom")
POINT_METRICS = frozenset({"bounce_rate"})  # percentages whose change is a difference


def compared_query(query: PlausibleQuery) -> PlausibleQuery | None:
    """The query over the compared range (None without include.comparisons), or QueryError."""
    options: Any = query.body.include.comparisons
    if options is None:
        return None
    if not isinstance(options, dict) or options.get("mode") not in MODES:
        raise QueryError(f"Invalid include.comparisons: mode is one of {', '.join(MODES)}.")
    if set(options) - {"mode", "date_range", "match_day_of_week"}:
        raise QueryError(f"Invalid include.comparisons: unknown key in {sorted(options)}.")
    if options.get("match_day_of_week"):
        raise QueryError("Invalid include.comparisons: match_day_of_week is not supported by Tally.")
    tz = zone(query.timezone)
    if options["mode"] == "custom":
        start, end = custom_dates(options.get("date_range"), tz)
    elif options["mode"] == "year_over_year":
        start, end = shift_local(query.start, tz, months=-12), shift_local(query.end, tz, months=-12)
    else:
        start, end = previous_period(query.start, query.end, tz)
    return replace(query, start=start, end=end)


def previous_period(start: datetime, end: datetime, tz: Any) -> tuple[datetime, datetime]:
    """As many local days just before (a range of whole days), or as long a stretch."""
    if local_midnight(local_date(start, tz), tz) == start and local_midnight(local_date(end, tz), tz) == end:
        days = (local_date(end, tz) - local_date(start, tz)).days
        return shift_local(start, tz, days=-days), start
    return start - (end - start), start


def custom_dates(pair: object, tz: Any) -> tuple[datetime, datetime]:
    try:
        first, last = (date.fromisoformat(text) for text in pair)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise QueryError("Invalid include.comparisons: custom needs date_range: [date, date].") from None
    if last < first:
        raise QueryError("Invalid include.comparisons: the date_range's end is before its start.")
    return local_midnight(first, tz), local_midnight(last + timedelta(days=1), tz)


def change(metric: str, old: object, new: object) -> float | int | None:
    if not isinstance(old, int | float) or not isinstance(new, int | float):
        return None
    if metric in POINT_METRICS:
        return round(new - old, 2) if old else None
    if old == 0:
        return 100 if new else 0
    return round((new - old) / old * 100)


def attach(answered: dict[str, Any], query: PlausibleQuery, report: Report, compared: PlausibleQuery,
           other: Report) -> None:  # fmt: skip
    """Adds `comparison` to each result of `answered` (the page of `report`'s rows it shows) and
    the compared range to its meta."""
    offset = query.body.pagination.offset
    page = report.rows[offset : offset + query.body.pagination.limit]
    by_value = {row.dimensions: row for row in other.rows}
    for result, row in zip(answered["results"], page, strict=True):
        dimensions = row.dimensions
        if query.time_bucket is not None:  # labels differ between the ranges: the bucket at the same place
            place = report.time_labels.index(str(row.dimensions[0]))
            dimensions = (other.time_labels[place],) if place < len(other.time_labels) else ()
        twin = by_value.get(dimensions)
        metrics = [twin.metrics.get(name) if twin else 0 for name in query.metrics]
        changes = [
            change(name, old, row.metrics.get(name)) for name, old in zip(query.metrics, metrics, strict=True)
        ]
        result["comparison"] = {"dimensions": list(dimensions), "metrics": metrics, "change": changes}
    last = compared.end - timedelta(seconds=1)
    answered["meta"]["comparison_date_range"] = [compared.start.isoformat(), last.isoformat()]
