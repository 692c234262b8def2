"""Plausible's Stats API v1 parameters on Tally's own v1 endpoints (docs/plausible-api.md).

`GET /api/v1/stats/aggregate|timeseries|breakdown` are Tally's and Plausible's paths alike. The
rule: a call that names its site with `site_id` (Plausible's parameter) is a Plausible call,
every parameter read as Plausible v1 reads it (`period`, `date`, `metrics`, `property`,
`filters` as `event:page==/blog/**;visit:country==DE`, `interval`, `limit`, `page`) and answered
in v1's shape (`{"results": …}`); a call with `site` is Tally's, exactly as before. Both → 400.

A v1 call is translated into the v2 query it means (dashboard.http_api.plausible.query) and answered by
the same report (dashboard.http_api.plausible.report), so v1 and v2 give the same numbers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any, Literal

from clickhouse_connect.driver.client import Client

from dashboard.http_api.plausible.imports import all_time_first_day, with_imports
from dashboard.http_api.plausible.query import (
    GOAL_DIMENSION,
    NOT_SET,
    QueryError,
    month_end,
    months_back,
    plan,
    validated,
)
from dashboard.http_api.plausible.report import Report, run, shown, site_of
from storage.calendar import local_date, zone
from storage.sites import site_timezone

Endpoint = Literal["aggregate", "timeseries", "breakdown"]
PARAMETERS = (
    "site_id",
    "period",
    "date",
    "metrics",
    "property",
    "filters",
    "interval",
    "limit",
    "page",
    "source",
    "with_imported",  # true: imported history added where it can be (dashboard/http_api/plausible/imports.py)
)
V1_INTERVALS = {"date": "time:day", "month": "time:month"}
DEFAULT_BREAKDOWN_LIMIT, MAX_BREAKDOWN_LIMIT = 100, 1000
# event:page==/blog/**|/docs ; visit:country!=DE — a key, == or != (or ~ for contains), values.
V1_FILTER = re.compile(r"^\s*([a-z_]+:[^=!~]+?)\s*(==|!=|~)\s*(.*?)\s*$", re.DOTALL)
# `|` separates values unless escaped: `a\|b` is the one value `a|b` (Plausible v1's rule).
UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")
# v1's 6mo and 12mo: the reference day's month (`date`, else today) and the months before it, as
# Plausible's legacy query builder reads them (v2's "6mo" leaves that month out). v1's "7d", "30d"
# are v2's: the N whole days before the reference day (dashboard/http_api/plausible/query.py's last_n).
V1_MONTHS = {"6mo": 6, "12mo": 12}
# A v1 breakdown by these leaves out the value that means "none" (Plausible's
# Legacy.Breakdown adds `is_not` filters for them: no campaign, no entry page, unknown country);
# a blank UTM is named "(not set)" by then (plausible_report.shown).
V1_BREAKDOWN_LEAVES_OUT = {
    "visit:utm_source": ("", NOT_SET),
    "visit:utm_medium": ("", NOT_SET),
    "visit:utm_campaign": ("", NOT_SET),
    "visit:utm_content": ("", NOT_SET),
    "visit:utm_term": ("", NOT_SET),
    "visit:entry_page": ("",),
    "visit:exit_page": ("",),
    "visit:country": ("", "ZZ"),
}


def requested(args: Mapping[str, Any]) -> bool:
    """Whether the call is Plausible's (it names the site with site_id); with `site` too: 400."""
    if "site_id" in args and "site" in args:
        raise QueryError("site_id: give Plausible's site_id or Tally's site, not both.")
    return "site_id" in args


def answer(
    endpoint: Endpoint,
    args: Mapping[str, Sequence[str]],
    client: Client,
    now: datetime,
    session_gap_s: int,
    engaged_bounce_ms: int,
) -> dict[str, object]:
    """The v1 answer to a call; QueryError (400) for what Tally cannot answer."""
    values = single_values(args)
    source = values.get("source", "agg")
    if source not in ("agg", "raw"):
        raise QueryError("source: must be agg or raw (Tally's).")
    site = site_of(client, values.get("site_id", ""))
    timezone = site_timezone(client, site)
    body = v2_body(endpoint, values, local_date(now, zone(timezone)))
    with_imported = bool(body.get("include", {}).get("imports"))
    first_day = all_time_first_day(client, site, with_imported) if body["date_range"] == "all" else None
    query = plan(validated({**body, "site_id": site}), now, first_day, timezone)
    report = run(client, query, source, session_gap_s, engaged_bounce_ms)  # type: ignore[arg-type]
    report, _ = with_imports(client, query, report, source, session_gap_s, engaged_bounce_ms)  # type: ignore[arg-type]
    report = shown(report, query)
    return shaped(endpoint, query.metrics, values, report, body)


def single_values(args: Mapping[str, Sequence[str]]) -> dict[str, str]:
    unknown = sorted(set(args) - set(PARAMETERS))
    if unknown:
        raise QueryError(
            f"{unknown[0]}: not a Plausible v1 parameter Tally supports ({', '.join(PARAMETERS)})."
        )
    repeated = sorted(name for name, given in args.items() if len(given) != 1)
    if repeated:
        raise QueryError(f"{repeated[0]}: given more than once.")
    return {name: given[0] for name, given in args.items()}


def v2_body(endpoint: Endpoint, values: dict[str, str], now: date) -> dict[str, Any]:
    """The v2 query a v1 call means; `now` is today in the site's zone (for `7d`, `30d`)."""
    period = values.get("period", "30d")
    metrics = [name.strip() for name in values.get("metrics", "visitors").split(",")]
    body: dict[str, Any] = {
        "site_id": values.get("site_id", ""),
        "metrics": metrics,
        "date_range": date_range(period, values.get("date"), now),
        "filters": v1_filters(values.get("filters", "")),
    }
    if period not in ("custom", *V1_MONTHS) and "date" in values:
        body["date"] = values["date"]
    if values.get("with_imported", "false") not in ("true", "false"):
        raise QueryError("with_imported: true or false.")
    if values.get("with_imported") == "true":
        body["include"] = {"imports": True}
    if endpoint == "timeseries":
        default = {"day": "hour", "6mo": "month", "12mo": "month"}.get(period, "date")  # v1's defaults
        interval = values.get("interval", default)
        dimension = "time:hour" if interval == "hour" else V1_INTERVALS.get(interval)
        if dimension is None:
            raise QueryError(f"interval: '{interval}' is not one of date, month (or hour for period=day).")
        body |= {"dimensions": [dimension], "include": {**body.get("include", {}), "time_labels": True}}
    elif endpoint == "breakdown":
        prop = values.get("property")
        if not prop:
            raise QueryError("The `property` parameter is required for breakdown.")
        limit, page = whole(values, "limit", DEFAULT_BREAKDOWN_LIMIT), whole(values, "page", 1)
        if limit > MAX_BREAKDOWN_LIMIT:
            raise QueryError(f"limit: at most {MAX_BREAKDOWN_LIMIT}.")
        body |= {"dimensions": [prop], "pagination": {"limit": limit, "offset": (page - 1) * limit}}
    else:
        for name in ("property", "interval", "limit", "page"):
            if name in values:
                raise QueryError(f"{name}: not a parameter of {endpoint}.")
    return body


def date_range(period: str, day: str | None, today: date) -> str | list[str]:
    if period in V1_MONTHS:
        reference = reference_day(day, today)
        first, last = months_back(reference, V1_MONTHS[period] - 1), month_end(reference)
        return [first.isoformat(), last.isoformat()]
    if period != "custom":
        return period  # v2's meaning, `date` its reference day
    parts = (day or "").split(",")
    if len(parts) != 2:
        raise QueryError("date: with period=custom, two ISO-8601 dates, e.g. date=2026-11-01,2026-11-30.")
    return [part.strip() for part in parts]


def reference_day(day: str | None, today: date) -> date:
    try:
        return date.fromisoformat(day) if day is not None else today
    except ValueError:
        raise QueryError(f"Invalid date '{day}'.") from None


def v1_filters(text: str) -> list[list[Any]]:
    """v1 `key==a|b;key2!=c` as v2 filters; `\\|` is a `|` within a value; `*` (within a path
    segment) and `**` (across segments) make a value a pattern, matched as an anchored regular
    expression. A goal's values are goal names, never patterns (`Visit /blog**` is the page
    goal of that name, as Plausible reads it)."""
    result: list[list[Any]] = []
    for part in (piece for piece in text.split(";") if piece.strip()):
        found = V1_FILTER.match(part)
        if not found:
            raise QueryError(
                f"Invalid filter '{part}': expected e.g. event:page==/blog/** or visit:country!=DE."
            )
        key, operator, value = found.groups()
        options = [option.replace("\\|", "|") for option in UNESCAPED_PIPE.split(value)]
        if key == GOAL_DIMENSION and operator == "==":
            result.append(["is", key, options])
        elif operator == "~":
            result.append(["contains", key, options])
        elif any("*" in option for option in options):
            patterns = [wildcard_regex(option) for option in options]
            result.append(["matches" if operator == "==" else "matches_not", key, patterns])
        else:
            result.append(["is" if operator == "==" else "is_not", key, options])
    return result


def wildcard_regex(pattern: str) -> str:
    pieces = re.split(r"(\*\*|\*)", pattern)
    translated = {"**": ".*", "*": "[^/]*"}
    return "^" + "".join(translated.get(piece, re.escape(piece)) for piece in pieces) + "$"


def whole(values: dict[str, str], name: str, default: int) -> int:
    text = values.get(name)
    if text is None:
        return default
    if not (text.isascii() and text.isdigit() and 0 < int(text) <= 1_000_000):
        raise QueryError(f"{name}: a whole number from 1.")
    return int(text)


def shaped(
    endpoint: Endpoint, metrics: tuple[str, ...], values: dict[str, str], report: Report, body: dict[str, Any]
) -> dict[str, object]:
    """v1's shapes: aggregate {"results": {metric: {"value": n}}}; timeseries one object per
    bucket (every bucket, zeros included) with `date`; breakdown one per value, keyed by the
    property's last part (`page`, `source`, `country`, the property's KEY…)."""
    if endpoint == "aggregate":
        row = report.rows[0].metrics if report.rows else {}
        return {"results": {name: {"value": row.get(name, 0)} for name in metrics}}
    if endpoint == "timeseries":
        counted = {row.dimensions[0]: row.metrics for row in report.rows}
        return {
            "results": [
                {"date": label, **{name: counted.get(label, {}).get(name, 0) for name in metrics}}
                for label in report.time_labels
            ]
        }
    dimension = str(body["dimensions"][0])
    key = dimension.rsplit(":", 1)[-1]
    offset, limit = body["pagination"]["offset"], body["pagination"]["limit"]
    left_out = V1_BREAKDOWN_LEAVES_OUT.get(dimension, ())
    rows = [row for row in report.rows if row.dimensions[0] not in left_out]
    return {
        "results": [
            {key: row.dimensions[0], **{name: row.metrics.get(name) for name in metrics}}
            for row in rows[offset : offset + limit]
        ]
    }
