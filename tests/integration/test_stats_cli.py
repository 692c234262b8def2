"""`tally stats` and `tally realtime` (ops/cli/stats.py), the real CLI as a subprocess on the real
ClickHouse engine: the numbers printed are the stats API's for the same arguments, on both
sources (the API in-process over WSGI, same store), a comparison carries each number's change,
a breakdown by channel and the realtime breakdowns read the same rows, and a bad option is one
line naming it."""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage import goals
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

DAY = datetime(2026, 11, 10, tzinfo=UTC)
RANGE = {"from": "2026-11-10T00:00:00Z", "to": "2026-11-11T00:00:00Z"}
BEFORE = {"from": "2026-11-09T00:00:00Z", "to": "2026-11-11T00:00:00Z"}


@pytest.fixture(scope="module")
def site(dashboard_settings: Settings) -> str:
    """Two days of page views (more on the second: the comparison has a change)."""
    name = f"stats-cli-{uuid.uuid4().hex[:8]}.example.com"
    before = [page_view(name, f"v{i}", DAY - timedelta(hours=10, minutes=i), "/old") for i in range(2)]
    day = [
        page_view(
            name, f"w{i}", DAY + timedelta(hours=9, minutes=7 * i), ["/", "/pricing", "/blog"][i % 3],
            referrer_domain=["google.com", "news.ycombinator.com", ""][i % 3],
            country=["DE", "CH"][i % 2],
        )
        for i in range(6)
    ]  # fmt: skip
    signups = [
        page_view(name, f"w{i}", DAY + timedelta(hours=9, minutes=7 * i + 2), "/", name="Signup",
                  props={"plan": ["pro", "free"][i % 2]})
        for i in range(3)
    ]  # fmt: skip
    events = [*before, *day, *signups]
    client = connect(dashboard_settings)
    rows, columns = archive_rows(events)
    client.insert("events", rows, column_names=columns)
    add_site(client, name)
    goals.add_goal(client, goals.make_goal(name, event_name="Signup"))
    goals.add_goal(client, goals.make_goal(name, page_pattern="/pricing"))
    return name


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings) -> FlaskClient:
    return build_app(dashboard_settings).server.test_client()


def tally(settings: Settings, *args: str) -> Any:
    done = run_tally(os.environ | settings.environment(), *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def from_api(api: FlaskClient, settings: Settings, path: str, **query: str) -> Any:
    headers = {"Authorization": f"Bearer {settings.resolved_api_key()}"}
    answer = api.get(f"/api/v1/stats/{path}", query_string=query, headers=headers)
    assert answer.status_code == 200, answer.get_json()
    return answer.get_json()


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_stats_prints_the_apis_numbers_with_their_change(
    dashboard_settings: Settings, api: FlaskClient, site: str, source: str
) -> None:
    printed = tally(
        dashboard_settings, "stats", site, "--from", RANGE["from"], "--to", RANGE["to"],
        "--compare", "previous_period", "--source", source, "--json",
    )  # fmt: skip
    answered = from_api(api, dashboard_settings, "aggregate", site=site, compare="previous_period",
                        source=source, **RANGE)  # fmt: skip
    assert {k: v for k, v in printed.items() if k != "comparison"} == {
        k: v for k, v in answered.items() if k != "comparison"
    }
    if source == "raw":
        assert (printed["pageviews"], printed["comparison"]["pageviews"]) == (6, 2)
        assert printed["change"]["pageviews"] == 200.0


def test_stats_by_channel_and_country_are_the_apis_rows(
    dashboard_settings: Settings, api: FlaskClient, site: str
) -> None:
    for by in ("channel", "country"):
        printed = tally(dashboard_settings, "stats", site, "--from", BEFORE["from"], "--to", BEFORE["to"],
                        "--by", by, "--source", "raw", "--json")  # fmt: skip
        answered = from_api(api, dashboard_settings, "breakdown", site=site, by=by, source="raw", **BEFORE)
        assert printed == answered and printed, by


def test_stats_by_interval_prints_the_apis_timeseries(
    dashboard_settings: Settings, api: FlaskClient, site: str
) -> None:
    asked = (
        "stats",
        site,
        "--from",
        BEFORE["from"],
        "--to",
        BEFORE["to"],
        "--source",
        "raw",
        "--interval",
        "day",
    )
    printed = tally(dashboard_settings, *asked, "--json")
    assert printed == from_api(
        api, dashboard_settings, "timeseries", site=site, interval="day", source="raw", **BEFORE
    )
    assert [(point["pageviews"], point["visitors"]) for point in printed] == [(2, 2), (6, 6)]
    lines = run_tally(os.environ | dashboard_settings.environment(), *asked).stdout.splitlines()
    assert lines == ["2026-11-09T00:00:00Z\t2\t2", "2026-11-10T00:00:00Z\t6\t6"]


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_stats_of_custom_events_properties_and_goals_are_the_apis(
    dashboard_settings: Settings, api: FlaskClient, site: str, source: str
) -> None:
    asked = ("stats", site, "--from", RANGE["from"], "--to", RANGE["to"], "--source", source)
    for by, goal in (("event:name", None), ("prop:plan", None), ("prop:plan", "Signup")):
        with_goal = ("--goal", goal) if goal else ()
        printed = tally(dashboard_settings, *asked, "--by", by, *with_goal, "--json")
        query = {"by": by, "source": source, **({"goal": goal} if goal else {}), **RANGE}
        assert printed == from_api(api, dashboard_settings, "breakdown", site=site, **query), by
    assert tally(dashboard_settings, *asked, "--by", "prop:plan", "--json") == [
        {"value": "pro", "events": 2, "visitors": 2},
        {"value": "free", "events": 1, "visitors": 1},
    ]
    conversions = tally(dashboard_settings, *asked, "--goals", "--json")
    assert conversions == from_api(api, dashboard_settings, "goals", site=site, source=source, **RANGE)
    assert {(row["goal"], row["visitors"]) for row in conversions} == {("Signup", 3), ("Visit /pricing", 2)}
    lines = run_tally(os.environ | dashboard_settings.environment(), *asked, "--goals").stdout.splitlines()
    assert "Signup\t3\t3\t0.5" in lines, lines  # 3 of the day's 6 visitors


def test_realtime_prints_the_live_visitors_and_the_last_30_minutes_by_page(
    dashboard_settings: Settings, api: FlaskClient, site: str
) -> None:
    # Seconds old when written here, well inside the 5 minutes of live visitors when read.
    now = datetime.now(UTC)
    rows, columns = archive_rows(
        [page_view(site, f"live{i}", now - timedelta(seconds=10 + i), "/now", country="FR") for i in range(3)]
    )
    connect(dashboard_settings).insert("events", rows, column_names=columns)
    live = tally(dashboard_settings, "realtime", site, "--source", "raw", "--json")
    assert live == from_api(api, dashboard_settings, "realtime", site=site, source="raw")
    assert live["visitors"] == 3
    pages = tally(dashboard_settings, "realtime", site, "--breakdown", "pages", "--json")
    answered = from_api(api, dashboard_settings, "realtime", site=site, breakdown="pages")
    assert pages["results"] == answered["results"] == [{"value": "/now", "visitors": 3, "pageviews": 3}]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["stats", "x.example.com", "--period", "fortnight"], "--period:"),
        (["stats", "x.example.com", "--by", "shoe_size"], "--by:"),
        (["stats", "x.example.com", "--limit", "0", "--by", "path"], "--limit:"),
        (["realtime", "x.example.com", "--breakdown", "cities"], "--breakdown:"),
        (["stats", "x.example.com", "--by", "path", "--goal", "Signup"], "--goal: only with"),
        (["stats", "x.example.com", "--goals", "--by", "path"], "--goals: a report of its own"),
        (["stats", "x.example.com", "--interval", "day", "--by", "path"], "--interval: a timeseries"),
        (["stats", "x.example.com", "--interval", "fortnight"], "--interval: must be one of"),
    ],
)
def test_a_bad_option_is_one_line_naming_it(
    dashboard_settings: Settings, arguments: list[str], message: str
) -> None:
    done = run_tally(os.environ | dashboard_settings.environment(), *arguments)
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"tally: {message}"), done.stderr
