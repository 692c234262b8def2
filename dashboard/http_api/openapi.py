"""The OpenAPI 3 description of the stats API, served at /api/v1/openapi.json.

Written by hand, with the vocabularies (dimensions, intervals, sources, limits) taken from
the code that enforces them, so the document cannot drift from what the endpoints accept;
tests/integration/test_stats_api.py calls every GET path listed here,
tests/integration/test_plausible_api.py the v2 query (test_imports.py with include.imports);
schemathesis fuzzes them all.
"""

from __future__ import annotations

from typing import Any

from dashboard import periods
from dashboard.http_api import imports as imports_api
from dashboard.http_api import parameters, sql_query
from dashboard.http_api import whatif as whatif_api
from dashboard.http_api.openapi_manage import annotations_paths, management_paths, sites_paths
from dashboard.http_api.plausible import query as plausible
from storage import imports, queries
from storage.alert_backtest import MAX_HISTORY_DAYS
from storage.alert_rules import MAX_BASELINE_WINDOWS, MAX_WINDOW_MINUTES, RULE_KINDS
from storage.queries.contract import SCREEN_SIZE_WIDEST, SCREEN_SIZES
from storage.queries.funnels import MAX_STEPS, MIN_STEPS
from storage.queries.journeys import DIRECTIONS, JOURNEY_FILTERS
from storage.queries.journeys import MAX_STEPS as JOURNEY_MAX_STEPS
from storage.queries.retention import DEFAULT_WEEKS as RETENTION_DEFAULT_WEEKS
from storage.queries.retention import MAX_WEEKS as RETENTION_MAX_WEEKS
from storage.queries.session_filters import SESSION_FILTERS
from storage.queries.vitals import COLUMNS as VITALS_COLUMNS
from storage.queries.vitals import PROPERTIES as VITALS_PROPERTIES
from storage.site_identity import ROTATIONS

JSON = dict[str, Any]


def _parameter(name: str, description: str, schema: JSON, required: bool = False) -> JSON:
    return {"name": name, "in": "query", "required": required, "description": description, "schema": schema}


# screen_size's classes, from the table that defines them (storage/queries/contract.py).
SCREEN_SIZE_DEFINITION = (
    "screen_size classes the screen width: "
    + ", ".join(f"{name} < {below} px" for name, below in SCREEN_SIZES)
    + f", {SCREEN_SIZE_WIDEST} otherwise, '' when the width is unknown (0)."
)

PARAMETERS: dict[str, JSON] = {
    "site": _parameter(
        "site",
        "The site (domain) to report on.",
        {"type": "string", "minLength": 1, "maxLength": parameters.MAX_SITE_LENGTH},
        required=True,
    ),
    "from": _parameter(
        "from",
        "Start of the range, inclusive: ISO-8601 date or date-time; in the site's time zone "
        "(`tally sites timezone`, UTC by default) unless an offset is given. Default: 30 days before "
        "`to`. Not with `period`.",
        {"type": "string", "format": "date-time", "example": "2026-11-10T00:00:00Z"},
    ),
    "to": _parameter(
        "to",
        "End of the range, exclusive; must be after `from`. Default: now.",
        {"type": "string", "format": "date-time", "example": "2026-11-11T00:00:00Z"},
    ),
    "period": _parameter(
        "period",
        "A range in the site's time zone instead of from/to: today, yesterday, 24h, 7d and 30d "
        "(those days up to now, today included), month (month to date), last_month, year (year to "
        "date), 12mo (this month and the 11 before), all (since the site's first event).",
        {"type": "string", "enum": [name for name in periods.PRESETS if name != "custom"]},
    ),
    "compare": _parameter(
        "compare",
        "Also answer the same report over the previous period (as long, just before; for a period "
        "preset the calendar's: yesterday at the same local time, the month before) or the same "
        "local dates a year before, with each number's change: percent for counts (null when the "
        "compared number is 0), percentage points for bounce_rate.",
        {"type": "string", "enum": list(periods.COMPARISONS)},
    ),
    "interval": _parameter(
        "interval",
        "Bucket size; hours, days, weeks (from Monday) and months of the site's time zone, so a "
        "day of a daylight-saving change has 23 or 25 hours. Default: minute up to 6 h, hour up to "
        "7 days, else day. "
        f"At most {parameters.MAX_BUCKETS:,} buckets.",
        {"type": "string", "enum": list(parameters.INTERVALS)},
    ),
    "by": _parameter(
        "by",
        "The dimension to break down by. Event dimensions count page views by their own value: "
        f"{', '.join(queries.EVENT_DIMENSIONS)}. Session dimensions count the page views and visitors "
        "of the sessions starting in the range by the value of their first page view (exit_path: "
        f"their last): {', '.join(queries.SESSION_DIMENSIONS)}; `channel`: the session's acquisition "
        "channel (the site's own channel rules first, `tally channels`, then GA4's default grouping "
        "of its referrer and UTM source and medium; docs/architecture.md). "
        f"{SCREEN_SIZE_DEFINITION} "
        "Or `event:name` (custom events by name) or `prop:KEY` (the values of custom property KEY): "
        "these two answer events and visitors instead of page views.",
        {
            "oneOf": [
                {
                    "type": "string",
                    "enum": [*queries.DIMENSIONS, queries.CHANNEL, parameters.EVENT_NAME_BREAKDOWN],
                },
                {"type": "string", "pattern": f"^prop:.{{1,{queries.MAX_PROPERTY_KEY}}}$"},
            ]
        },
        True,
    ),
    "goal": _parameter(
        "goal",
        "With by=prop:KEY only: the values on one goal's events (its name, e.g. Signup). "
        "An unknown goal is a 400.",
        {"type": "string", "minLength": 1, "maxLength": 200},
    ),
    "journey_page": _parameter(
        "page",
        "The page the journeys go from (next) or into (previous): a path, or one of `group`'s "
        "patterns; each visit from its FIRST view of it. Without it: from the visit's entry (next) "
        "or into its exit (previous).",
        {"type": "string", "maxLength": parameters.MAX_STEPS_LENGTH, "example": "/pricing"},
    ),
    "journey_direction": _parameter(
        "direction",
        "next: the steps after the page; previous: the steps before it.",
        {"type": "string", "enum": list(DIRECTIONS), "default": "next"},
    ),
    "journey_steps": _parameter(
        "steps",
        "How many steps to follow from the page (consecutive repeats of a page are one step).",
        {
            "type": "integer",
            "minimum": 1,
            "maximum": JOURNEY_MAX_STEPS,
            "default": parameters.DEFAULT_JOURNEY_STEPS,
        },
    ),
    "journey_group": _parameter(
        "group",
        "Comma-separated page patterns (* stands for any run of characters), each drawn as one node, "
        "e.g. /blog/*,/docs/*.",
        {"type": "string", "maxLength": parameters.MAX_STEPS_LENGTH, "example": "/blog/*"},
    ),
    "journey_filters": _parameter(
        "filters",
        "The visits followed: filters on a visit's properties only, as `filters` elsewhere (a JSON "
        "object, or a list with operators): "
        f"{', '.join(JOURNEY_FILTERS)}; country, device, browser, os, screen_size and language are the "
        "visit's first page view's. A filter on an event (path, goal, props.KEY, hostname) is a 400 "
        "naming it: a journey is a whole visit's path (follow a page with `page`).",
        {"type": "string", "example": '{"channel": "Organic Search"}'},
    ),
    "journey_min_visitors": _parameter(
        "min_visitors",
        'Paths taken by fewer visitors than this are folded into one row, steps ["(other)"].',
        {"type": "integer", "minimum": 1, "maximum": parameters.MAX_MIN_VISITORS, "default": 1},
    ),
    "journey_limit": _parameter(
        "limit",
        "At most this many paths, those of the most visitors; the others are folded into one row, steps "
        '["(other)"]. Without it: every path.',
        {"type": "integer", "minimum": 1, "maximum": parameters.MAX_LIMIT},
    ),
    "retention_weeks": _parameter(
        "weeks",
        "How many weeks (cohorts) the report shows, the last holding `until`.",
        {"type": "integer", "minimum": 1, "maximum": RETENTION_MAX_WEEKS, "default": RETENTION_DEFAULT_WEEKS},
    ),
    "retention_until": _parameter(
        "until",
        "A day of the last week shown (YYYY-MM-DD, the site's calendar); default: the site's today.",
        {"type": "string", "format": "date", "example": "2026-11-29"},
    ),
    "breakdown_limit": _parameter(
        "limit",
        "Rows to return.",
        {"type": "integer", "minimum": 1, "maximum": parameters.MAX_LIMIT, "default": 10},
    ),
    "realtime_breakdown": _parameter(
        "breakdown",
        "The last 30 minutes by pages (path), sources (a visitor's first referrer of the day) or "
        "countries, read from the archive; without it, the live counts of the last 5 minutes.",
        {"type": "string", "enum": ["pages", "sources", "countries"]},
    ),
    "vitals_property": _parameter(
        "property",
        "The Web Vitals report's breakdown: by page, device class, country or browser; without it, one "
        "row for the whole site.",
        {"type": "string", "enum": list(VITALS_PROPERTIES)},
    ),
    "sessions_limit": _parameter(
        "limit",
        "Sessions to return, newest first.",
        {"type": "integer", "minimum": 1, "maximum": parameters.MAX_LIMIT, "default": 100},
    ),
    "segment_id": _parameter(
        "id",
        "The segment's id (GET /api/v1/segments lists them).",
        {"type": "integer", "minimum": 0, "maximum": 999_999_999},
        required=True,
    ),
    "alerts_limit": _parameter(
        "limit",
        "Alerts to return, newest first.",
        {"type": "integer", "minimum": 1, "maximum": parameters.MAX_LIMIT, "default": 100},
    ),
    "source": _parameter(
        "source",
        "agg: the Spark-derived tables (default); raw: the raw archive. "
        "For closed windows both give the same numbers.",
        {"type": "string", "enum": list(parameters.SOURCES), "default": "agg"},
    ),
    "filters": _parameter(
        "filters",
        "JSON object of filter → value; only the events matching every filter count. "
        f"Dimensions: {', '.join(queries.EVENT_DIMENSIONS)} (the event's value); "
        f"{', '.join(SESSION_FILTERS)} (the visit's: the events of the sessions whose entry page, "
        "exit page, referrer, UTM field or channel it is); `goal`: the visitors "
        "who converted on that goal (its name) in the range; `props.KEY`: events carrying property "
        "KEY with that value. Or a JSON list of filters, all of which must hold: [operator, "
        "dimension, [values]] with is, is_not, contains, contains_not, matches, matches_not (RE2) on "
        'the same dimensions; ["and"|"or", [filters]], ["not", filter], e.g. '
        '[["contains", "channel", ["Search"]], ["is_not", "country", ["US"]]]. '
        "Filtered reports are computed from the raw archive.",
        {"type": "string", "example": '{"path": "/pricing", "channel": "Organic Search"}'},
    ),
    "meta": _parameter(
        "meta",
        'true: the answer becomes {"results": <the usual answer>, "meta": <its provenance>} '
        "(a funnel's fields join its own meta): the source read, the log range covered per Kafka "
        "partition, the stream jobs' watermark, late events, whether agg and raw agree per day. "
        "Costs a few small queries more (docs/architecture.md, 'Provenance').",
        {"type": "string", "enum": ["true", "false"], "default": "false"},
    ),
    "steps": _parameter(
        "steps",
        f"The funnel: a JSON array of {MIN_STEPS} to {MAX_STEPS} steps, "
        'in order, each {"page": PATTERN} (a page path; * stands for any run of characters) or '
        '{"event": NAME} (a custom event). Evaluated within sessions of page views and custom events; '
        "a session counts in the range it starts in; filters keep the sessions with a page view "
        "matching them. Required unless `funnel` names a saved funnel.",
        {"type": "string", "maxLength": parameters.MAX_STEPS_LENGTH, "example": parameters.STEPS_EXAMPLE},
    ),
    "metric": _parameter(
        "metric",
        "Whose events: pageviews (the page views passing the filters: rows = pageviews), visitors (the "
        "same rows: distinct (UTC day, visitor_id) = visitors), events (the custom events, or with "
        "`goal` that goal's events: rows = events), conversions (a goal's events: distinct (UTC day, "
        "visitor_id) = its visitors). A figure that is no count of events is refused.",
        {"type": "string", "enum": ["pageviews", "visitors", "events", "conversions"]},
        required=True,
    ),
    "export_format": _parameter(
        "format", "The file: Parquet or CSV.", {"type": "string", "enum": ["parquet", "csv"]}
    ),
    "export_goal": _parameter(
        "goal",
        "With metric=events or conversions: the goal (its name) whose events are exported.",
        {"type": "string", "maxLength": 200},
    ),
    "property": _parameter(
        "property",
        "With `value`: one row of a breakdown by this dimension (its value as one more filter).",
        {"type": "string", "example": "path"},
    ),
    "value": _parameter("value", "The breakdown row's value.", {"type": "string", "example": "/pricing"}),
    "funnel": _parameter(
        "funnel",
        "A saved funnel's name (`tally funnels add SITE NAME STEP...`) instead of `steps`: its "
        "closed days are computed in the background, so its first request is fast too.",
        {"type": "string", "maxLength": 120},
    ),
}


def _ref(name: str) -> JSON:
    return {"$ref": f"#/components/parameters/{name}"}


def _ok(schema: JSON, description: str) -> JSON:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


ERRORS: JSON = {
    "400": {"$ref": "#/components/responses/BadParameter"},
    "401": {"$ref": "#/components/responses/Unauthorized"},
    "403": {"$ref": "#/components/responses/Forbidden"},
    "503": {"$ref": "#/components/responses/StoreUnavailable"},
}
RANGE = ["site", "from", "to", "period", "filters", "source", "meta"]


def _operation(summary: str, parameter_names: list[str], response: JSON) -> JSON:
    return {
        "get": {
            "summary": summary,
            "parameters": [_ref(name) for name in parameter_names],
            "responses": {"200": response, **ERRORS},
        }
    }


def _schema(name: str) -> JSON:
    return {"$ref": f"#/components/schemas/{name}"}


def _or_with_meta(answer: JSON) -> JSON:
    """The answer as it is, or with meta=true inside {"results", "meta"} (dashboard/provenance.py)."""
    envelope = {
        "type": "object",
        "required": ["results", "meta"],
        "properties": {"results": answer, "meta": _schema("Provenance")},
    }
    return {"anyOf": [answer, envelope]}


SCHEMAS: dict[str, JSON] = {
    "SqlQueryRequest": {
        "type": "object",
        "description": "One read-only SELECT over the archive (table `events`), as Explore runs it.",
        "required": ["sql"],
        "additionalProperties": False,
        "properties": {
            "sql": {"type": "string", "minLength": 1, "maxLength": sql_query.MAX_SQL_LENGTH},
            "limit": {"type": "integer", "minimum": 1, "maximum": parameters.MAX_LIMIT},
        },
    },
    "SqlQueryResult": {
        "type": "object",
        "required": ["columns", "rows", "row_count", "truncated", "limit"],
        "properties": {
            "columns": {"type": "array", "items": {"type": "string"}},
            "rows": {"type": "array", "items": {"type": "array", "items": {}}},
            "row_count": {"type": "integer"},
            "truncated": {"type": "boolean", "description": "more rows than `limit` matched"},
            "limit": {"type": "integer"},
        },
    },
    "AlertBacktestRequest": {
        "type": "object",
        "description": "An alert rule as `tally alerts add` takes it (no webhook needed: a backtest "
        "sends nothing) and the history to test it against: the `days` days up to `until` (default now).",
        "required": ["site", "kind"],
        "additionalProperties": False,
        "properties": {
            "site": {"type": "string"},
            "kind": {"type": "string", "enum": list(RULE_KINDS)},
            "window_minutes": {"type": "integer", "minimum": 1, "maximum": MAX_WINDOW_MINUTES},
            "threshold": {"type": "integer", "minimum": 0},
            "factor": {"type": "number", "minimum": 0, "maximum": 1000},
            "baseline_windows": {"type": "integer", "minimum": 1, "maximum": MAX_BASELINE_WINDOWS},
            "goal": {"type": "string"},
            "event_name": {"type": "string"},
            "page_pattern": {"type": "string"},
            "webhook_url": {"type": "string"},
            "days": {"type": "integer", "minimum": 1, "maximum": MAX_HISTORY_DAYS},
            "until": {"type": "string", "description": "ISO-8601, UTC unless it names an offset"},
        },
    },
    "AlertBacktest": {
        "type": "object",
        "required": ["site", "kind", "description", "from", "to", "firings", "total", "truncated"],
        "properties": {
            "site": {"type": "string"},
            "kind": {"type": "string"},
            "description": {"type": "string"},
            "from": {"type": "string", "format": "date-time"},
            "to": {"type": "string", "format": "date-time"},
            "firings": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["window_start", "window_end", "value", "threshold"],
                    "properties": {
                        "window_start": {"type": "string", "format": "date-time"},
                        "window_end": {"type": "string", "format": "date-time"},
                        "fired_at": {
                            "type": "string",
                            "nullable": True,
                            "description": "goal_absent: the window's start + its minutes",
                        },
                        "value": {"type": "number", "description": "events in the window, or minutes absent"},
                        "threshold": {"type": "number", "description": "the bound exceeded, or M minutes"},
                        "mean": {"type": "number", "nullable": True, "description": "a factor rule's mean"},
                    },
                },
            },
            "total": {"type": "integer", "description": "firings in the history"},
            "truncated": {"type": "boolean", "description": "whether the list stops before the total"},
        },
    },
    "Alerts": {
        "type": "object",
        "required": ["rules", "alerts"],
        "properties": {
            "rules": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["rule_id", "kind", "description", "webhook_host", "created_at"],
                    "properties": {
                        "rule_id": {"type": "string"},
                        "kind": {
                            "type": "string",
                            "enum": ["pageviews_above", "goal_absent", "event_rate_above"],
                        },
                        "description": {"type": "string"},
                        "window_minutes": {"type": "integer"},
                        "threshold": {"type": "integer"},
                        "factor": {"type": "number"},
                        "goal": {"type": "string"},
                        "event_name": {"type": "string"},
                        "page_pattern": {"type": "string"},
                        "webhook_host": {"type": "string", "description": "the webhook URL's host only"},
                        "created_at": {"type": "string", "format": "date-time"},
                    },
                },
            },
            "alerts": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["alert_id", "rule_id", "kind", "fired_at", "status"],
                    "properties": {
                        "alert_id": {"type": "string", "description": "deterministic per rule and window"},
                        "rule_id": {"type": "string"},
                        "kind": {"type": "string"},
                        "window_start": {"type": "string", "format": "date-time"},
                        "observed": {"type": "number"},
                        "threshold": {"type": "number"},
                        "fired_at": {"type": "string", "format": "date-time"},
                        "summary": {"type": "string"},
                        "status": {"type": "string", "enum": ["fired", "delivered", "failed", "refused"]},
                        "attempts": {"type": "integer"},
                        "last_error": {"type": "string"},
                    },
                },
            },
        },
    },
    "Aggregate": {
        "type": "object",
        "required": ["pageviews", "visitors", "sessions", "bounce_rate", "avg_session_duration_s"],
        "properties": {
            "pageviews": {"type": "integer"},
            "visitors": {"type": "integer", "description": "distinct visitor ids"},
            "sessions": {"type": "integer", "description": "sessions starting in the range"},
            "bounce_rate": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "description": "bounces ÷ sessions (0 without sessions). A bounce is a session with "
                "exactly one page view in which the visitor was not engaged: its engaged time (the sum "
                "of `engagement_ms` of the `engagement` events belonging to it) is under 10 s "
                "(TALLY_ENGAGED_BOUNCE_MS; GA4's engaged session). An engagement event belongs to the "
                "session of its visitor whose first page view is at or before it and whose last page "
                "view is at most the session gap before it; other engagement events change no bounce. "
                "Unlike Plausible, where engagement events never affect the bounce rate.",
            },
            "avg_session_duration_s": {"type": "number"},
            "comparison": {
                "type": "object",
                "description": "with compare: the compared range (from, to) and its numbers",
            },
            "change": {
                "type": "object",
                "description": "with compare: per number, percent change (null when the compared "
                "number is 0); bounce_rate's in percentage points",
            },
        },
    },
    "Point": {
        "type": "object",
        "required": ["t", "pageviews", "visitors"],
        "properties": {
            "t": {
                "type": "string",
                "format": "date-time",
                "description": "bucket start: UTC (Z), or with the offset of the site's time zone",
            },
            "comparison": {
                "type": "object",
                "nullable": True,
                "description": "with compare: the compared range's bucket of the same index (t, "
                "pageviews, visitors); null past its last bucket",
            },
            "change": {
                "type": "object",
                "nullable": True,
                "description": "with compare: per number, percent change (null when the compared is 0)",
            },
            "pageviews": {"type": "integer"},
            "visitors": {"type": "integer"},
        },
    },
    "BreakdownRow": {
        "type": "object",
        "required": ["value", "pageviews", "visitors"],
        "properties": {
            "value": {"type": "string"},
            "pageviews": {"type": "integer"},
            "visitors": {"type": "integer"},
            # Only with by=path: the page's engagement, from `engagement` events (never page views).
            "time_on_page_s": {
                "type": "number",
                "minimum": 0,
                "description": "by=path only: the page's total engaged time (visible and focused, from "
                "`engagement` events) ÷ the visitors with an engagement event on it, in seconds; 0 "
                "without any. Engagement events never count as page views, visitors or sessions; they "
                "change bounces only through their session's engaged time (see bounce_rate).",
            },
            "scroll_depth": {
                "type": "number",
                "minimum": 0,
                "maximum": 100,
                "description": "by=path only: the average, over the visitors with an engagement event "
                "on the page, of the deepest scroll depth each reached on it, in percent; 0 without any.",
            },
        },
    },
    "EventRow": {
        "type": "object",
        "required": ["value", "events", "visitors"],
        "properties": {
            "value": {"type": "string", "description": "a custom event's name or a property's value"},
            "events": {"type": "integer"},
            "visitors": {"type": "integer", "description": "distinct (UTC day, visitor) with such an event"},
        },
    },
    "VitalsRow": {
        "type": "object",
        "required": ["value"],
        "description": "One row of the Web Vitals report: per vital measured on its page views (lcp, cls, "
        "inp, fcp, ttfb; a vital none measured is absent), a VitalSummary.",
        "properties": {
            "value": {
                "type": "string",
                "nullable": True,
                "description": "the page, device class, country or browser; null for the whole site",
            },
            **{vital: _schema("VitalSummary") for vital in VITALS_COLUMNS},
        },
    },
    "VitalSummary": {
        "type": "object",
        "required": ["measured", "p50", "p75", "p95", "good", "needs_improvement", "poor"],
        "description": "Percentiles in the vital's unit (ms; CLS unitless): the upper bound of the fixed "
        "histogram bucket holding the nearest rank (bounds at most 5 % apart above 40, exact below), "
        "the same from agg and raw. Ratings by Google's thresholds, in percent of the measured page views.",
        "properties": {
            "measured": {"type": "integer", "description": "page views with this vital measured"},
            "p50": {"type": "number"},
            "p75": {"type": "number"},
            "p95": {"type": "number"},
            "good": {"type": "number", "minimum": 0, "maximum": 100},
            "needs_improvement": {"type": "number", "minimum": 0, "maximum": 100},
            "poor": {"type": "number", "minimum": 0, "maximum": 100},
        },
    },
    "Goal": {
        "type": "object",
        "required": ["goal", "kind", "visitors", "events", "conversion_rate", "revenue"],
        "properties": {
            "goal": {"type": "string", "description": "its name; a page goal is 'Visit <pattern>'"},
            "kind": {"type": "string", "enum": ["event", "page"]},
            "visitors": {"type": "integer", "description": "unique conversions: visitors with a goal event"},
            "events": {"type": "integer", "description": "custom events of the name / matching page views"},
            "conversion_rate": {
                "type": "number",
                "minimum": 0,
                "description": "visitors / the site's visitors (with a page view) in the range; above 1 "
                "only if converted visitors had no page view (server-side events)",
            },
            "revenue": {
                "type": "object",
                "nullable": True,
                "description": "revenue goals only: the events with revenue in the goal's currency "
                "(other currencies are left out); decimal strings, 2 places",
                "required": ["currency", "total", "average", "events"],
                "properties": {
                    "currency": {"type": "string", "description": "ISO-4217"},
                    "total": {"type": "string", "example": "1234.50"},
                    "average": {"type": "string", "example": "24.69"},
                    "events": {"type": "integer"},
                },
            },
        },
    },
    "Realtime": {
        "type": "object",
        "required": ["visitors", "pageviews"],
        "properties": {
            "visitors": {"type": "integer", "description": "distinct visitors in the last 5 minutes"},
            "pageviews": {"type": "integer", "description": "page views in the last 5 minutes"},
        },
    },
    "RealtimeBreakdown": {
        "type": "object",
        "required": ["since", "visitors", "pageviews", "breakdown", "results", "meta"],
        "properties": {
            "since": {"type": "string", "format": "date-time", "description": "the window's start (30 min)"},
            "visitors": {"type": "integer", "description": "distinct visitors in the last 30 minutes"},
            "pageviews": {"type": "integer", "description": "page views in the last 30 minutes"},
            "breakdown": {"type": "string", "enum": ["pages", "sources", "countries"]},
            "results": {"type": "array", "items": _schema("BreakdownRow")},
            "meta": {"type": "object"},
        },
    },
    "Session": {
        "type": "object",
        "properties": {
            "visitor_id": {"type": "string"},
            "start": {"type": "string", "format": "date-time"},
            "end": {"type": "string", "format": "date-time"},
            "duration_s": {"type": "number"},
            "pageviews": {"type": "integer"},
            "entry_path": {"type": "string"},
            "exit_path": {"type": "string"},
            "is_bounce": {
                "type": "boolean",
                "description": "one page view and under 10 s of engaged time (see Aggregate.bounce_rate)",
            },
            "engaged_s": {
                "type": "number",
                "minimum": 0,
                "description": "the session's engaged time: the sum of `engagement_ms` of the `engagement` "
                "events belonging to it (see Aggregate.bounce_rate), in seconds",
            },
            "referrer_domain": {"type": "string"},
            "utm_source": {"type": "string"},
            "country": {"type": "string", "description": "ISO 3166 alpha-2 or empty"},
            "device": {"type": "string"},
            "browser": {"type": "string"},
            "os": {"type": "string"},
        },
    },
    "FunnelStep": {
        "type": "object",
        "required": ["step", "visitors", "sessions", "dropoff", "dropoff_rate", "conversion_rate"],
        "properties": {
            "step": {"type": "object", "description": 'the step as asked: {"page": …} or {"event": …}'},
            "visitors": {
                "type": "integer",
                "description": "visitors reaching the step: distinct (UTC day of session start, visitor)",
            },
            "sessions": {"type": "integer", "description": "sessions reaching the step"},
            "dropoff": {
                "type": "integer",
                "description": "the previous step's visitors not reaching this one",
            },
            "dropoff_rate": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "description": "dropoff / the previous step's visitors (0 for the first step)",
            },
            "conversion_rate": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "description": "visitors / the first step's visitors",
            },
        },
    },
    "JourneyRow": {
        "type": "object",
        "required": ["steps", "visits", "visitors"],
        "properties": {
            "steps": {
                "type": "array",
                "items": {"type": "string"},
                "description": "the page and the steps after it (next), or the steps before it and the page "
                '(previous); ["(other)"] for the paths folded under min_visitors',
            },
            "visits": {"type": "integer", "description": "visits starting in the range that took the path"},
            "visitors": {"type": "integer", "description": "distinct visitors among them"},
        },
    },
    "Retention": {
        "type": "object",
        "required": ["site", "timezone", "source", "weeks", "identity", "identity_note", "cohorts"],
        "properties": {
            "site": {"type": "string"},
            "timezone": {"type": "string", "description": "the site's zone: where its weeks start (Monday)"},
            "source": {"type": "string", "enum": ["agg", "raw"]},
            "weeks": {
                "type": "array",
                "items": {"type": "string", "format": "date"},
                "description": "Mondays",
            },
            "identity": {
                "type": "array",
                "description": "the visitor identity the numbers rest on: the rotation of the visitor-id "
                "salt in force at the first week's start (`since` null: from the site's start), then each "
                "change within the report's weeks",
                "items": {
                    "type": "object",
                    "required": ["rotation", "since"],
                    "properties": {
                        "rotation": {"type": "string", "enum": list(ROTATIONS)},
                        "since": {"type": "string", "format": "date-time", "nullable": True},
                    },
                },
            },
            "identity_note": {
                "type": "string",
                "description": "what those identities let the report recognise (a daily id lives one day)",
            },
            "cohorts": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["week", "visitors", "returning", "retention", "note"],
                    "properties": {
                        "week": {
                            "type": "string",
                            "format": "date",
                            "description": "the week of first visit",
                        },
                        "visitors": {"type": "integer", "description": "visitor ids first seen that week"},
                        "returning": {
                            "type": "array",
                            "items": {"type": "integer"},
                            "description": "[i]: the cohort's visitors with a visit i + 1 weeks later",
                        },
                        "retention": {
                            "type": "array",
                            "items": {"type": "number", "minimum": 0, "maximum": 1},
                            "description": "[i]: returning[i] / visitors",
                        },
                        "note": {
                            "type": "string",
                            "description": "set when the cohort's weeks span an identity change",
                        },
                    },
                },
            },
        },
    },
    "Funnel": {
        "type": "object",
        "required": ["steps", "meta"],
        "properties": {
            "steps": {"type": "array", "items": {"$ref": "#/components/schemas/FunnelStep"}},
            "meta": {
                "type": "object",
                "required": ["source"],
                "properties": {
                    "source": {
                        "type": "string",
                        "enum": ["agg", "raw"],
                        "description": "the source that answered: raw computes the funnel from the "
                        "archive; agg sums stored per-UTC-day results, each checked against a "
                        "fingerprint of the archive's days and computed again when it changed, and "
                        "computes the rest of the range live (the same numbers as raw)",
                    },
                    "funnel_days": {
                        "type": "object",
                        "description": "agg only: how the answer was made",
                        "properties": {
                            "stored_days": {
                                "type": "integer",
                                "description": "whole UTC days read from the stored results",
                            },
                            "computed_days": {
                                "type": "integer",
                                "description": "whole UTC days missing or stale, computed now and stored",
                            },
                            "stored_from": {"type": "string", "format": "date", "nullable": True},
                            "stored_to": {"type": "string", "format": "date", "nullable": True},
                            "live": {
                                "type": "array",
                                "description": "[from, to) ranges computed from the archive at read "
                                "time: mid-day edges, today (still changing), or the "
                                "whole range under a goal filter",
                                "items": {
                                    "type": "array",
                                    "items": {"type": "string", "format": "date-time"},
                                },
                            },
                        },
                    },
                },
                "description": "with meta=true, also the Provenance fields",
            },
        },
    },
    "Provenance": {
        "type": "object",
        "description": "What an answer is made of (docs/architecture.md, 'Provenance').",
        "required": [
            "source",
            "range",
            "log",
            "watermark",
            "late_events",
            "agreement",
            "definitions_version",
            "definitions_fingerprint",
            "erasure",
        ],
        "properties": {
            "source": {"type": "string", "enum": ["agg", "raw"], "description": "the source that answered"},
            "range": {"type": "object", "description": "the answer's [from, to), UTC"},
            "log": {
                "type": "object",
                "description": "topic; per partition the archived events of the site in the range "
                "(events, first_offset, last_offset), how far the stream jobs have read it "
                "(processed_to, exclusive) and how many of the range's events lie beyond (pending: in raw, "
                "not yet in agg); events written to the archive directly: partition null, from_log false; "
                "processed_to: the stream jobs' end offset per partition. A team member's key gets no "
                "processed_to (the log's end offsets count every site's events), and scope says so",
            },
            "watermark": {
                "type": "string",
                "nullable": True,
                "description": "the stream jobs' event-time watermark; null before their first batch",
            },
            "late_events": {
                "type": "object",
                "description": "count and by_day: events of the range the stream jobs received older than "
                "the allowed lateness (TALLY_ALLOWED_LATENESS_S); recorded_by_day: when the first and last "
                "of each day were recorded; counted_in raw, not_counted_in agg (the rollups), so the "
                "archive answers a range they touch (rule; source says which answered)",
            },
            "agreement": {
                "type": "object",
                "description": "status agree | disagree | not checked: page views and visitors per UTC day "
                "of the days the range touches, agg against raw over the log the stream jobs read; days: "
                "each day that differs with both sides' numbers and its late events; reason when not "
                "checked; bound: the largest range checked. figures: the same per figure "
                "(pageviews_visitors, sessions, goal_events, custom_events checked per UTC day; breakdowns, "
                "engagement, funnels not checked), each with status, checked_days, compared or reason, and "
                "days (day, raw, agg); the status disagrees if any figure does",
            },
            "definitions": {"type": "object", "description": "session_gap_s, engaged_bounce_ms, watermark_s"},
            "definitions_version": {
                "type": "integer",
                "nullable": True,
                "description": "the stored definitions version the numbers were made with (`tally "
                "definitions`, `tally whatif`); null before version 1 is recorded (the stream jobs' "
                "first start)",
            },
            "definitions_fingerprint": {"type": "string", "description": "a fingerprint of the definitions"},
            "erasure": {
                "type": "integer",
                "nullable": True,
                "description": "the version of the site's latest erasure (its events received until then "
                "were erased: DELETE /api/v1/sites/{site_id}?erase_events=true); null if none",
            },
        },
    },
    "Segment": {
        "type": "object",
        "required": ["id", "name", "filters"],
        "properties": {
            "id": {"type": "integer", "description": 'Plausible\'s v2 query takes ["is", "segment", [id]]'},
            "name": {"type": "string"},
            "filters": {"type": "array", "items": {}, "description": "Plausible's v2 filter list"},
        },
    },
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"type": "string", "description": "starts with the parameter at fault"}},
    },
}


def openapi_document() -> JSON:
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Tally stats API",
            "version": "1",
            "description": "Web analytics numbers for a site. Definitions: DESIGN.md, 'Definitions'.",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": {
            "/api/v1/stats/aggregate": _operation(
                "Top-line metrics for a range",
                [*RANGE, "compare"],
                _ok(_or_with_meta(_schema("Aggregate")), "one object keyed by metric"),
            ),
            "/api/v1/stats/timeseries": _operation(
                "Page views and visitors per bucket, empty buckets as zero",
                [*RANGE, "interval", "compare"],
                _ok(_or_with_meta({"type": "array", "items": _schema("Point")}), "one point per bucket"),
            ),
            "/api/v1/stats/breakdown": _operation(
                "Page views and visitors per value of a dimension, most visitors first; by=path adds "
                "each page's time_on_page_s and scroll_depth",
                [*RANGE, "by", "goal", "breakdown_limit"],
                _ok(
                    _or_with_meta(
                        {"type": "array", "items": {"oneOf": [_schema("BreakdownRow"), _schema("EventRow")]}}
                    ),
                    "one row per value: BreakdownRow for a dimension, EventRow for event:name and prop:KEY",
                ),
            ),
            "/api/v1/stats/goals": _operation(
                "Each goal of the site: unique conversions, events, conversion rate, revenue",
                RANGE,
                _ok(
                    _or_with_meta({"type": "array", "items": _schema("Goal")}), "one object per goal, by name"
                ),
            ),
            "/api/v1/stats/vitals": _operation(
                "Web Vitals (LCP, CLS, INP, FCP, TTFB): p50, p75, p95 and the share of page views rated "
                "good, needs improvement or poor, for the site or by page, device, country or browser "
                "(a Tally extension; `site_id` is accepted for `site`; no filters)",
                ["site", "from", "to", "period", "source", "meta", "vitals_property", "breakdown_limit"],
                _ok(
                    _or_with_meta({"type": "array", "items": _schema("VitalsRow")}),
                    "one row per value, most measured first",
                ),
            ),
            "/api/v1/stats/funnel": _operation(
                "Visitors and sessions reaching each step of a funnel, with drop-off and conversion",
                [*RANGE, "steps", "funnel"],
                _ok(_schema("Funnel"), "one row per step, in order"),
            ),
            "/api/v1/stats/journeys": _operation(
                "Where visits go next from a page (or their entry), or came from into it, in up to "
                f"{JOURNEY_MAX_STEPS} steps; visits and visitors per path, most visitors first",
                [
                    "site",
                    "from",
                    "to",
                    "period",
                    "source",
                    "meta",
                    "journey_page",
                    "journey_direction",
                    "journey_steps",
                    "journey_group",
                    "journey_min_visitors",
                    "journey_limit",
                    "journey_filters",
                ],
                _ok(_or_with_meta({"type": "array", "items": _schema("JourneyRow")}), "one row per path"),
            ),
            "/api/v1/stats/retention": _operation(
                "Weekly cohorts by first visit (the site's weeks) and how many came back in each later week, "
                f"up to {RETENTION_MAX_WEEKS} weeks; which visitor identity the numbers rest on. `site_id` "
                "(Plausible's spelling) is taken for `site`",
                ["site", "source", "retention_weeks", "retention_until"],
                _ok(_schema("Retention"), "the cohorts"),
            ),
            "/api/v1/stats/realtime": _operation(
                "Visitors and page views in the last 5 minutes; with breakdown, the last 30 minutes by it",
                ["site", "source", "realtime_breakdown", "breakdown_limit", "meta"],
                _ok(
                    {"anyOf": [_or_with_meta(_schema("Realtime")), _schema("RealtimeBreakdown")]},
                    "live counts (Realtime), or the last 30 minutes by the breakdown (RealtimeBreakdown)",
                ),
            ),
            "/api/v1/sessions": _operation(
                "Sessions that start in the range, newest first",
                [*RANGE, "sessions_limit"],
                _ok(_or_with_meta({"type": "array", "items": _schema("Session")}), "one object per session"),
            ),
            "/api/v2/query": plausible_query_operation(),
            "/api/v1/alerts": _operation(
                "The site's alert rules and its latest alerts (newest first) with their delivery's status; "
                "needs the operator's key or an admin's or owner's key for the site",
                ["site", "alerts_limit"],
                _ok(_schema("Alerts"), "rules and alerts"),
            ),
            "/api/v1/alerts/backtest": alert_backtest_operation(),
            "/api/v1/query": sql_query_operation(),
            "/api/v1/whatif/goals": whatif_goals_operation(),
            "/api/v1/imports": imports_operations(),
            "/api/v1/segments": segments_operations(),
            "/api/v1/export/events": export_operation(),
            "/api/v1/openapi.json": {
                "get": {
                    "summary": "This document",
                    "security": [],
                    "responses": {"200": _ok({"type": "object"}, "the OpenAPI document")},
                }
            },
        }
        | management_paths()  # settings and accounts (dashboard/http_api/manage.py)
        | sites_paths()  # Plausible's Sites API (dashboard/http_api/sites_api.py)
        | annotations_paths(),  # notes on the chart (dashboard/http_api/annotations.py)
        "components": {
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": (
                        "the operator's API key (every site) or a team member's key (tally users "
                        "keys create; only its sites; read-only unless made with scope manage)"
                    ),
                }
            },
            "parameters": PARAMETERS,
            "schemas": SCHEMAS | PLAUSIBLE_SCHEMAS | IMPORT_SCHEMAS,
            "responses": {
                "BadParameter": _ok(
                    _schema("Error"), "a parameter is missing or invalid; the error names it"
                ),
                "Unauthorized": _ok(_schema("Error"), "no, a wrong or a revoked API key"),
                "Forbidden": _ok(
                    _schema("Error"),
                    "a team member's API key asking for a site outside its scope, or importing "
                    "into or changing the segments of a site its user is no admin or owner of",
                ),
                "StoreUnavailable": _ok(_schema("Error"), "the analytics store is not answering"),
                "NotFound": _ok(_schema("Error"), "no such site or segment"),
                "Conflict": _ok(_schema("Error"), "the site already has a segment of that name"),
            },
        },
    }


# --- imported history (dashboard/http_api/imports.py) ----------------------------------------------

IMPORT_SCHEMAS: dict[str, JSON] = {
    "ImportList": {
        "type": "object",
        "required": ["site", "imports", "native_from"],
        "properties": {
            "site": {"type": "string"},
            "imports": {"type": "array", "items": _schema("ImportedFile")},
            "native_from": {
                "type": "string",
                "format": "date",
                "nullable": True,
                "description": "the site's first local day with its own events: imported days from it "
                "on are not used (none: every imported day is)",
            },
        },
    },
    "ImportedFile": {
        "type": "object",
        "required": ["file", "first_day", "last_day", "rows"],
        "properties": {
            "id": {
                "type": "string",
                "description": "the file's id (a hash of its bytes), listed by GET: what DELETE names",
            },
            "file": {"type": "string"},
            "origin": {"type": "string", "enum": list(imports.ORIGINS)},
            "first_day": {"type": "string", "format": "date"},
            "last_day": {"type": "string", "format": "date"},
            "rows": {"type": "integer", "minimum": 0, "description": "daily rows, per day, dimension, value"},
        },
    },
    "ImportRemoved": {
        "type": "object",
        "required": ["site", "removed"],
        "properties": {"site": {"type": "string"}, "removed": _schema("ImportedFile")},
    },
    "ImportResult": {
        "type": "object",
        "required": ["site", "imported", "already_imported", "not_used", "note"],
        "properties": {
            "site": {"type": "string"},
            "imported": {"type": "array", "items": _schema("ImportedFile")},
            "already_imported": {
                "type": "array",
                "items": {"type": "string"},
                "description": "files imported before: nothing written",
            },
            "not_used": {
                "type": "object",
                "nullable": True,
                "required": ["first_day", "last_day"],
                "properties": {
                    "first_day": {"type": "string", "format": "date"},
                    "last_day": {"type": "string", "format": "date"},
                },
                "description": "imported days the site's own events cover: reports never use them",
            },
            "note": {"type": "string", "nullable": True},
        },
    },
}


def imports_operations() -> JSON:
    upload_parameters = [
        _ref("site"),
        {
            "name": "origin",
            "in": "query",
            "required": True,
            "description": "whose export the body is (the CLI's --from)",
            "schema": {"type": "string", "enum": list(imports.ORIGINS)},
        },
        {
            "name": "name",
            "in": "query",
            "required": False,
            "description": "the file's name, e.g. imported_pages_20260101_20261031.csv (Plausible's CSVs "
            "are told apart by it; a zip's members carry their own)",
            "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[^/\\\\]+$"},
        },
    ]
    return {
        "get": {
            "summary": "The files imported into the site's history (tally import, the dashboard, this API); "
            "needs the operator's key or an admin's or owner's key for the site",
            "parameters": [_ref("site")],
            "responses": {"200": _ok(_schema("ImportList"), "one entry per imported file"), **ERRORS},
        },
        "post": {
            "summary": "Import an export (Plausible's CSV export, a GA4 CSV export) into the site's history "
            "as daily aggregates; needs the operator's key or an admin's or owner's key for the site",
            "parameters": upload_parameters,
            "requestBody": {
                "required": True,
                "description": f"the export file's bytes: a CSV or a zip of CSVs, at most "
                f"{imports_api.MAX_UPLOAD_BYTES // 2**20} MiB",
                "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
            },
            "responses": {
                "201": _ok(_schema("ImportResult"), "files written"),
                "200": _ok(_schema("ImportResult"), "every file was imported before: nothing written"),
                **ERRORS,
                "413": _ok(_schema("Error"), "the body is too large: use tally import"),
            },
        },
        "delete": {
            "summary": "Take one imported file out of the site's history; needs the operator's key or an "
            "admin's or owner's key for the site",
            "parameters": [
                _ref("site"),
                {
                    "name": "file",
                    "in": "query",
                    "required": True,
                    "description": "the imported file's id, or its name when one file of the site has it",
                    "schema": {"type": "string", "minLength": 1},
                },
            ],
            "responses": {"200": _ok(_schema("ImportRemoved"), "the file removed"), **ERRORS},
        },
    }


# --- saved segments (dashboard/http_api/segments.py) ------------------------------------------------

SEGMENT_FILTERS_EXAMPLE = [["is", "visit:channel", ["Organic Search"]], ["is", "visit:country", ["DE"]]]


def segment_body(required: list[str]) -> JSON:
    return {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": required,
                    "properties": {
                        "name": {"type": "string", "minLength": 1, "maxLength": 120},
                        "filters": {
                            "type": "array",
                            "minItems": 1,
                            "items": {"type": "array"},
                            "description": "Plausible's v2 filters (the v2 query's `filters`), e.g. "
                            + str(SEGMENT_FILTERS_EXAMPLE).replace("'", '"'),
                        },
                    },
                }
            }
        },
    }


def segments_operations() -> JSON:
    """List with any key that reads the site; create, change and delete with the operator's key or
    a member's key whose user is admin or owner of the site (a viewer's: 403)."""
    segment, changes = _ok(_schema("Segment"), "the segment"), {
        **ERRORS, "404": {"$ref": "#/components/responses/NotFound"},
    }  # fmt: skip
    site, segment_id = _ref("site"), _ref("segment_id")
    return {
        "get": {
            "summary": "The site's saved segments, by name",
            "parameters": [site],
            "responses": {
                "200": _ok({"type": "array", "items": _schema("Segment")}, "the segments"),
                **changes,
            },
        },
        "post": {
            "summary": "Save a segment (admins and owners)",
            "parameters": [site],
            "requestBody": segment_body(["name", "filters"]),
            "responses": {"201": segment, **changes, "409": {"$ref": "#/components/responses/Conflict"}},
        },
        "patch": {
            "summary": "Rename a segment and/or replace its filters (admins and owners)",
            "parameters": [site, segment_id],
            "requestBody": segment_body([]),
            "responses": {"200": segment, **changes, "409": {"$ref": "#/components/responses/Conflict"}},
        },
        "delete": {
            "summary": "Delete a segment (admins and owners); answers the segment deleted",
            "parameters": [site, segment_id],
            "responses": {"200": segment, **changes},
        },
    }


# --- Plausible's Stats API v2 (dashboard/http_api/plausible/api.py, docs/plausible-api.md) -------------

PLAUSIBLE_SCHEMAS: dict[str, JSON] = {
    "PlausibleQuery": {
        "type": "object",
        "description": "Plausible's Stats API v2 query (https://plausible.io/docs/stats-api); what Tally "
        "supports of it: docs/plausible-api.md. Times are UTC.",
        "required": ["site_id", "metrics", "date_range"],
        "additionalProperties": False,
        "properties": {
            "site_id": {"type": "string", "minLength": 1, "maxLength": 253},
            "metrics": {
                "type": "array",
                "minItems": 1,
                "maxItems": len(plausible.METRICS),
                "uniqueItems": True,
                "items": {"type": "string", "enum": list(plausible.METRICS)},
            },
            "date_range": {
                "oneOf": [
                    {
                        "type": "string",
                        "pattern": plausible.RELATIVE_RANGE_PATTERN,
                        "description": "day, month, year, all; Nd: the N days before `date` (1-5000); "
                        "Nmo: the N whole months before `date`'s month (1-100)",
                    },
                    {
                        "type": "array",
                        "minItems": 2,
                        "maxItems": 2,
                        "items": {"type": "string", "example": "2026-11-10"},
                        "description": "two ISO-8601 dates (both days included) or date-times",
                    },
                ]
            },
            "date": {
                "type": "string",
                "format": "date",
                "description": "the reference day of relative ranges (default: today)",
            },
            "dimensions": {
                "type": "array",
                "maxItems": 1,
                "items": {
                    "type": "string",
                    "description": "one of "
                    + ", ".join(
                        [
                            *plausible.DIMENSIONS,
                            *plausible.TIME_DIMENSIONS,
                            plausible.GOAL_DIMENSION,
                            plausible.NAME_DIMENSION,
                        ]
                    )
                    + f", {plausible.PROPS_DIMENSION}KEY",
                },
            },
            "filters": {
                "type": "array",
                "items": {"type": "array"},
                "description": "[operator, dimension, [values]] with is, is_not, contains, contains_not, "
                "matches, matches_not on " + ", ".join(plausible.FILTER_DIMENSIONS) + ", "
                f"{plausible.PROPS_DIMENSION}KEY (the events counted) and on "
                + ", ".join(sorted(plausible.SESSION_DIMENSIONS))
                + ' (the visits counted); ["and"|"or", [filters]], ["not", filter]; '
                f'["is", "{plausible.GOAL_DIMENSION}", [GOAL]] at the top level',
            },
            "order_by": {
                "type": "array",
                "items": {"type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "string"}},
            },
            "include": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "imports": {
                        "type": "boolean",
                        "description": "add the imported history (whole local days before the "
                        "site's own events start, no filters)",
                    },
                    "time_labels": {"type": "boolean"},
                    "total_rows": {"type": "boolean"},
                    "comparisons": {
                        "type": "object",
                        "description": "mode: previous_period, year_over_year or custom (with date_range: "
                        "[date, date]); each result gains comparison {dimensions, metrics, change}",
                        "properties": {
                            "mode": {
                                "type": "string",
                                "enum": ["previous_period", "year_over_year", "custom"],
                            },
                            "date_range": {"type": "array", "items": {"type": "string", "format": "date"}},
                        },
                    },
                },
            },
            "pagination": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "limit": {"type": "integer", "minimum": 1, "maximum": plausible.MAX_LIMIT},
                    "offset": {"type": "integer", "minimum": 0},
                },
            },
        },
    },
    "PlausibleResult": {
        "type": "object",
        "required": ["results", "meta", "query"],
        "properties": {
            "results": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["metrics", "dimensions"],
                    "properties": {"metrics": {"type": "array"}, "dimensions": {"type": "array"}},
                },
            },
            "meta": {
                "type": "object",
                "description": "source (agg or raw), total_rows, time_labels, imports_included, "
                "imports_skip_reason…, and Tally's provenance fields (components/schemas/Provenance): "
                "log, watermark, late_events, agreement, definitions_version",
            },
            "query": {"type": "object", "description": "the query as answered"},
        },
    },
}


def alert_backtest_operation() -> JSON:
    return {
        "post": {
            "summary": "When an alert rule would have fired over the archive's history, before it is saved "
            "(the streaming evaluation's semantics; see docs/architecture.md, Alerts); needs the "
            "operator's key or an admin's or owner's key for the rule's site",
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _schema("AlertBacktestRequest")}},
            },
            "responses": {
                "200": _ok(_schema("AlertBacktest"), "the windows it would have fired for"),
                **ERRORS,
            },
        }
    }


def sql_query_operation() -> JSON:
    """POST /query (dashboard/http_api/sql_query.py)."""
    return {
        "post": {
            "summary": "Read-only SQL over the raw archive (Explore's guard and limits; rows capped at "
            "`limit`, default 100); the operator's key only",
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _schema("SqlQueryRequest")}},
            },
            "responses": {"200": _ok(_schema("SqlQueryResult"), "the columns and the first rows"), **ERRORS},
        }
    }


def whatif_goals_operation() -> JSON:
    """GET /whatif/goals (dashboard/http_api/whatif.py)."""
    names = {
        "type": "array",
        "items": {"type": "string", "minLength": 1},
        "maxItems": whatif_api.MAX_PROPOSED,
    }
    proposal = [
        _parameter("add", "A proposed event goal (a custom event's name); repeatable.", names),
        _parameter("add_page", 'A proposed page goal (a path pattern, "/checkout/*"); repeatable.', names),
        _parameter("remove", "A goal of the site proposed for removal (its name); repeatable.", names),
        _parameter(
            "currency", "The added goals count revenue in this ISO-4217 currency (EUR).", {"type": "string"}
        ),
    ]
    for item in proposal[:3]:
        item |= {"style": "form", "explode": True}
    sides = {"type": "array", "items": _schema("Goal")}
    answer = {
        "type": "object",
        "required": ["site", "from", "to", "current", "proposed"],
        "properties": {
            "site": {"type": "string"},
            "from": {"type": "string", "format": "date-time"},
            "to": {"type": "string", "format": "date-time"},
            "current": sides,
            "proposed": sides,
        },
    }
    return {
        "get": {
            "summary": "The site's goals' numbers now and with proposed goals added or removed, side by side "
            "(read time, agg; nothing is written). The operator's key or an admin of the site.",
            "parameters": [_ref("site"), _ref("from"), _ref("to"), _ref("period"), *proposal],
            "responses": {
                "200": _ok(answer, "both sides, each goal by name"),
                **ERRORS,
                "404": _ok(_schema("Error"), "no such site"),
            },
        }
    }


def plausible_query_operation() -> JSON:
    return {
        "post": {
            "summary": "Plausible's Stats API v2 query: metrics over a range, by one dimension, filtered",
            "parameters": [
                {
                    "name": "source",
                    "in": "query",
                    "required": False,
                    "description": "Tally's: agg (default, where it answers) or raw",
                    "schema": {"type": "string", "enum": list(parameters.SOURCES)},
                }
            ],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _schema("PlausibleQuery")}},
            },
            "responses": {
                "200": _ok(_schema("PlausibleResult"), "Plausible's response shape"),
                **ERRORS,
                "404": _ok(_schema("Error"), "no such site"),
                "413": _ok(_schema("Error"), "the body is over 64 KiB"),
            },
        }
    }


EXPORT_PARAMETERS = (
    *("site", "from", "to", "period", "filters"),
    *("metric", "export_format", "export_goal", "property", "value"),
)


def export_operation() -> JSON:
    """`GET /api/v1/export/events`: a file, its figure in the headers (dashboard/http_api/export.py)."""
    header = {"schema": {"type": "string"}}
    file = {"schema": {"type": "string", "format": "binary"}}
    return {
        "get": {
            "summary": "The archived events behind a figure (the aggregate's parameters), streamed as "
            "Parquet or CSV with kafka_partition, kafka_offset and definitions_version",
            "parameters": [_ref(name) for name in EXPORT_PARAMETERS],
            "responses": {
                "200": {
                    "description": "the events; the headers say what they add up to",
                    "headers": {
                        "X-Tally-Figure": {**header, "description": "METRIC=VALUE, e.g. pageviews=1234"},
                        "X-Tally-Figure-Rule": {**header, "description": "how the rows make the figure"},
                        "X-Tally-Rows": {**header, "description": "the rows the file holds"},
                        "X-Tally-Visitors": {**header, "description": "distinct (UTC day, visitor_id)"},
                        "X-Tally-Definitions-Version": {**header, "description": "0: none recorded yet"},
                    },
                    "content": {"application/vnd.apache.parquet": file, "text/csv": file},
                },
                **ERRORS,
                "429": {
                    **_ok(_schema("Error"), "every export slot (2 per dashboard process) is streaming"),
                    "headers": {"Retry-After": {**header, "description": "seconds to wait, 10"}},
                },
            },
        }
    }
