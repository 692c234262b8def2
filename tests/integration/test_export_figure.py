"""The events behind a number: `GET /api/v1/export/events` streams exactly the archived events a
figure counts, and they add up to the figure `/api/v1/stats/aggregate` (or `/stats/goals`,
`/stats/breakdown`) answers for the same parameters, in Parquet and in CSV, with their Kafka
partition and offset and the definitions version. Against the real dashboard server and the real
ClickHouse engine (events written straight into the archive, as tests/integration/test_stats_api.py
does); the Overview's download link is followed by a signed-in browser session."""

from __future__ import annotations

import csv
import io
import json
import os
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest
from clickhouse_connect.driver.client import Client

from dashboard.app import build_app
from dashboard.periods import period
from storage import goals, users
from storage.client import connect
from storage.sites import add_site
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.dashboard_server import DashboardServer, signed_in
from tests.fixtures.events import archive_rows, engagement_event, page_view
from tests.integration.test_users import PASSWORD

pytestmark = pytest.mark.integration

TAG = uuid.uuid4().hex[:6]
SITE = f"figure-export-{TAG}.example.com"
OTHER = f"figure-export-other-{TAG}.example.com"
FIRST_DAY = date(2026, 11, 10)
DAY_ONE = datetime(2026, 11, 10, tzinfo=UTC)
RANGE = {"from": "2026-11-10", "to": "2026-11-12"}  # two whole UTC days, `to` exclusive
PATHS = ["/", "/pricing", "/blog", "/signup"]
COUNTRIES = ["DE", "US", "FR"]
# (device, browser, os) as the collector's enrichment writes them: the dimensions' values are
# read through the catalogue (Chrome Mobile is Chrome, Linux is GNU/Linux), as a breakdown shows them.
CLIENTS = [
    ("desktop", "Firefox", "Linux"),
    ("mobile", "Chrome Mobile", "Android"),
    ("tablet", "Safari", "iOS"),
]
REFERRERS = ["news.example", "search.example", ""]  # on a visit's first page view only ("": direct)
PLANS = ["pro", "team"]
GOAL = "Signup"
FORMATS = ["parquet", "csv"]


def traffic(site: str) -> list[PageViewEvent]:
    """Two days of 30 visitors (the same ids both days: 60 visitor-days), one visit each a day:
    page views (the visit's source on its first only), engagement events (never counted), a
    Signup with a plan from every third visitor, and events outside the range."""
    events = []
    for day in range(2):
        for v in range(30):
            visitor, t = f"visitor-{v:03d}", DAY_ONE + timedelta(days=day, hours=1 + v % 20, minutes=v)
            device, browser, os_name = CLIENTS[(v // 3 + day) % 3]
            client = {"country": COUNTRIES[v % 3], "device": device, "browser": browser, "os": os_name}
            source = REFERRERS[(v + day) % 3]
            for n in range(1 + (v + day) % 4):
                at = t + timedelta(minutes=n)
                came_from = (
                    {"referrer": f"https://{source}/", "referrer_domain": source} if source and not n else {}
                )
                events.append(page_view(site, visitor, at, PATHS[(v + n) % 4], **client, **came_from))
            events.append(engagement_event(site, visitor, t + timedelta(minutes=5), PATHS[v % 4], 4000))
            if v % 3 == day:
                events.append(page_view(site, visitor, t + timedelta(minutes=6), "/signup", name=GOAL,
                                        **client, props={"plan": PLANS[v % 2]}))  # fmt: skip
    before, after = DAY_ONE - timedelta(hours=2), DAY_ONE + timedelta(days=2)
    events += [page_view(site, "early", before, "/"), page_view(site, "late", after, "/")]
    return events


@pytest.fixture(scope="module")
def store(dashboard_settings: Settings) -> Client:
    client = connect(dashboard_settings)
    for site in (SITE, OTHER):
        add_site(client, site)
        goals.add_goal(client, goals.make_goal(site, event_name=GOAL))
        events = traffic(site)
        for partition in range(3):  # three log partitions, offsets gapless in each
            rows, columns = archive_rows(events[partition::3], partition=partition)
            client.insert("events", rows, column_names=columns)
    return client


def key(server: DashboardServer) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.api_key}"}


def member_key(client: Client, site: str) -> dict[str, str]:
    """A viewer of `site` (invited and accepted) and their read-only API key."""
    email = f"viewer-{uuid.uuid4().hex[:6]}@example.com"
    token = users.create_invite(client, email, site, "viewer")
    invite = users.find_invite(client, token)
    assert invite is not None
    users.accept_invite(client, token, invite, PASSWORD)
    return {"Authorization": f"Bearer {users.create_key(client, email, [site], scope='read')[1]}"}


def api(server: DashboardServer, path: str, **params: str) -> Any:
    answer = httpx.get(f"{server.url}/api/v1{path}", params=params, headers=key(server), timeout=30)
    assert answer.status_code == 200, answer.text[:500]
    return answer.json()


def export(
    server: DashboardServer, headers: dict[str, str] | None = None, **params: str
) -> tuple[httpx.Response, list[dict[str, Any]]]:
    """The export's answer and its rows, read as a user's tool reads the file."""
    answer = httpx.get(
        f"{server.url}/api/v1/export/events", params=params, headers=headers or key(server), timeout=60
    )
    assert answer.status_code == 200, answer.text[:500]
    return answer, rows_of(answer.content, params.get("format", "parquet"))


def rows_of(content: bytes, output_format: str) -> list[dict[str, Any]]:
    if output_format == "csv":
        return list(csv.DictReader(io.StringIO(content.decode())))
    return pq.read_table(io.BytesIO(content)).to_pylist()


def visitor_days(rows: list[dict[str, Any]]) -> int:
    """Distinct (UTC day of ts, visitor_id): the visitors the rows make."""
    return len({(str(row["ts"])[:10], row["visitor_id"]) for row in rows})


@pytest.mark.parametrize("output_format", FORMATS)
def test_exported_page_views_add_up_to_the_aggregate(
    dashboard_server: DashboardServer, store: Client, output_format: str
) -> None:
    figure = api(dashboard_server, "/stats/aggregate", site=SITE, source="raw", **RANGE)
    answer, rows = export(dashboard_server, site=SITE, metric="pageviews", format=output_format, **RANGE)
    assert len(rows) == figure["pageviews"] > 0
    assert answer.headers["X-Tally-Figure"] == f"pageviews={figure['pageviews']}"
    assert answer.headers["X-Tally-Rows"] == str(figure["pageviews"])
    assert {row["name"] for row in rows} == {"pageview"} and {row["site"] for row in rows} == {SITE}
    # Where each came from on the log, and with which definitions the figure was made.
    assert {int(row["kafka_partition"]) for row in rows} == {0, 1, 2}
    assert len({(row["kafka_partition"], row["kafka_offset"]) for row in rows}) == len(rows)
    version = answer.headers["X-Tally-Definitions-Version"]
    assert {str(row["definitions_version"]) for row in rows} == {version}
    assert "ip_hash" not in rows[0]
    if output_format == "parquet":  # the figure and the version in the file's own metadata too
        metadata = pq.read_schema(io.BytesIO(answer.content)).metadata
        assert metadata[b"tally.definitions_version"].decode() == version
        assert metadata[b"tally.figure"].decode() == f"pageviews={figure['pageviews']}"
    assert "attachment" in answer.headers["Content-Disposition"]


@pytest.mark.parametrize("output_format", FORMATS)
def test_exported_rows_make_the_visitors_figure_under_a_filter(
    dashboard_server: DashboardServer, store: Client, output_format: str
) -> None:
    filters = json.dumps({"country": "DE"})
    figure = api(dashboard_server, "/stats/aggregate", site=SITE, source="raw", filters=filters, **RANGE)
    answer, rows = export(
        dashboard_server, site=SITE, metric="visitors", filters=filters, format=output_format, **RANGE
    )
    assert visitor_days(rows) == figure["visitors"] > 0
    assert len({row["visitor_id"] for row in rows}) < figure["visitors"]  # the same ids on both days
    assert answer.headers["X-Tally-Figure"] == f"visitors={figure['visitors']}"
    assert len(rows) == figure["pageviews"] and {row["country"] for row in rows} == {"DE"}


@pytest.mark.parametrize("output_format", FORMATS)
def test_a_goals_events_under_a_filter_add_up_to_its_conversions(
    dashboard_server: DashboardServer, store: Client, output_format: str
) -> None:
    filters = json.dumps({"country": "US"})
    [signup] = api(dashboard_server, "/stats/goals", site=SITE, source="raw", filters=filters, **RANGE)
    asked = {"site": SITE, "goal": GOAL, "filters": filters, "format": output_format, **RANGE}
    answer, rows = export(dashboard_server, metric="events", **asked)
    assert len(rows) == signup["events"] > 0
    assert answer.headers["X-Tally-Figure"] == f"events={signup['events']}"
    assert {row["name"] for row in rows} == {GOAL} and {row["country"] for row in rows} == {"US"}
    answer, rows = export(dashboard_server, metric="conversions", **asked)
    assert visitor_days(rows) == signup["visitors"]
    assert answer.headers["X-Tally-Figure"] == f"conversions={signup['visitors']}"


def test_page_views_of_the_goals_converters_add_up_to_the_aggregate(
    dashboard_server: DashboardServer, store: Client
) -> None:
    filters = json.dumps({"goal": GOAL})
    figure = api(dashboard_server, "/stats/aggregate", site=SITE, source="raw", filters=filters, **RANGE)
    _, rows = export(dashboard_server, site=SITE, metric="pageviews", filters=filters, **RANGE)
    assert len(rows) == figure["pageviews"] > 0
    assert visitor_days(rows) == figure["visitors"]


def test_one_row_of_a_breakdown(dashboard_server: DashboardServer, store: Client) -> None:
    rows_by_path = api(dashboard_server, "/stats/breakdown", site=SITE, source="raw", by="path", **RANGE)
    pricing = next(row for row in rows_by_path if row["value"] == "/pricing")
    asked = {"site": SITE, "metric": "pageviews", "property": "path", "value": "/pricing", "format": "csv"}
    _, rows = export(dashboard_server, **asked, **RANGE)
    assert len(rows) == pricing["pageviews"] and {row["path"] for row in rows} == {"/pricing"}
    assert visitor_days(rows) == pricing["visitors"]


# One row of each kind of breakdown the export takes a row of: (by, the row's value). Page
# dimensions, the visitor's client, and visit dimensions (the whole visits whose first page view
# came from there, not only that page view: the filters' semantics, DESIGN.md "Definitions").
PAGEVIEW_ROWS = [
    ("path", "/pricing"),
    ("entry_path", "/blog"),
    ("exit_path", "/signup"),
    ("referrer_domain", "news.example"),
    ("referrer_domain", ""),  # direct
    ("channel", "Referral"),
    ("country", "FR"),
    ("device", "mobile"),
    ("browser", "Chrome"),
    ("os", "GNU/Linux"),
]


@pytest.mark.parametrize(("by", "value"), PAGEVIEW_ROWS)
def test_one_row_of_each_breakdown_adds_up_to_the_breakdowns_figures(
    dashboard_server: DashboardServer, store: Client, by: str, value: str
) -> None:
    breakdown = api(dashboard_server, "/stats/breakdown", site=SITE, source="raw", by=by, **RANGE)
    row = next(row for row in breakdown if row["value"] == value)
    asked = {"site": SITE, "property": by, "value": value, "format": "csv", **RANGE}
    answer, rows = export(dashboard_server, metric="pageviews", **asked)
    assert len(rows) == row["pageviews"] > 0
    assert answer.headers["X-Tally-Figure"] == f"pageviews={row['pageviews']}"
    answer, rows = export(dashboard_server, metric="visitors", **asked)
    assert visitor_days(rows) == row["visitors"] > 0
    assert answer.headers["X-Tally-Figure"] == f"visitors={row['visitors']}"
    assert row["pageviews"] < sum(other["pageviews"] for other in breakdown)  # one row, not all


def test_a_sources_row_is_its_whole_visits(dashboard_server: DashboardServer, store: Client) -> None:
    """The visits from news.example: their first page views carry the referrer, the rest do not."""
    asked = {"site": SITE, "property": "referrer_domain", "value": "news.example", "format": "csv"}
    _, rows = export(dashboard_server, metric="pageviews", **asked, **RANGE)
    assert {row["referrer_domain"] for row in rows} == {"news.example", ""}
    visits = {(str(row["ts"])[:10], row["visitor_id"]) for row in rows}
    assert sum(row["referrer_domain"] == "news.example" for row in rows) == len(visits)


def test_one_row_of_the_event_name_breakdown_is_the_goals_events(
    dashboard_server: DashboardServer, store: Client
) -> None:
    names = api(dashboard_server, "/stats/breakdown", site=SITE, source="raw", by="event:name", **RANGE)
    signup = next(row for row in names if row["value"] == GOAL)
    asked = {"site": SITE, "goal": GOAL, "format": "csv", **RANGE}
    answer, rows = export(dashboard_server, metric="events", **asked)
    assert len(rows) == signup["events"] > 0 and {row["name"] for row in rows} == {GOAL}
    assert answer.headers["X-Tally-Figure"] == f"events={signup['events']}"
    answer, rows = export(dashboard_server, metric="conversions", **asked)
    assert visitor_days(rows) == signup["visitors"] > 0
    assert answer.headers["X-Tally-Figure"] == f"conversions={signup['visitors']}"


@pytest.mark.parametrize("plan", PLANS)
def test_one_row_of_a_property_breakdown(dashboard_server: DashboardServer, store: Client, plan: str) -> None:
    plans = api(dashboard_server, "/stats/breakdown", site=SITE, source="raw", by="prop:plan", **RANGE)
    row = next(row for row in plans if row["value"] == plan)
    asked = {"site": SITE, "metric": "events", "property": "props.plan", "value": plan, "format": "csv"}
    answer, rows = export(dashboard_server, **asked, **RANGE)
    assert len(rows) == row["events"] > 0
    assert {json.loads(row["props"])["plan"] for row in rows} == {plan}
    assert visitor_days(rows) == row["visitors"]
    assert answer.headers["X-Tally-Figure"] == f"events={row['events']}"


def test_custom_events_add_up_to_the_event_breakdown(
    dashboard_server: DashboardServer, store: Client
) -> None:
    names = api(dashboard_server, "/stats/breakdown", site=SITE, source="raw", by="event:name", **RANGE)
    _, rows = export(dashboard_server, site=SITE, metric="events", **RANGE)
    assert len(rows) == sum(row["events"] for row in names) > 0


def test_a_viewers_key_exports_its_site_and_another_sites_key_is_refused(
    dashboard_server: DashboardServer, store: Client
) -> None:
    own = member_key(store, SITE)
    _, rows = export(dashboard_server, own, site=SITE, metric="pageviews", **RANGE)
    assert rows
    others = member_key(store, OTHER)
    answer = httpx.get(
        f"{dashboard_server.url}/api/v1/export/events",
        params={"site": SITE, "metric": "pageviews", **RANGE},
        headers=others,
        timeout=30,
    )
    assert answer.status_code == 403 and answer.json()["error"].startswith("site:")


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"metric": "bounce_rate"}, "metric"),
        ({"metric": "avg_session_duration_s"}, "metric"),
        ({}, "metric"),
        ({"metric": "pageviews", "format": "xlsx"}, "format"),
        ({"metric": "conversions"}, "goal"),
        ({"metric": "events", "goal": "No such goal"}, "goal"),
        ({"metric": "pageviews", "property": "no_such_dimension", "value": "x"}, "property"),
        ({"metric": "pageviews", "from": "yesterday"}, "from"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(
    dashboard_server: DashboardServer, store: Client, params: dict[str, str], named: str
) -> None:
    answer = httpx.get(
        f"{dashboard_server.url}/api/v1/export/events",
        params={"site": SITE, **RANGE, **params},
        headers=key(dashboard_server),
        timeout=30,
    )
    assert answer.status_code == 400, answer.text[:300]
    assert answer.json()["error"].startswith(f"{named}:"), answer.json()


@pytest.mark.parametrize(
    ("by", "value", "instead"),
    [("prop:plan", "pro", "property=props.plan"), ("event:name", GOAL, "goal=NAME")],
)
def test_a_custom_event_breakdowns_own_name_is_a_400_saying_what_to_ask(
    dashboard_server: DashboardServer, store: Client, by: str, value: str, instead: str
) -> None:
    answer = httpx.get(
        f"{dashboard_server.url}/api/v1/export/events",
        params={"site": SITE, **RANGE, "metric": "events", "property": by, "value": value},
        headers=key(dashboard_server),
        timeout=30,
    )
    assert answer.status_code == 400, answer.text[:300]
    error = answer.json()["error"]
    assert error.startswith("property:") and instead in error, error


def test_the_overviews_download_link_gives_the_page_views_shown(
    dashboard_server: DashboardServer, store: Client
) -> None:
    browser = signed_in(dashboard_server)
    filters = {"country": "FR"}
    days = period("custom", datetime.now(UTC), FIRST_DAY, FIRST_DAY + timedelta(days=1)).to_store()
    outputs = [{"id": "provenance", "property": name} for name in ("children", "className", "title")]
    request = {
        "output": "..provenance.children...provenance.className...provenance.title..",
        "outputs": outputs,
        "inputs": [
            {"id": "site", "property": "value", "value": SITE},
            {"id": "period", "property": "data", "value": days},
            {"id": "filters", "property": "data", "value": filters},
        ],
        "changedPropIds": [],
        "state": [],
    }
    answer = browser.post("/_dash-update-component", json=request, headers={"Origin": dashboard_server.url})
    assert answer.status_code == 200, answer.text[:500]
    children = answer.json()["response"]["provenance"]["children"]
    [link] = [c for c in children if isinstance(c, dict) and c["props"].get("id") == "provenance-export"]
    href = link["props"]["href"]
    assert href.startswith("/export/events?") and "metric=pageviews" in href and "format=csv" in href
    figure = api(dashboard_server, "/stats/aggregate", site=SITE, source="raw", filters=json.dumps(filters),
                 **{"from": "2026-11-10", "to": "2026-11-12"})  # fmt: skip
    download = browser.get(href)
    assert download.status_code == 200, download.text[:300]
    assert len(rows_of(download.content, "csv")) == figure["pageviews"] > 0
    # Without a session the link leads to the sign-in page, not to the events.
    assert httpx.get(f"{dashboard_server.url}{href}", timeout=30).status_code == 302


def test_tally_export_figure_writes_the_same_events(
    dashboard_server: DashboardServer, dashboard_settings: Settings, store: Client, tmp_path: Path
) -> None:
    env = os.environ | dashboard_settings.environment()
    filters = json.dumps({"country": "DE"})
    figure = api(dashboard_server, "/stats/aggregate", site=SITE, source="raw", filters=filters, **RANGE)
    target = tmp_path / "pageviews.parquet"
    dates = ["--from", "2026-11-10", "--to", "2026-11-12"]
    figure_options = ["--figure", "pageviews", "--filters", filters]
    done = run_tally(env, "export", "--site", SITE, *dates, *figure_options, "-o", str(target))
    assert done.returncode == 0, done.stderr
    rows = rows_of(target.read_bytes(), "parquet")
    assert len(rows) == figure["pageviews"] > 0 and {row["country"] for row in rows} == {"DE"}
    assert f"pageviews={figure['pageviews']}" in done.stderr
    # One row of a breakdown by a visit dimension, from the command line too.
    [news] = [
        row
        for row in api(
            dashboard_server, "/stats/breakdown", site=SITE, source="raw", by="referrer_domain", **RANGE
        )
        if row["value"] == "news.example"
    ]
    row_options = ["--figure", "visitors", "--property", "referrer_domain", "--value", "news.example"]
    done = run_tally(
        env, "export", "--site", SITE, *dates, *row_options, "--format", "csv", "-o", str(target)
    )
    assert done.returncode == 0, done.stderr
    assert visitor_days(rows_of(target.read_bytes(), "csv")) == news["visitors"] > 0
    assert f"visitors={news['visitors']}" in done.stderr
    refused = run_tally(env, "export", "--site", SITE, *dates, "--figure", "bounce_rate")
    assert refused.returncode != 0 and "metric" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr


def test_at_most_two_exports_stream_at_once_and_a_third_is_told_to_retry(
    dashboard_settings: Settings, store: Client
) -> None:
    # Each streaming export holds one of the server's 8 threads while its client reads: a few
    # slow downloads must not take them all. Responses left unread hold their slot; closing one
    # (the download ended or the client left) frees it, read or not.
    app = build_app(dashboard_settings).server.test_client()
    headers = {"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"}
    query = {"site": SITE, "metric": "pageviews", **RANGE}

    def start() -> Any:
        return app.get("/api/v1/export/events", query_string=query, headers=headers, buffered=False)

    streaming = [start(), start()]
    assert [answer.status_code for answer in streaming] == [200, 200]
    busy = start()
    assert busy.status_code == 429 and busy.headers["Retry-After"] == "10"
    assert busy.get_json()["error"].startswith("export: 2 exports are streaming")
    # (Closed in the reverse order of their starts: in one thread, the test client nests each
    # streaming response's request context in the one before.)
    streaming[1].close()  # never read: its slot is free again
    after = start()
    assert after.status_code == 200
    assert len(rows_of(after.get_data(), "parquet")) == api_figure(dashboard_settings, store)
    after.close()
    streaming[0].close()
    last = start()
    assert last.status_code == 200
    last.close()


def api_figure(settings: Settings, client: Client) -> int:
    """The range's archived page views of SITE, counted in the store."""
    return int(
        client.query(
            "SELECT count() FROM events WHERE site = {site:String} AND name = 'pageview' "
            "AND ts >= '2026-11-10' AND ts < '2026-11-12'",
            parameters={"site": SITE},
        ).result_rows[0][0]
    )
