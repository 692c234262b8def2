"""`POST /api/v2/query` for what Tally's fixed reports refused and the stats engine now answers
(dashboard/http_api/plausible/engine.py, stats/raw_sql.py): several dimensions, visit metrics by an event
dimension, a visit property inside `or`, has_done / has_not_done, case-insensitive matching,
matches_wildcard, percentage and exit_rate, with the numbers Plausible's definitions give on a small
archive. The engine's planner (stats/planner.py) answers visit metrics by and under visit
properties from the stream jobs' sessions (meta.source "agg", here built from the archive by
storage/rollup_backfill.py as the stream jobs build it), everything else from the archive
(meta.source "raw")."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage import goals as goal_store
from storage.client import connect
from storage.rollup_backfill import backfill_rollups
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures import stats_reference
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

SITE = "plausible-engine.example.com"
DAY = datetime(2026, 11, 10, tzinfo=UTC)
NOW = DAY + timedelta(days=1, hours=12)
ONE_DAY = ["2026-11-10", "2026-11-10"]
M = timedelta(minutes=1)


def at(hours: float) -> datetime:
    return DAY + timedelta(hours=hours)


EVENTS = stats_reference.three_visits(SITE, DAY)


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings) -> FlaskClient:
    client: Client = connect(dashboard_settings)
    rows, columns = archive_rows(EVENTS)
    client.insert("events", rows, column_names=columns)
    add_site(client, SITE)
    backfill_rollups(client, SITE, DAY.date(), (DAY + timedelta(days=1)).date())
    return build_app(dashboard_settings, clock=lambda: NOW).server.test_client()


@pytest.fixture(scope="module")
def auth(dashboard_settings: Settings) -> dict[str, str]:
    return {"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"}


def post(api: FlaskClient, auth: dict[str, str], source: str = "agg", **body: Any) -> tuple[int, Any]:
    document = {"site_id": SITE, "date_range": ONE_DAY, **body}
    response = api.post("/api/v2/query", json=document, headers=auth, query_string={"source": source})
    return response.status_code, response.get_json()


def results(api: FlaskClient, auth: dict[str, str], source: str = "raw", **body: Any) -> list[list[Any]]:
    """[dimensions..., metrics...] per row, asserting which source answered (`raw` unless told:
    what most of these queries ask, sessions does not hold)."""
    status, answer = post(api, auth, **body)
    assert status == 200, answer
    assert answer["meta"]["source"] == source
    return [[*row["dimensions"], *row["metrics"]] for row in answer["results"]]


def test_source_by_page(api: FlaskClient, auth: dict[str, str]) -> None:
    rows = results(
        api, auth, metrics=["visitors", "pageviews"], dimensions=["visit:source", "event:page"],
        order_by=[["visit:source", "desc"], ["event:page", "asc"]],
    )  # fmt: skip
    assert rows == [
        ["twitter.com", "/", 1, 1],
        ["twitter.com", "/pricing", 1, 1],
        ["google.com", "/pricing", 1, 1],
        ["Direct / None", "/", 1, 1],
        ["Direct / None", "/PRICING/Plans", 1, 1],
    ]


def test_day_by_country(api: FlaskClient, auth: dict[str, str]) -> None:
    rows = results(api, auth, metrics=["visitors", "visits"], dimensions=["time:day", "visit:country"])
    assert sorted(rows) == [["2026-11-10", "DE", 1, 1], ["2026-11-10", "US", 2, 2]]


def test_bounce_rate_and_duration_by_page(api: FlaskClient, auth: dict[str, str]) -> None:
    """Visit metrics by the page come from `sessions` (each visit under each page it viewed)."""
    rows = results(
        api, auth, "agg", metrics=["visits", "bounce_rate", "visit_duration"], dimensions=["event:page"],
        order_by=[["event:page", "asc"]],
    )  # fmt: skip
    assert rows == [["/", 2, 0, 150], ["/PRICING/Plans", 1, 0, 180], ["/pricing", 2, 50, 60]]


def test_has_done_and_has_not_done(api: FlaskClient, auth: dict[str, str]) -> None:
    signed_up = ["has_done", ["is", "event:name", ["Signup"]]]
    assert results(api, auth, metrics=["visitors", "pageviews"], filters=[signed_up]) == [[1, 2]]
    not_signed_up = ["has_not_done", ["is", "event:name", ["Signup"]]]
    assert results(api, auth, metrics=["visitors", "pageviews"], filters=[not_signed_up]) == [[2, 3]]


def test_case_insensitive_contains(api: FlaskClient, auth: dict[str, str]) -> None:
    insensitive = ["contains", "event:page", ["PRICING"], {"case_sensitive": False}]
    assert results(api, auth, metrics=["pageviews"], filters=[insensitive]) == [[3]]


def test_matches_wildcard(api: FlaskClient, auth: dict[str, str]) -> None:
    glob = ["matches_wildcard", "event:page", ["/PRICING/**"]]
    assert results(api, auth, metrics=["pageviews"], filters=[glob]) == [[1]]


def test_visit_property_inside_or(api: FlaskClient, auth: dict[str, str]) -> None:
    either = ["or", [["is", "visit:source", ["twitter.com"]], ["is", "event:page", ["/PRICING/Plans"]]]]
    # visits from `sessions`, visitors from its visits' pages and the custom events: agg, as raw
    assert results(api, auth, "agg", metrics=["visitors", "visits"], filters=[either]) == [[2, 2]]
    status, archive = post(api, auth, source="raw", metrics=["visitors", "visits"], filters=[either])
    assert status == 200 and [row["metrics"] for row in archive["results"]] == [[2, 2]]


def test_percentage_and_exit_rate(api: FlaskClient, auth: dict[str, str]) -> None:
    shares = results(api, auth, metrics=["visitors", "percentage"], dimensions=["visit:country"])
    assert shares == [["US", 2, 66.7], ["DE", 1, 33.3]]
    exits = results(
        api,
        auth,
        metrics=["pageviews", "exit_rate"],
        dimensions=["event:page"],
        order_by=[["event:page", "asc"]],
    )
    assert exits == [["/", 2, 0.0], ["/PRICING/Plans", 1, 100.0], ["/pricing", 2, 100.0]]


def test_a_query_the_reports_answer_still_goes_their_way(api: FlaskClient, auth: dict[str, str]) -> None:
    status, answer = post(api, auth, source="raw", metrics=["visitors"], dimensions=["visit:source"])
    assert status == 200 and answer["meta"]["source"] == "raw"
    assert sorted(row["dimensions"] + row["metrics"] for row in answer["results"]) == [
        ["Direct / None", 1], ["google.com", 1], ["twitter.com", 1],
    ]  # fmt: skip


def test_engine_refusals_are_worded_as_plausibles(api: FlaskClient, auth: dict[str, str]) -> None:
    status, answer = post(api, auth, metrics=["exit_rate"], dimensions=["visit:source", "event:page"])
    assert status == 400
    assert answer["error"] == (
        "Invalid metrics[0]: exit_rate needs the one dimension event:page or visit:exit_page."
    )
    four = ["event:page", "visit:source", "visit:country", "time:day"]
    status, answer = post(api, auth, metrics=["visitors"], dimensions=four)
    assert status == 400
    assert answer["error"] == f"Invalid dimensions '{json.dumps(four)}': at most 3 dimensions, not 4."
    status, answer = post(api, auth, metrics=["visitors"], filters=[["has_done", ["is", "event:page"]]])
    assert status == 400 and answer["error"] == """Invalid filter '["is", "event:page"]'."""


def test_has_done_a_goal(api: FlaskClient, auth: dict[str, str], dashboard_settings: Settings) -> None:
    client = connect(dashboard_settings)
    goal_store.add_goal(client, goal_store.make_goal(SITE, "Signup"))
    goal_store.add_goal(client, goal_store.make_goal(SITE, page_pattern="/PRICING/*"))
    signed_up = ["has_done", ["is", "event:goal", ["Signup"]]]
    assert results(api, auth, metrics=["visitors", "visits"], filters=[signed_up]) == [[1, 1]]
    saw_plans = ["has_not_done", ["is", "event:goal", ["Visit /PRICING/*"]]]
    assert results(api, auth, metrics=["visitors"], filters=[saw_plans]) == [[2]]
    unknown = ["has_done", ["is", "event:goal", ["Nope"]]]
    status, answer = post(api, auth, metrics=["visitors"], filters=[unknown])
    assert status == 400
    assert answer["error"] == "Invalid filters: the goal 'Nope' is not configured for this site."


def test_a_dimension_only_the_catalogue_names_is_answered(
    api: FlaskClient, auth: dict[str, str], dashboard_settings: Settings
) -> None:
    """event:hostname is one catalogue entry (docs/architecture.md, "Adding a dimension"): the
    reports never knew it, the engine reads it as a breakdown and as a filter."""
    site = "hosts.example.com"
    client = connect(dashboard_settings)
    views = [
        page_view(site, "h1", at(9), "/", hostname="a.example.com"),
        page_view(site, "h1", at(9) + M, "/docs", hostname="docs.example.com"),
        page_view(site, "h2", at(10), "/", hostname="a.example.com"),
    ]
    rows, columns = archive_rows(views)
    client.insert("events", rows, column_names=columns)
    add_site(client, site)
    hosts = results(api, auth, site_id=site, metrics=["visitors", "pageviews"], dimensions=["event:hostname"])
    assert hosts == [["a.example.com", 2, 2], ["docs.example.com", 1, 1]]
    docs = ["is", "event:hostname", ["docs.example.com"]]
    assert results(api, auth, site_id=site, metrics=["visits", "pageviews"], filters=[docs]) == [[1, 1]]


def test_comparisons_and_time_labels_work_with_two_dimensions(api: FlaskClient, auth: dict[str, str]) -> None:
    status, answer = post(
        api, auth, metrics=["visitors"], dimensions=["time:day", "visit:country"],
        date_range=["2026-11-10", "2026-11-11"],
        include={"time_labels": True, "comparisons": {"mode": "previous_period"}},
    )  # fmt: skip
    assert status == 200, answer
    assert answer["meta"]["time_labels"] == ["2026-11-10", "2026-11-11"]
    assert sorted((row["dimensions"], row["metrics"]) for row in answer["results"]) == [
        (["2026-11-10", "DE"], [1]), (["2026-11-10", "US"], [2]),
    ]  # fmt: skip
    assert all(row["comparison"]["metrics"] == [0] for row in answer["results"])


def test_visit_metrics_by_visit_properties_are_answered_from_sessions(
    api: FlaskClient, auth: dict[str, str], dashboard_settings: Settings
) -> None:
    """Bounce rate by source and entry page under a UTM medium filter: every metric from the
    sessions table (meta.source "agg"), the same numbers as the archive's (source=raw)."""
    site = "sessions-door.example.com"
    social = {"utm_medium": "social"}
    views = [
        page_view(site, "a", at(9), "/", referrer_domain="twitter.com", **social),
        page_view(site, "a", at(9) + 2 * M, "/pricing", referrer_domain="twitter.com", **social),
        page_view(site, "b", at(10), "/pricing", referrer_domain="twitter.com", **social),
        page_view(site, "c", at(11), "/", referrer_domain="facebook.com", **social),
        page_view(site, "d", at(12), "/", referrer_domain="google.com", utm_medium="cpc"),
    ]
    client = connect(dashboard_settings)
    rows, columns = archive_rows(views)
    client.insert("events", rows, column_names=columns)
    add_site(client, site)
    backfill_rollups(client, site, DAY.date(), (DAY + timedelta(days=1)).date())
    body = {
        "site_id": site,
        "metrics": ["bounce_rate", "visits", "visit_duration"],
        "dimensions": ["visit:source", "visit:entry_page"],
        "filters": [["is", "visit:utm_medium", ["social"]]],
        "order_by": [["visit:source", "desc"], ["visit:entry_page", "asc"]],
    }
    answers = {}
    for source in ("agg", "raw"):
        status, answer = post(api, auth, source=source, **body)
        assert status == 200, answer
        assert answer["meta"]["source"] == source
        answers[source] = [[*row["dimensions"], *row["metrics"]] for row in answer["results"]]
    assert answers["agg"] == answers["raw"]
    assert answers["agg"] == [
        ["twitter.com", "/", 0, 1, 120],
        ["twitter.com", "/pricing", 100, 1, 0],
        ["facebook.com", "/", 100, 1, 0],
    ]
