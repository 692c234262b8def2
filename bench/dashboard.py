"""Dashboard and stats API latency over a large archive: p50/p95 of every Dash callback and
every API endpoint, measured in-process through the Flask server (HTTP parsing and network
excluded; everything from the request handler down, Dash serialisation and the store
included).

The archive is synthetic and made by ClickHouse itself (INSERT ... SELECT FROM numbers()),
one site, spread over 30 days: visitors with sessions of a few page views, a Zipf-like page
popularity, referrers, countries and clients from small lists; of every 200 rows 10 are
engagement events, 5 Signup events with a `plan` property and 1 a Purchase with revenue in EUR
(the site has goals Signup, Purchase and the page goal /blog/*). Rows carry a Kafka partition
no topic has, so the archiver's resume-from-archive offsets never see them.

Needs the store (`tally up -d`, or TALLY_CLICKHOUSE_URL). Re-runs reuse the rows already
there. `python -m bench.dashboard [--events N] [--rounds R]` prints the figures;
`tally bench` calls run_dashboard_bench().
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta

from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from archiver.rows import ARCHIVE_COLUMNS
from dashboard.app import build_app
from dashboard.periods import Period, period
from loadgen.runner import percentile
from loadgen.traffic import PAGES
from loadgen.traffic import PARSED_CLIENTS as CLIENTS
from storage import goals as goal_store
from storage import segments as segment_store
from storage.client import connect
from storage.rollup_backfill import backfill_rollups
from storage.schema import apply_migrations
from storage.sites import add_site
from storage.tables import (
    ARCHIVE_DAYS,
    ARCHIVE_OFFSETS_DAY,
    EVENTS,
    FUNNEL_DAYS,
    ROLLUP_DAY,
    ROLLUPS,
    SESSIONS,
    SYNTHETIC_PARTITION,
)
from tally.settings import Settings


def bench_site(events: int) -> str:
    """One synthetic site per archive size, so that sizes can be compared in one store; `v2`:
    the archive's shape with custom events, revenue and engagement events."""
    return f"dashboard-{events}.v2.bench.example.com"


# Above this many events only the agg path is measured: raw reads scan the archive, seconds
# per request at 100M, and the claim at that size is about the rollups.
RAW_MEASURED_UP_TO = 20_000_000
CHUNK = 1_000_000  # rows per INSERT: bounds the engine's memory while sorting a part
SPAN = timedelta(days=30)
PAGEVIEWS_PER_SESSION = 3
SESSIONS_PER_VISITOR = 3

REFERRERS = ["", "", "", "google.com", "news.ycombinator.com", "reddit.com", "duckduckgo.com", "github.com"]
UTM_SOURCES = ["", "", "", "", "newsletter", "twitter", "producthunt"]
COUNTRIES = ["US", "DE", "FR", "GB", "IN", "BR", "CA", "JP", "CH", "NL", "ES", "IT", "AU", "SE", "PL", ""]

# Row `number` of `count`: times grow with the number, so a session's page views (consecutive
# numbers) are seconds apart and a visitor's sessions are spread over the month.
_SYNTHETIC_EVENTS = f"""
INSERT INTO events ({", ".join(ARCHIVE_COLUMNS)})
SELECT
    generateUUIDv4(number) AS event_id, 1 AS schema_version, {{site:String}} AS site,
    multiIf(number % 20 = 7, 'engagement', number % 40 = 13, 'Signup', number % 200 = 17, 'Purchase',
            'pageview') AS name,
    ts, ts AS received_at, concat('https://', {{site:String}}, path) AS url,
    {{site:String}} AS hostname, path,
    if(referrer_domain = '', '', concat('https://', referrer_domain, '/')) AS referrer, referrer_domain,
    utm_source, '' AS utm_medium, '' AS utm_campaign, '' AS utm_content, '' AS utm_term,
    visitor_id, visitor_id AS ip_hash, country, client.2 AS browser, client.3 AS os, client.1 AS device,
    if(client.1 = 'desktop', 1920, 390) AS screen_width, 'en' AS language,
    if(name = 'Signup', map('plan', ['free', 'pro', 'team'][1 + cityHash64(number, 6) % 3]), map()) AS props,
    if(name = 'Purchase', toString(10 + number % 90), '') AS revenue_amount,
    if(name = 'Purchase', 'EUR', '') AS revenue_currency,
    if(name = 'engagement', toUInt8(number % 101), 0) AS scroll_depth,
    if(name = 'engagement', toUInt32(1000 * (number % 60)), 0) AS engagement_ms,
    -- Web Vitals on page views, as the tracker reports them (issue 35)
    if(name = 'pageview', toUInt32(600 + cityHash64(number, 7) % 3400), NULL) AS lcp_ms,
    if(name = 'pageview', toUInt32(cityHash64(number, 8) % 300), NULL) AS cls_milli,
    if(name = 'pageview', toUInt32(40 + cityHash64(number, 9) % 460), NULL) AS inp_ms,
    if(name = 'pageview', toUInt32(300 + cityHash64(number, 10) % 2200), NULL) AS fcp_ms,
    if(name = 'pageview', toUInt32(80 + cityHash64(number, 11) % 900), NULL) AS ttfb_ms,
    {{partition:UInt16}} AS kafka_partition, number AS kafka_offset
FROM
(
    SELECT
        number,
        intDiv(number, {{per_session:UInt32}}) AS session,
        {{start:DateTime64(3, 'UTC')}}
            + toIntervalMillisecond(intDiv(number * {{span_ms:UInt64}}, {{count:UInt64}})) AS ts,
        hex(cityHash64(session % {{visitors:UInt64}})) AS visitor_id,
        {{pages:Array(String)}}[1 + toUInt32(floor(length({{pages:Array(String)}})
            * pow((cityHash64(number, 1) % 10000) / 10000, 2)))] AS path,
        {{referrers:Array(String)}}[1 + cityHash64(session, 2) % length({{referrers:Array(String)}})]
            AS referrer_domain,
        {{utm:Array(String)}}[1 + cityHash64(session, 3) % length({{utm:Array(String)}})] AS utm_source,
        {{countries:Array(String)}}[1 + cityHash64(visitor_id, 4) % length({{countries:Array(String)}})]
            AS country,
        {{clients:Array(Tuple(String, String, String))}}[
            1 + cityHash64(visitor_id, 5) % length({{clients:Array(Tuple(String, String, String))}})
        ] AS client
    FROM numbers({{first:UInt64}}, {{rows:UInt64}})
)
"""


def ensure_archive(settings: Settings, count: int, now: datetime) -> dict[str, float]:
    """`count` synthetic page views of bench_site(count) in the 30 days before `now` (kept if there)."""
    site = bench_site(count)
    client = connect(settings, send_receive_timeout=3600)
    existing = int(
        client.query(
            "SELECT count() FROM events WHERE site = {site:String} AND kafka_partition = {p:UInt16}",
            parameters={"site": site, "p": SYNTHETIC_PARTITION},
        ).result_rows[0][0]
    )
    if existing == count:
        return {"events": count, "generated_s": 0.0, "reused": True}
    if existing:
        client.command(
            "DELETE FROM events WHERE site = {site:String} AND kafka_partition = {p:UInt16}",
            parameters={"site": site, "p": SYNTHETIC_PARTITION},
        )
    # derived from the old rows; archive_days and archive_offsets_day are kept by views that see
    # inserts, not deletions
    for table in (*ROLLUPS, SESSIONS, ARCHIVE_DAYS, ARCHIVE_OFFSETS_DAY, FUNNEL_DAYS):
        client.command(f"DELETE FROM {table} WHERE site = {{site:String}}", parameters={"site": site})
    started = time.monotonic()
    parameters = {
        "site": site,
        "partition": SYNTHETIC_PARTITION,
        "per_session": PAGEVIEWS_PER_SESSION,
        "start": now - SPAN,
        "span_ms": int(SPAN.total_seconds() * 1000),
        "count": count,
        "visitors": max(1, count // (PAGEVIEWS_PER_SESSION * SESSIONS_PER_VISITOR)),
        "pages": PAGES,
        "referrers": REFERRERS,
        "utm": UTM_SOURCES,
        "countries": COUNTRIES,
        "clients": CLIENTS,
    }
    for first in range(0, count, CHUNK):
        client.command(
            _SYNTHETIC_EVENTS, parameters={**parameters, "first": first, "rows": min(CHUNK, count - first)}
        )
    return {"events": count, "generated_s": round(time.monotonic() - started, 1), "reused": False}


BENCH_GOALS = (
    {"event_name": "Signup"},
    {"event_name": "Purchase", "currency": "EUR"},
    {"page_pattern": "/blog/*"},
)
# A saved segment the Overview is asked under (issue 31's "filtered by … a saved segment").
BENCH_SEGMENT = ("Newsletter readers", [["is", "visit:utm_source", ["newsletter"]]])


def ensure_goals(settings: Settings, site_name: str) -> None:
    """The site registered, with the goals the synthetic events convert on."""
    client = connect(settings)
    add_site(client, site_name)
    existing = {goal.name for goal in goal_store.list_goals(client, site_name)}
    for fields in BENCH_GOALS:
        goal = goal_store.make_goal(site_name, **fields)
        if goal.name not in existing:
            goal_store.add_goal(client, goal)
    name, filters = BENCH_SEGMENT
    if name not in {segment.name for segment in segment_store.list_segments(client, site_name)}:
        segment_store.add_segment(client, site_name, name, filters)


def ensure_derived(settings: Settings, site_name: str) -> dict[str, float]:
    """The rollups and sessions of `site_name` (kept if there; `tally replay` drops them, the
    archive keeps its synthetic rows, so they are rebuilt here when missing), built from the
    archive by storage/rollup_backfill.py: the rows the stream jobs' `activity` query writes."""
    client = connect(settings, send_receive_timeout=3600)
    site = {"site": site_name}
    derived = client.query(f"SELECT count() FROM {ROLLUP_DAY} WHERE site = {{site:String}}", parameters=site)
    if derived.result_rows[0][0] and not _derived_before_visit_paths(client, site_name):
        return {"derived_s": 0.0, "reused": True}
    started = time.monotonic()
    for table in (*ROLLUPS, SESSIONS):  # derived by an older version: from scratch, not added to
        client.command(
            f"ALTER TABLE {table} DELETE WHERE site = {{site:String}} SETTINGS mutations_sync = 2",
            parameters=site,
        )
    first, last = client.query(
        f"SELECT toDate(min(ts)), toDate(max(ts)) FROM {EVENTS} WHERE site = {{site:String}}", parameters=site
    ).result_rows[0]
    backfill_rollups(client, site_name, first, last + timedelta(days=1))
    return {"derived_s": round(time.monotonic() - started, 1), "reused": False}


def _derived_before_visit_paths(client: Client, site_name: str) -> bool:
    """Whether the site's sessions were derived before migration 0063 or 0071 (a visit without
    `paths` or `journey`: every visit has a page view): the stats engine's planner and the
    journeys report then send what reads them to the archive, and the bench would measure that
    fallback instead of what a fresh derivation answers."""
    found = client.query(
        f"SELECT 1 FROM {SESSIONS} WHERE site = {{site:String}} AND (empty(paths) OR empty(journey)) "
        "AND is_deleted = 0 LIMIT 1",
        parameters={"site": site_name},
    )
    return bool(found.result_rows)


def _callback(callbacks: Mapping[str, dict], output: str, values: dict[str, object]) -> dict:
    """The body Dash's renderer posts to /_dash-update-component for the callback of `output` (a
    key of the app's callback map, e.g. `top-metrics.children`), built from what the callback
    declares: every input and state it names, with `values` by `id.property` (None otherwise, as
    for a component the page has not filled). A callback that is gone, or a value for a property
    it no longer reads, fails here, naming it, rather than as a 400 from the server."""
    if output not in callbacks:
        raise KeyError(f"the dashboard has no callback for {output!r}")
    declared = callbacks[output]
    names = [f"{item['id']}.{item['property']}" for item in (*declared["inputs"], *declared["state"])]
    unknown = set(values) - set(names)
    if unknown:
        raise KeyError(f"the callback for {output!r} reads no {sorted(unknown)}")

    def prop(item: dict) -> dict:
        key = f"{item['id']}.{item['property']}"
        return {"id": item["id"], "property": item["property"], "value": values.get(key)}

    outputs = [
        dict(zip(("id", "property"), key.rsplit(".", 1), strict=True))
        for key in output.strip(".").split("...")
    ]
    changed = next((key for key in values if key in names[: len(declared["inputs"])]), names[0])
    return {
        "output": output,
        "outputs": outputs[0] if len(outputs) == 1 else outputs,
        "inputs": [prop(item) for item in declared["inputs"]],
        "state": [prop(item) for item in declared["state"]],
        "changedPropIds": [changed],
    }


def callback_requests(callbacks: Mapping[str, dict], site: str, shown: dict[str, str]) -> dict[str, dict]:
    """One request per Dash callback of the Overview and Explore tabs, as the page makes them
    (bodies built from the app's `callbacks` map: _callback)."""
    unfiltered = {"site.value": site, "period.data": shown}  # for the callbacks that take no filters
    common = {**unfiltered, "filters.data": {}}
    filtered = {**common, "filters.data": {"path": "/pricing"}}

    def request(outputs: list[tuple[str, str]], inputs: dict[str, object], state: dict | None = None) -> dict:
        keys = [f"{component}.{name}" for component, name in outputs]
        output = keys[0] if len(keys) == 1 else ".." + "...".join(keys) + ".."
        return _callback(callbacks, output, {**inputs, **(state or {})})

    return {
        "site list": request(
            [("site", "options"), ("site", "value")], {"clock.n_intervals": 1}, {"site.value": site}
        ),
        "top metrics": request([("top-metrics", "children")], common),
        "top metrics, filtered": request([("top-metrics", "children")], filtered),
        "top metrics, filtered by source": request(
            [("top-metrics", "children")], {**common, "filters.data": {"referrer_domain": "google.com"}}
        ),
        "top metrics, filtered by UTM source": request(
            [("top-metrics", "children")], {**common, "filters.data": {"utm_source": "newsletter"}}
        ),
        "top metrics, filtered by country": request(
            [("top-metrics", "children")], {**common, "filters.data": {"country": "DE"}}
        ),
        "top metrics, saved segment": request(
            [("top-metrics", "children")], {**common, "filters.data": {"segment": BENCH_SEGMENT[0]}}
        ),
        "top pages, filtered by source": request(
            [("pages-list", "children")],
            {**common, "filters.data": {"referrer_domain": "google.com"}, "pages-by.value": "path"},
        ),
        "chart": request([("main-chart", "figure")], {**common, "chart-metric.value": "visitors"}),
        "chart, filtered": request(
            [("main-chart", "figure")], {**filtered, "chart-metric.value": "visitors"}
        ),
        "top pages": request([("pages-list", "children")], {**common, "pages-by.value": "path"}),
        "entry pages": request([("pages-list", "children")], {**common, "pages-by.value": "entry_path"}),
        "referrers": request(
            [("sources-list", "children")], {**common, "sources-by.value": "referrer_domain"}
        ),
        "devices": request([("devices-list", "children")], {**common, "devices-by.value": "device"}),
        "countries + map": request([("country-map", "figure"), ("countries-list", "children")], common),
        "campaigns (utm_medium)": request(
            [("campaigns-list", "children")], {**common, "campaigns-by.value": "utm_medium"}
        ),
        "languages": request([("languages-list", "children")], {**common, "languages-by.data": "language"}),
        "screen sizes": request(
            [("devices-list", "children")], {**common, "devices-by.value": "screen_size"}
        ),
        "goals": request([("goals-list", "children")], {**common, "goals-version.data": 0}),
        "goals, filtered by a goal": request(
            [("goals-list", "children")],
            {**common, "filters.data": {"goal": "Signup"}, "goals-version.data": 0},
        ),
        "property keys": request(
            [("property-key", "options"), ("property-key", "value")], common, {"property-key.value": "plan"}
        ),
        "properties (plan)": request(
            [("properties-list", "children")], {**common, "property-key.value": "plan"}
        ),
        "funnel (3 steps)": request(
            [("funnel-result", "children")],
            {"funnel-run.n_clicks": 1, **common, "tabs.value": "funnel"},
            {"funnel-steps.value": "/\n/blog/*\nSignup"},
        ),
        "live visitors": request(
            [("live-visitors", "children")], {"site.value": site, "refresh.n_intervals": 1}
        ),
        "live per minute + total": request(
            [("total-pageviews", "children"), ("pageviews-per-minute", "figure")],
            {"site.value": site, "refresh.n_intervals": 1},
        ),
        "rate limiting": request([("rate-limits", "children")], {"clock.n_intervals": 1}),
        "explore raw totals": request(
            [("explore-raw-totals", "children")],
            {
                **unfiltered,
                "explore-path.value": None,
                "explore-country.value": None,
                "explore-device.value": None,
                "tabs.value": "explore",  # computed only while the tab is shown
            },
        ),
        # The tabs of issue 35, each computed when shown (`tabs.value`), with the page's defaults.
        "journeys (next 3 steps from the entry)": request(
            [("journeys-result", "children"), ("journeys-sankey", "figure"), ("journeys-sankey", "style")],
            {
                **common,
                "tabs.value": "journeys",
                "journeys-page.value": None,
                "journeys-direction.value": "next",
                "journeys-steps.value": 3,
                "journeys-group.value": None,
                "journeys-min-visitors.value": 1,
                "journeys-limit.value": 25,
            },
        ),
        "web vitals (trend + pages)": request(
            [("performance-trend", "figure"), ("performance-pages", "children")],
            {**unfiltered, "tabs.value": "performance"},
        ),
        "retention (12 weeks)": request(
            [("retention-identity", "children"), ("retention-heatmap", "figure")],
            {
                **unfiltered,
                "tabs.value": "retention",
                "retention-weeks.value": 12,
            },
        ),
        "explore SQL (1,000 rows)": request(
            [("explore-table", "children"), ("explore-status", "children"), ("explore-last-sql", "data")],
            {"explore-run.n_clicks": 1},
            {
                "explore-sql.value": (
                    f"SELECT ts, path, country, visitor_id FROM events WHERE site = '{site}' "
                    f"AND ts >= '{shown['start'][:19].replace('T', ' ')}' ORDER BY ts DESC LIMIT 1000"
                )
            },
        ),
    }


def api_requests(
    site: str, start: datetime, end: datetime, sources: tuple[str, ...] = ("agg", "raw")
) -> dict[str, dict[str, str]]:
    window = {"site": site, "from": start.isoformat(), "to": end.isoformat()}
    requests = {}
    for source in sources:
        requests |= {
            f"aggregate ({source})": {"path": "/stats/aggregate", **window, "source": source},
            f"timeseries by day ({source})": {
                "path": "/stats/timeseries",
                **window,
                "interval": "day",
                "source": source,
            },
            f"timeseries by hour ({source})": {
                "path": "/stats/timeseries",
                **window,
                "interval": "hour",
                "source": source,
            },
            f"breakdown path ({source})": {
                "path": "/stats/breakdown",
                **window,
                "by": "path",
                "source": source,
            },
            f"breakdown entry_path ({source})": {
                "path": "/stats/breakdown",
                **window,
                "by": "entry_path",
                "source": source,
            },
            f"breakdown country ({source})": {
                "path": "/stats/breakdown",
                **window,
                "by": "country",
                "source": source,
            },
            f"breakdown utm_medium ({source})": {
                "path": "/stats/breakdown",
                **window,
                "by": "utm_medium",
                "source": source,
            },
            f"breakdown screen_size ({source})": {
                "path": "/stats/breakdown",
                **window,
                "by": "screen_size",
                "source": source,
            },
            f"goals ({source})": {"path": "/stats/goals", **window, "source": source},
            f"breakdown event:name ({source})": {
                "path": "/stats/breakdown",
                **window,
                "by": "event:name",
                "source": source,
            },
            f"breakdown prop:plan ({source})": {
                "path": "/stats/breakdown",
                **window,
                "by": "prop:plan",
                "source": source,
            },
            f"funnel, 3 steps ({source})": {
                "path": "/stats/funnel",
                **window,
                "steps": '[{"page": "/"}, {"page": "/blog/*"}, {"event": "Signup"}]',
                "source": source,
            },
            f"journeys, next 3 from / ({source})": {
                "path": "/stats/journeys",
                **window,
                "page": "/",
                "steps": "3",
                "source": source,
            },
            f"journeys, 3 steps into /pricing ({source})": {
                "path": "/stats/journeys",
                **window,
                "page": "/pricing",
                "direction": "previous",
                "steps": "3",
                "source": source,
            },
            f"web vitals by page ({source})": {
                "path": "/stats/vitals",
                **window,
                "property": "event:page",
                "source": source,
            },
            f"retention, 12 weeks ({source})": {
                "path": "/stats/retention",
                "site": site,
                "weeks": "12",
                "until": (end - timedelta(milliseconds=1)).date().isoformat(),
                "source": source,
            },
            f"realtime ({source})": {"path": "/stats/realtime", "site": site, "source": source},
            f"sessions, 100 newest ({source})": {"path": "/sessions", **window, "source": source},
        }
    return requests


def plausible_requests(site: str, start: datetime, end: datetime) -> dict[str, dict]:
    """Plausible v2 queries (POST /api/v2/query) the reports refuse and the stats engine answers:
    its planner picks `sessions` or the archive (stats/planner.py)."""
    dates = [start.date().isoformat(), (end - timedelta(microseconds=1)).date().isoformat()]
    common = {"site_id": site, "date_range": dates}
    return {
        "v2: visitors by source x page (archive)": {
            **common, "metrics": ["visitors"], "dimensions": ["visit:source", "event:page"],
        },
        "v2: bounce rate, visits by source x entry page (sessions)": {
            **common, "metrics": ["bounce_rate", "visits"],
            "dimensions": ["visit:source", "visit:entry_page"],
        },
        "v2: visit duration by day, utm_source filter in an or (sessions)": {
            **common, "metrics": ["visit_duration", "visits"], "dimensions": ["time:day"],
            "filters": [
                ["or", [["is", "visit:utm_source", ["twitter"]], ["is", "visit:source", ["github.com"]]]]
            ],
        },
        "v2: bounce rate by page (archive)": {
            **common, "metrics": ["bounce_rate"], "dimensions": ["event:page"],
        },
        "v2: visitors, page views by day x country": {
            **common, "metrics": ["visitors", "pageviews"], "dimensions": ["time:day", "visit:country"],
        },
        "v2: visitors by source, under a UTM filter": {
            **common, "metrics": ["visitors", "visits"], "dimensions": ["visit:source"],
            "filters": [["is", "visit:utm_source", ["newsletter"]]],
        },
    }  # fmt: skip


def _latency(
    request: Callable[[], int], rounds: int, before: Callable[[], object] | None = None
) -> dict[str, object]:
    """p50/p95 of `request` after one warm-up; `before` runs untimed ahead of every request. A
    request that does not answer 200 is reported as {"error": …} (the status)."""
    request()  # warm: first-use connection and the engine's caches, as a dashboard that is in use
    timings = []
    for _ in range(rounds):
        if before is not None:
            before()
        started = time.perf_counter()
        status = request()
        timings.append(time.perf_counter() - started)
        if status != 200:
            return {"error": f"answered {status}"}  # reported with the others, not ending the run
    timings.sort()
    return {
        "p50_ms": round(percentile(timings, 0.5) * 1000, 1),
        "p95_ms": round(percentile(timings, 0.95) * 1000, 1),
    }


def run_dashboard_bench(
    settings: Settings,
    events: int = 10_000_000,
    rounds: int = 10,
    preset: str = "30d",
    scale_events: int | None = None,
) -> dict:
    """Every callback and API request over a synthetic archive of `events`; with
    `scale_events`, also the agg API requests over a second site of that size, measured in
    the same run, interleaved round by round with the first site's (same conditions)."""
    apply_migrations(settings)
    now = datetime.now(UTC)
    sizes = [events] + ([scale_events] if scale_events else [])
    archives = {size: ensure_archive(settings, size, now) for size in sizes}
    derived = {size: ensure_derived(settings, bench_site(size)) for size in sizes}
    ensure_goals(settings, bench_site(events))
    password = "bench"
    app = build_app(settings.model_copy(update={"dashboard_password": password}))
    browser: FlaskClient = app.server.test_client()
    if browser.post("/login", data={"password": password}).status_code != 302:
        raise RuntimeError("could not sign in to the dashboard")
    shown = period(preset, now)
    site = bench_site(events)
    callbacks = {
        name: _latency(
            lambda body=body: browser.post("/_dash-update-component", json=body).status_code, rounds
        )
        for name, body in callback_requests(app.callback_map, site, shown.to_store()).items()
    }
    headers = {"Authorization": f"Bearer {settings.resolved_api_key()}"}

    def api_call(path: str, query: dict[str, str]) -> Callable[[], int]:
        return lambda: browser.get(f"/api/v1{path}", query_string=query, headers=headers).status_code

    sources = ("agg", "raw") if events <= RAW_MEASURED_UP_TO else ("agg",)
    api = {}
    for name, query in api_requests(site, shown.start, shown.end, sources).items():
        path = query.pop("path")
        api[name] = _latency(api_call(path, query), rounds)
        if name == "funnel, 3 steps (agg)":  # measured warm above: the days stored by the warm-up
            api["funnel, 3 steps (agg, cold: no day stored)"] = _latency(
                api_call(path, query), rounds, before=lambda: forget_funnel_days(settings, site)
            )
    for name, body in plausible_requests(site, shown.start, shown.end).items():
        api[name] = _latency(
            lambda body=body: browser.post("/api/v2/query", json=body, headers=headers).status_code, rounds
        )
    report = {
        "archive": {**archives[events], "site": site, "span_days": SPAN.days},
        "derived_tables": derived[events],
        "period": {"preset": preset, "from": shown.start.isoformat(), "to": shown.end.isoformat()},
        "rounds": rounds,
        "callbacks": callbacks,
        "api": api,
    }
    if scale_events:
        report["scale"] = _scale_comparison(events, scale_events, shown, rounds, api_call)
        report["scale"]["archive"] = archives[scale_events]
        report["scale"]["derived_tables"] = derived[scale_events]
    return report


def forget_funnel_days(settings: Settings, site: str) -> None:
    """Drop the site's stored funnel days: the next funnel request is a definition's first."""
    connect(settings).command(
        f"DELETE FROM {FUNNEL_DAYS} WHERE site = {{site:String}}", parameters={"site": site}
    )


def _scale_comparison(
    events: int,
    scale_events: int,
    shown: Period,
    rounds: int,
    api_call: Callable[[str, dict[str, str]], Callable[[], int]],
) -> dict:
    """agg p95 per API request at both sizes, the rounds interleaved, and their ratio."""
    calls = {}
    for size in (events, scale_events):
        for name, query in api_requests(bench_site(size), shown.start, shown.end, ("agg",)).items():
            path = query.pop("path")
            calls[(name, size)] = api_call(path, query)
    for call in calls.values():
        call()  # warm
    timings: dict[tuple[str, int], list[float]] = {key: [] for key in calls}
    for _ in range(rounds):
        for key, call in calls.items():
            started = time.perf_counter()
            if call() != 200:
                raise RuntimeError(f"{key} answered an error")
            timings[key].append(time.perf_counter() - started)
    comparison = {}
    for name in {name for name, _ in calls}:
        small, large = (
            round(percentile(sorted(timings[(name, size)]), 0.95) * 1000, 1)
            for size in (events, scale_events)
        )
        comparison[name] = {
            f"p95_ms_at_{events}": small,
            f"p95_ms_at_{scale_events}": large,
            "ratio": round(large / small, 2) if small else None,
        }
    return {"events": [events, scale_events], "agg_p95": dict(sorted(comparison.items()))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--scale-events", type=int, default=None, help="also agg at this size, same run")
    parser.add_argument("--preset", default="30d", choices=["today", "24h", "7d", "30d"])
    arguments = parser.parse_args()
    report = run_dashboard_bench(
        Settings(), arguments.events, arguments.rounds, arguments.preset, arguments.scale_events
    )
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
