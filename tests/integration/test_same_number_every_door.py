"""One question, one number, from every front door (issue 31): a week of a Berlin site's traffic,
asked of the dashboard (its Dash callbacks on the real server), `/api/v1` with Tally's parameters,
`/api/v1` with Plausible's (site_id), `/api/v2/query`, `tally stats` and an email report. Each door
translates the question (storage/queries/questions.py builds the StatsQuery) and its answer's
units (Plausible's bounce rate is 0-100, Tally's 0-1); a door that computed a number its own way
(its own range, zone, definitions or filter) would show another number here.

The week's edges are local midnights in Berlin (23:00 UTC): page views at 23:30 UTC the night
before and the night it ends are out of the week and in it by the zone alone. The server reads
with an engaged-bounce threshold of 5 s, not the built-in 10 s, and some one-page visits are read
for 7 s: a door that left the setting out (the email report did) counts them as bounces. Every
door but the dashboard is asked of both sources: the rollups and sessions are built from the archive
as the stream jobs build them (storage/rollup_backfill.py); the dashboard reads agg, its default.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pytest

from dashboard import display
from dashboard.email_reports import build_report, text_part
from dashboard.periods import period
from dashboard.segments import checked
from storage import goals
from storage.client import connect
from storage.queries import Source, questions
from storage.report_subscriptions import ReportPeriod
from storage.rollup_backfill import backfill_rollups
from storage.segments import add_segment, find_segment
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.dashboard_server import DashboardServer, server_environment, signed_in
from tests.fixtures.events import archive_rows, engagement_event, page_view
from tests.fixtures.ports import free_port
from tests.fixtures.service_process import running_module

pytestmark = pytest.mark.integration

ZONE = "Europe/Berlin"
FIRST, LAST = date(2026, 11, 2), date(2026, 11, 8)  # a Monday to a Sunday, local days
WEEK = {"from": "2026-11-02", "to": "2026-11-09"}  # Tally's parameters: local, `to` exclusive
PLAUSIBLE_WEEK = "2026-11-02,2026-11-08"  # Plausible's: both days included
PAGES = ["/", "/pricing", "/blog/kafka", "/docs"]
SOURCES = ["google.com", "twitter.com", "news.ycombinator.com", ""]
FILTER_PAGE = "/pricing"
GOAL = "Signup"
SEGMENT = "Pricing from Google"
SEGMENT_FILTERS = [["is", "event:page", [FILTER_PAGE]], ["is", "visit:source", ["google.com"]]]
SEGMENT_AS_TALLY_FILTERS = {"path": FILTER_PAGE, "referrer_domain": "google.com"}
DIRECT = "Direct / None"  # Plausible's name of no source; Tally's is ""
ENGAGED_BOUNCE_MS = 5_000  # not the built-in 10 s (tally/settings.py)
READ_MS = 7_000  # a one-page visit read this long is a bounce only by the built-in threshold


def week_traffic(site: str) -> list:
    """Visits on each local day of the week and the nights around it: one to four pages apart by
    90 s, from four sources, some signing up; two page views just outside the week's local edges
    and one just inside each."""
    events = []
    start = datetime(2026, 11, 1, 23, 0, tzinfo=UTC)  # Berlin's midnight starting Monday 2 November
    for day in range(7):
        for n in range(3 + day % 3):
            visitor = f"v{(day * 5 + n) % 17}"
            at = start + timedelta(days=day, hours=2 + 3 * n, minutes=7 * day)
            source = SOURCES[(day + n) % len(SOURCES)]
            for step in range(1 + (day + 2 * n) % 4):
                path = PAGES[(n + step) % len(PAGES)]
                events.append(page_view(site, visitor, at + timedelta(seconds=90 * step), path,
                                        referrer_domain=source))  # fmt: skip
            if (day + n) % 3 == 0:
                events.append(page_view(site, visitor, at + timedelta(seconds=30), "/", name=GOAL))
        reader, at = f"reader{day % 4}", start + timedelta(days=day, hours=20)
        events += [page_view(site, reader, at, "/docs", referrer_domain="google.com"),
                   engagement_event(site, reader, at + timedelta(seconds=8), "/docs", READ_MS)]  # fmt: skip
    edges = [start - timedelta(minutes=30), start + timedelta(minutes=30)]
    edges += [start + timedelta(days=7, minutes=-30), start + timedelta(days=7, minutes=30)]
    events += [page_view(site, f"night{i}", at, "/pricing", referrer_domain="google.com") for i, at in
               enumerate(edges)]  # fmt: skip
    return events


@pytest.fixture(scope="module")
def settings(dashboard_settings: Settings) -> Settings:
    """The dashboard's store and home, read with a 5 s engaged-bounce threshold."""
    return dashboard_settings.model_copy(update={"engaged_bounce_ms": ENGAGED_BOUNCE_MS})


@pytest.fixture(scope="module")
def server(settings: Settings) -> Iterator[DashboardServer]:
    """The real dashboard server (python -m dashboard.app) on the shared store and home, with
    `settings`' threshold, reading agg (its default) for the dashboard."""
    port = free_port()
    environment = server_environment(
        settings, port, TALLY_ENGAGED_BOUNCE_MS=str(ENGAGED_BOUNCE_MS), TALLY_DASHBOARD_SOURCE="agg"
    )
    url, log_path = f"http://127.0.0.1:{port}", settings.home_dir / "doors-dashboard.log"
    with running_module("dashboard.app", environment, log_path, f"{url}/healthz"):
        password = (settings.home_dir / "dashboard_password").read_text().strip()  # made on first start
        yield DashboardServer(url, settings.resolved_api_key(), password, log_path)


@pytest.fixture(scope="module")
def site(settings: Settings) -> str:
    """The week's traffic in the archive and, as the stream jobs would have written them, in the
    rollups and sessions (storage/rollup_backfill.py, with the server's threshold)."""
    name = f"doors-{uuid.uuid4().hex[:8]}.example.com"
    client = connect(settings)
    rows, columns = archive_rows(week_traffic(name))
    client.insert("events", rows, column_names=columns)
    # the UTC days holding the week's events (23:00 UTC on 1 November to 23:30 UTC on the 8th)
    backfill_rollups(client, name, FIRST - timedelta(days=1), LAST + timedelta(days=1),
                     engaged_bounce_ms=ENGAGED_BOUNCE_MS)  # fmt: skip
    add_site(client, name, timezone=ZONE)
    goals.add_goal(client, goals.make_goal(name, event_name=GOAL))
    checked(SEGMENT_FILTERS)  # as the dashboard and the API check a segment before saving it
    add_segment(client, name, SEGMENT, SEGMENT_FILTERS)
    return name


@pytest.fixture(scope="module")
def browser(server: DashboardServer) -> httpx.Client:
    return signed_in(server)


@dataclass(frozen=True)
class Doors:
    """Every front door of one Tally, asked about the week of `site`; each door but the dashboard
    reads `source` (the dashboard reads its setting, agg: it is asked as a user sees it)."""

    server: DashboardServer
    settings: Settings
    browser: httpx.Client
    site: str
    source: Source

    def dashboard(self, output: str, filters: dict[str, str], *extra: dict) -> Any:
        """A Dash callback of the Overview as the page posts it, for the week (a custom range)."""
        week = period("custom", datetime.now(UTC), FIRST, LAST, timezone=ZONE).to_store()
        component, prop = output.split(".")
        inputs = [
            {"id": "site", "property": "value", "value": self.site},
            {"id": "period", "property": "data", "value": week},
            {"id": "filters", "property": "data", "value": filters},
            *extra,
        ]
        request = {"output": output, "outputs": {"id": component, "property": prop}, "inputs": inputs,
                   "changedPropIds": [], "state": []}  # fmt: skip
        origin = {"Origin": self.server.url}
        answer = self.browser.post("/_dash-update-component", json=request, headers=origin)
        assert answer.status_code == 200, answer.text[:500]
        return answer.json()["response"][component][prop]

    def api(self, path: str, **query: str) -> Any:
        """`/api/v1` with Tally's parameters, for the week."""
        return self.get(path, site=self.site, **WEEK, source=self.source, **query)

    def plausible_v1(self, path: str, **query: str) -> Any:
        """`/api/v1` with Plausible's parameters (site_id), for the week."""
        return self.get(path, site_id=self.site, period="custom", date=PLAUSIBLE_WEEK, source=self.source,
                        **query)["results"]  # fmt: skip

    def get(self, path: str, **query: str) -> Any:
        answer = httpx.get(f"{self.server.url}/api/v1{path}", params=query, headers=self.key(), timeout=30)
        assert answer.status_code == 200, answer.text[:500]
        return answer.json()

    def v2(self, **body: Any) -> list[dict]:
        """`/api/v2/query`, for the week."""
        document = {"site_id": self.site, "date_range": PLAUSIBLE_WEEK.split(","), **body}
        url = f"{self.server.url}/api/v2/query?source={self.source}"
        answer = httpx.post(url, json=document, headers=self.key(), timeout=30)
        assert answer.status_code == 200, answer.text[:500]
        return answer.json()["results"]

    def cli(self, *options: str) -> Any:
        """`tally stats SITE … --json`, for the week."""
        done = run_tally(os.environ | self.settings.environment(), "stats", self.site, "--from", WEEK["from"],
                         "--to", WEEK["to"], "--source", self.source, "--json", *options)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def email(self, defined: questions.VisitDefinitions | None = None) -> str:
        """The weekly report's text as it is mailed, read with the settings' definitions (as the
        sender reads them) or those given."""
        week = ReportPeriod("weekly", FIRST, LAST, FIRST - timedelta(days=7), FIRST - timedelta(days=1), ZONE)
        client = connect(self.settings)
        return text_part(build_report(client, self.site, week, self.source, defined or self.settings))

    def key(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.server.api_key}"}


@pytest.fixture(params=["raw", "agg"])
def doors(
    server: DashboardServer, settings: Settings, browser: httpx.Client, site: str, request: Any
) -> Doors:
    return Doors(server, settings, browser, site, request.param)


# --- reading what the dashboard and the email show ---------------------------------------------


def texts(node: Any) -> list[str]:
    """The strings a Dash component tree shows, in order."""
    if isinstance(node, str | int | float):
        return [str(node)]
    if isinstance(node, list):
        return [text for child in node for text in texts(child)]
    if isinstance(node, dict) and "props" in node:
        return texts(node["props"].get("children"))
    return []


def shown_rows(node: Any) -> list[list[str]]:
    """Each breakdown row's cells (value, visitors, views…) as the dashboard shows them."""
    if isinstance(node, list):
        return [row for child in node for row in shown_rows(child)]
    if not isinstance(node, dict) or "props" not in node:
        return []
    if "breakdown-row" in node["props"].get("className", ""):
        return [texts(node)]
    return shown_rows(node["props"].get("children"))


def metric_values(node: Any) -> dict[str, str]:
    """The top-line cards' exact numbers (`data-value`), by metric."""
    if isinstance(node, list):
        return {key: value for child in node for key, value in metric_values(child).items()}
    if not isinstance(node, dict) or "props" not in node:
        return {}
    props = node["props"]
    if str(props.get("id", "")).startswith("metric-"):
        return {props["id"].removeprefix("metric-"): props["data-value"]}
    return metric_values(props.get("children"))


def plotted(values: Any) -> list[float]:
    """A plotly trace's values, plain or as plotly's typed array."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).tolist()
    return list(values)


def email_section(text: str, title: str) -> list[str]:
    """The lines under one heading of the report's text part."""
    lines = text.split(f"\n{title}")[1].split("\n\n")[0].splitlines()[1:]
    return [line.strip() for line in lines]


def tally_source(plausible: str) -> str:
    """A source as Tally names it: no source is "" (Plausible's API calls it Direct / None)."""
    return "" if plausible == DIRECT else plausible


def count(text: str) -> int:
    return int(text.replace(",", ""))


# --- the questions -----------------------------------------------------------------------------


def test_totals_of_the_week_are_the_same_number_from_every_door(doors: Doors) -> None:
    tally = doors.api("/stats/aggregate")
    assert tally["pageviews"] > 20 and 0 < tally["bounce_rate"] < 1  # a week worth comparing

    cards = metric_values(doors.dashboard("top-metrics.children", {}))
    assert {key: float(value) for key, value in cards.items()} == {
        metric.key: pytest.approx(tally[metric.key]) for metric in display.METRICS
    }
    assert {k: v for k, v in doors.cli().items() if k in tally} == tally

    metrics = ["visitors", "visits", "pageviews", "bounce_rate", "visit_duration"]
    plausible = {
        "visitors": tally["visitors"], "visits": tally["sessions"], "pageviews": tally["pageviews"],
        "bounce_rate": round(tally["bounce_rate"] * 100),
        "visit_duration": round(tally["avg_session_duration_s"]),
    }  # fmt: skip
    (row,) = doors.v2(metrics=metrics)
    assert dict(zip(metrics, row["metrics"], strict=True)) == plausible
    v1 = doors.plausible_v1("/stats/aggregate", metrics=",".join(metrics))
    assert {name: v1[name]["value"] for name in metrics} == plausible

    mailed = doors.email()
    for metric in display.METRICS:
        assert f"{metric.label}: {display.metric_value(metric, tally[metric.key])} (" in mailed, metric.key
    if doors.source == "raw":  # (agg's bounces were counted with the threshold as the rollups were written)
        # The threshold matters to this week: a door reading with the built-in one shows another number.
        assert doors.email(questions.Defined()) != mailed


def test_top_pages_are_the_same_rows_from_every_door(doors: Doors) -> None:
    rows = doors.api("/stats/breakdown", by="path")
    visitors = {row["value"]: row["visitors"] for row in rows}
    assert len(visitors) == len(PAGES)

    tab = {"id": "pages-by", "property": "value", "value": "path"}
    shown = shown_rows(doors.dashboard("pages-list.children", {}, tab))
    assert {cells[0]: (count(cells[1]), count(cells[2])) for cells in shown} == {
        row["value"]: (row["visitors"], row["pageviews"]) for row in rows
    }
    assert doors.cli("--by", "path") == rows
    results = doors.v2(metrics=["visitors"], dimensions=["event:page"])
    assert {row["dimensions"][0]: row["metrics"][0] for row in results} == visitors
    v1 = doors.plausible_v1("/stats/breakdown", property="event:page")
    assert {row["page"]: row["visitors"] for row in v1} == visitors
    assert email_section(doors.email(), "Top pages:") == [
        f"{row['value']}: {row['visitors']} visitors" for row in rows
    ]


def test_top_sources_of_a_page_are_the_same_rows_from_every_door(doors: Doors) -> None:
    on_page = {"path": FILTER_PAGE}
    rows = doors.api("/stats/breakdown", by="referrer_domain", filters=json.dumps(on_page))
    visitors = {row["value"]: row["visitors"] for row in rows}
    everywhere = doors.api("/stats/breakdown", by="referrer_domain")
    assert len(visitors) > 1 and visitors != {row["value"]: row["visitors"] for row in everywhere}

    tab = {"id": "sources-by", "property": "value", "value": "referrer_domain"}
    shown = shown_rows(doors.dashboard("sources-list.children", on_page, tab))
    assert {cells[0]: count(cells[1]) for cells in shown} == {
        display.dimension_value("referrer_domain", value): n for value, n in visitors.items()
    }
    assert doors.cli("--by", "referrer_domain", "--filters", json.dumps(on_page)) == rows
    results = doors.v2(metrics=["visitors"], dimensions=["visit:source"],
                       filters=[["is", "event:page", [FILTER_PAGE]]])  # fmt: skip
    assert {tally_source(row["dimensions"][0]): row["metrics"][0] for row in results} == visitors
    v1 = doors.plausible_v1("/stats/breakdown", property="visit:source", filters=f"event:page=={FILTER_PAGE}")
    assert {tally_source(row["source"]): row["visitors"] for row in v1} == visitors


def test_visitors_by_day_are_the_same_series_from_every_door(doors: Doors) -> None:
    points = doors.api("/stats/timeseries", interval="day")
    by_day = {point["t"][:10]: point["visitors"] for point in points}
    assert list(by_day) == [str(FIRST + timedelta(days=n)) for n in range(7)]

    metric = {"id": "chart-metric", "property": "value", "value": "visitors"}
    line = doors.dashboard("main-chart.figure", {}, metric)["data"][-1]  # the period's, over the compared
    assert plotted(line["y"]) == list(by_day.values())
    assert [str(day)[:10] for day in line["x"]] == list(by_day)
    assert doors.cli("--interval", "day") == points
    results = doors.v2(metrics=["visitors"], dimensions=["time:day"])
    assert {row["dimensions"][0][:10]: row["metrics"][0] for row in results} == by_day
    v1 = doors.plausible_v1("/stats/timeseries", interval="date")
    assert {row["date"][:10]: row["visitors"] for row in v1} == by_day
    assert email_section(doors.email(), f"Visitors per day ({ZONE}):") == [
        f"{day}: {n}" for day, n in by_day.items()
    ]


def test_a_goals_conversions_are_the_same_from_every_door(doors: Doors) -> None:
    (goal,) = doors.api("/stats/goals")
    assert goal["goal"] == GOAL and 0 < goal["conversion_rate"] < 1

    version = {"id": "goals-version", "property": "data", "value": 0}
    (shown,) = shown_rows(doors.dashboard("goals-list.children", {}, version))
    assert shown[:4] == [GOAL, display.count(goal["visitors"]), display.count(goal["events"]),
                         f"{goal['conversion_rate'] * 100:.1f}%"]  # fmt: skip
    assert doors.cli("--goals") == [goal]
    numbers = [goal["visitors"], goal["events"], round(goal["conversion_rate"] * 100, 2)]
    results = doors.v2(metrics=["visitors", "events", "conversion_rate"], dimensions=["event:goal"])
    assert [row["metrics"] for row in results if row["dimensions"] == [GOAL]] == [numbers]
    v1 = doors.plausible_v1(
        "/stats/breakdown", property="event:goal", metrics="visitors,events,conversion_rate"
    )
    assert [
        [row["visitors"], row["events"], row["conversion_rate"]] for row in v1 if row["goal"] == GOAL
    ] == [numbers]


def test_a_saved_segments_totals_are_the_numbers_of_the_filters_it_holds_from_every_door(
    doors: Doors,
) -> None:
    """The dashboard applies a segment by name, /api/v2 by id, the other doors are given its filters."""
    tally = doors.api("/stats/aggregate", filters=json.dumps(SEGMENT_AS_TALLY_FILTERS))
    assert 0 < tally["visitors"] < doors.api("/stats/aggregate")["visitors"]

    cards = metric_values(doors.dashboard("top-metrics.children", {"segment": SEGMENT}))
    assert {key: float(value) for key, value in cards.items()} == {
        metric.key: pytest.approx(tally[metric.key]) for metric in display.METRICS
    }
    printed = doors.cli("--filters", json.dumps(SEGMENT_AS_TALLY_FILTERS))
    assert {k: v for k, v in printed.items() if k in tally} == tally
    segment_id = find_segment(connect(doors.settings), doors.site, SEGMENT).id
    metrics = ["visitors", "pageviews"]
    for filters in ([["is", "segment", [segment_id]]], SEGMENT_FILTERS):
        (row,) = doors.v2(metrics=metrics, filters=filters)
        assert row["metrics"] == [tally["visitors"], tally["pageviews"]], filters
