"""Visits under an event filter are whole visits (DESIGN.md, "Definitions"; Plausible's semantics): a
filter on page, country or a property keeps the visits holding a matching event, and their source,
entry page, bounce and duration are those of the whole visit; page views and visitors stay those of
the matching events. Asked through storage.queries on both sources, Tally's /api/v1 and Plausible's
/api/v2/query, against the real ClickHouse engine."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage import queries
from storage.queries import Condition, Source, StatsQuery
from tally.settings import Settings
from tests.fixtures.archive import stored_site
from tests.fixtures.cli import run_tally
from tests.fixtures.events import page_view
from tests.fixtures.stats_api import api_json

pytestmark = pytest.mark.integration

SITE = "event-filter-visits.example.com"
DAY = datetime(2026, 11, 12, tzinfo=UTC)
RANGE = {"from": "2026-11-12T00:00:00Z", "to": "2026-11-13T00:00:00Z"}
SOURCES: tuple[Source, ...] = ("raw", "agg")


def at(hour: int, minute: int = 0) -> datetime:
    return DAY + timedelta(hours=hour, minutes=minute)


# Five visits of five visitors:
#   twitter  from twitter.com, US: /, then /pricing 2 min later      no bounce, 120 s
#   google   from google.com, DE: /pricing alone                     bounce, 0 s
#   hn       from news.ycombinator.com: /, /docs                     (never /pricing)
#   author   from twitter.com: /, then /blog by alice 3 min later    no bounce, 180 s
#   signup   from github.com: /, then a Signup event with plan=pro   bounce, 0 s
EVENTS = [
    page_view(SITE, "twitter", at(10), "/", referrer_domain="twitter.com", country="US"),
    page_view(SITE, "twitter", at(10, 2), "/pricing", country="US"),
    page_view(SITE, "google", at(11), "/pricing", referrer_domain="google.com", country="DE"),
    page_view(SITE, "hn", at(12), "/", referrer_domain="news.ycombinator.com", country="US"),
    page_view(SITE, "hn", at(12, 5), "/docs", country="US"),
    page_view(SITE, "author", at(13), "/", referrer_domain="twitter.com", country="FR"),
    page_view(SITE, "author", at(13, 3), "/blog", country="FR", props={"author": "alice"}),
    page_view(SITE, "signup", at(14), "/", referrer_domain="github.com", country="GB"),
    page_view(SITE, "signup", at(14, 1), "/", name="Signup", country="GB", props={"plan": "pro"}),
]
PRICING = {"path": "/pricing"}


@pytest.fixture(scope="module")
def store(dashboard_settings: Settings) -> Client:
    return stored_site(dashboard_settings, SITE, EVENTS, DAY.date(), (DAY + timedelta(days=1)).date())


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings, store: Client) -> FlaskClient:
    return build_app(dashboard_settings, clock=lambda: DAY + timedelta(days=1)).server.test_client()


def day(filters: dict[str, str] | None = None, where: Condition | None = None) -> StatsQuery:
    return StatsQuery(SITE, DAY, DAY + timedelta(days=1), filters=filters or {}, where=where)


def visits_by(store: Client, q: StatsQuery, by: str, source: Source) -> dict[str, int]:
    return {
        row.value: int(row.totals["sessions"]) for row in queries.session_breakdown(store, q, by, 10, source)
    }


def both_sources(answer: Any) -> Any:
    """The answer of both sources, asserted equal."""
    raw, agg = (answer(source) for source in SOURCES)
    assert raw == agg
    return raw


def test_visits_viewing_a_page_keep_their_source_entry_bounce_and_duration(store: Client) -> None:
    totals = both_sources(lambda source: queries.aggregate(store, day(PRICING), source))
    assert totals == {
        "pageviews": 2,  # the /pricing page views only
        "visitors": 2,
        "sessions": 2,
        "bounce_rate": 0.5,  # the twitter visit went on from / to /pricing
        "avg_session_duration_s": 60.0,  # (120 + 0) / 2
    }
    sources = both_sources(lambda source: visits_by(store, day(PRICING), "referrer_domain", source))
    assert sources == {"twitter.com": 1, "google.com": 1}
    entries = both_sources(lambda source: visits_by(store, day(PRICING), "entry_path", source))
    assert entries == {"/": 1, "/pricing": 1}


def test_a_page_filter_breakdown_counts_the_matching_page_views_of_whole_visits(store: Client) -> None:
    rows = both_sources(
        lambda source: queries.session_breakdown(store, day(PRICING), "entry_path", 10, source)
    )
    assert {row.value: (row.totals["pageviews"], row.totals["bounce_rate"]) for row in rows} == {
        "/": (1, 0.0),
        "/pricing": (1, 1.0),
    }
    sources = both_sources(
        lambda source: queries.breakdown(store, day(PRICING), "referrer_domain", 10, source)
    )
    assert {(row.value, row.pageviews, row.visitors) for row in sources} == {
        ("twitter.com", 1, 1),
        ("google.com", 1, 1),
    }


def test_page_filter_as_an_expression_counts_whole_visits(store: Client) -> None:
    where = Condition("is", "path", ("/pricing",))
    totals = both_sources(lambda source: queries.aggregate(store, day(where=where), source))
    assert (totals["sessions"], totals["bounce_rate"], totals["avg_session_duration_s"]) == (2, 0.5, 60.0)


def test_session_timeseries_under_a_page_filter_holds_whole_visits(store: Client) -> None:
    points = both_sources(lambda source: queries.session_timeseries(store, day(PRICING), "hour", source))
    counted = {
        point.t.hour: (point.sessions, point.bounces, point.duration_ms) for point in points if point.sessions
    }
    assert counted == {10: (1, 0, 120_000), 11: (1, 1, 0)}


def test_sessions_list_under_a_page_filter_shows_whole_visits(store: Client) -> None:
    listed = both_sources(lambda source: queries.sessions(store, day(PRICING), 10, source))
    assert [(s.visitor_id, s.entry_path, s.exit_path, s.pageviews, s.referrer_domain) for s in listed] == [
        ("google", "/pricing", "/pricing", 1, "google.com"),
        ("twitter", "/", "/pricing", 2, "twitter.com"),
    ]


def test_country_and_page_filters_keep_the_whole_visit(store: Client) -> None:
    q = day({"country": "US", "path": "/pricing"})
    totals = both_sources(lambda source: queries.aggregate(store, q, source))
    assert (totals["pageviews"], totals["sessions"], totals["bounce_rate"]) == (1, 1, 0.0)
    assert totals["avg_session_duration_s"] == 120.0
    assert both_sources(lambda source: visits_by(store, q, "referrer_domain", source)) == {"twitter.com": 1}


def test_a_page_view_property_filter_keeps_the_whole_visit(store: Client) -> None:
    q = day({"props.author": "alice"})
    totals = both_sources(lambda source: queries.aggregate(store, q, source))
    assert totals == {
        "pageviews": 1,
        "visitors": 1,
        "sessions": 1,
        "bounce_rate": 0.0,
        "avg_session_duration_s": 180.0,
    }
    assert both_sources(lambda source: visits_by(store, q, "entry_path", source)) == {"/": 1}
    assert both_sources(lambda source: visits_by(store, q, "referrer_domain", source)) == {"twitter.com": 1}


def test_a_custom_event_property_filter_keeps_the_visit_holding_the_event(store: Client) -> None:
    """A custom event is no page view, but the visit it happened in is the one that holds it."""
    q = day({"props.plan": "pro"})
    totals = both_sources(lambda source: queries.aggregate(store, q, source))
    assert (totals["pageviews"], totals["sessions"], totals["bounce_rate"]) == (0, 1, 1.0)
    assert both_sources(lambda source: visits_by(store, q, "referrer_domain", source)) == {"github.com": 1}


def test_unfiltered_visits_are_unchanged(store: Client) -> None:
    totals = both_sources(lambda source: queries.aggregate(store, day(), source))
    assert (totals["pageviews"], totals["sessions"], totals["bounce_rate"]) == (8, 5, 0.4)


@pytest.mark.parametrize("source", SOURCES)
def test_stats_api_page_filter_counts_whole_visits(
    api: FlaskClient, dashboard_settings: Settings, source: str
) -> None:
    query = {"site": SITE, **RANGE, "source": source, "filters": json.dumps(PRICING)}
    totals = api_json(api, dashboard_settings, "/stats/aggregate", **query)
    assert (totals["pageviews"], totals["visitors"], totals["sessions"]) == (2, 2, 2)
    assert (totals["bounce_rate"], totals["avg_session_duration_s"]) == (0.5, 60.0)
    sources = api_json(api, dashboard_settings, "/stats/breakdown", by="referrer_domain", **query)
    assert {row["value"]: row["visitors"] for row in sources} == {"twitter.com": 1, "google.com": 1}
    entries = api_json(api, dashboard_settings, "/stats/breakdown", by="entry_path", **query)
    assert {row["value"]: row["pageviews"] for row in entries} == {"/": 1, "/pricing": 1}


def v2(api: FlaskClient, settings: Settings, **body: Any) -> list[list[Any]]:
    response = api.post(
        "/api/v2/query",
        json={"site_id": SITE, "date_range": ["2026-11-12", "2026-11-12"], **body},
        headers={"Authorization": f"Bearer {settings.resolved_api_key()}"},
    )
    assert response.status_code == 200, response.get_json()
    return [[*row["dimensions"], *row["metrics"]] for row in response.get_json()["results"]]


def test_plausible_v2_page_filter_counts_whole_visits(api: FlaskClient, dashboard_settings: Settings) -> None:
    filters = [["is", "event:page", ["/pricing"]]]
    metrics = ["visits", "bounce_rate", "visit_duration", "pageviews", "visitors"]
    assert v2(api, dashboard_settings, metrics=metrics, filters=filters) == [[2, 50, 60, 2, 2]]
    by_source = v2(
        api, dashboard_settings, metrics=["visits", "bounce_rate", "visit_duration"], filters=filters,
        dimensions=["visit:source"], order_by=[["visit:source", "asc"]],
    )  # fmt: skip
    assert by_source == [["google.com", 1, 100, 0], ["twitter.com", 1, 0, 120]]


def test_plausible_v2_visit_and_event_filters_together_count_whole_visits(
    api: FlaskClient, dashboard_settings: Settings
) -> None:
    """A visit filter next to an event filter (Plausible's visits among those holding the event)."""
    filters = [["is", "visit:source", ["twitter.com"]], ["is", "event:page", ["/pricing"]]]
    metrics = ["visits", "bounce_rate", "visit_duration", "pageviews"]
    assert v2(api, dashboard_settings, metrics=metrics, filters=filters) == [[1, 0, 120, 1]]
    by_entry = v2(
        api, dashboard_settings, metrics=["visits"], filters=filters, dimensions=["visit:entry_page"]
    )
    assert by_entry == [["/", 1]]


@pytest.mark.parametrize("source", SOURCES)
def test_cli_page_filter_prints_whole_visits(
    dashboard_settings: Settings, store: Client, source: str
) -> None:
    done = run_tally(
        os.environ | dashboard_settings.environment(), "stats", SITE, "--from", RANGE["from"], "--to",
        RANGE["to"], "--filters", json.dumps(PRICING), "--source", source, "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert (printed["pageviews"], printed["sessions"], printed["bounce_rate"]) == (2, 2, 0.5)
    assert printed["avg_session_duration_s"] == 60.0


def test_plausible_v1_page_filter_counts_whole_visits(api: FlaskClient, dashboard_settings: Settings) -> None:
    """Plausible's v1 parameters (`site_id`, `event:page==…`) on the same report."""
    metrics = "visits,bounce_rate,visit_duration,pageviews"
    response = api.get(
        "/api/v1/stats/aggregate",
        query_string={"site_id": SITE, "period": "day", "date": "2026-11-12",
                      "filters": "event:page==/pricing", "metrics": metrics},
        headers={"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"},
    )  # fmt: skip
    assert response.status_code == 200, response.get_json()
    results = response.get_json()["results"]
    assert {name: result["value"] for name, result in results.items()} == {
        "visits": 2,
        "bounce_rate": 50,
        "visit_duration": 60,
        "pageviews": 2,
    }
