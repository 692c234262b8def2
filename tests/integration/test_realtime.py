"""The realtime view on the stats API: `GET /api/v1/stats/realtime?breakdown=pages|sources|countries`
counts the last 30 minutes from the archive (storage/queries/realtime_breakdowns.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

SITE = "realtime.example.com"
NOW = datetime(2026, 11, 10, 12, 0, tzinfo=UTC)


def ago(minutes: float) -> datetime:
    return NOW - timedelta(minutes=minutes)


# a: came from google.com 50 minutes ago, still reading (an internal page view 10 minutes ago);
# b: from t.co 5 minutes ago, then another page; c: gone 40 minutes ago; d: in the future.
EVENTS = [
    page_view(SITE, "a", ago(50), "/", referrer_domain="google.com", country="DE"),
    page_view(SITE, "a", ago(10), "/pricing", country="DE"),
    page_view(SITE, "b", ago(5), "/blog", referrer_domain="t.co", country="US"),
    page_view(SITE, "b", ago(4), "/pricing", country="US"),
    page_view(SITE, "c", ago(40), "/", referrer_domain="bing.com", country="FR"),
    page_view(SITE, "d", NOW + timedelta(minutes=1), "/", country="FR"),
]


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings) -> FlaskClient:
    client: Client = connect(dashboard_settings)
    rows, columns = archive_rows(EVENTS)
    client.insert("events", rows, column_names=columns)
    add_site(client, SITE)
    return build_app(dashboard_settings, clock=lambda: NOW).server.test_client()


def realtime(api: FlaskClient, settings: Settings, **params: str) -> tuple[int, Any]:
    response = api.get(
        "/api/v1/stats/realtime",
        query_string={"site": SITE, **params},
        headers={"Authorization": f"Bearer {settings.resolved_api_key()}"},
    )
    return response.status_code, response.get_json()


def rows(answer: dict[str, Any]) -> list[tuple[str, int, int]]:
    return [(row["value"], row["visitors"], row["pageviews"]) for row in answer["results"]]


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_last_30_minutes_by_page_source_country(
    api: FlaskClient, dashboard_settings: Settings, source: str
) -> None:
    status, pages = realtime(api, dashboard_settings, breakdown="pages", source=source)
    assert status == 200, pages
    assert (pages["visitors"], pages["pageviews"], pages["since"]) == (2, 3, "2026-11-10T11:30:00+00:00")
    assert rows(pages) == [("/pricing", 2, 2), ("/blog", 1, 1)]
    # a's source is where its day began, though that page view is older than the window
    assert rows(realtime(api, dashboard_settings, breakdown="sources", source=source)[1]) == [
        ("t.co", 1, 2),
        ("google.com", 1, 1),
    ]
    assert rows(realtime(api, dashboard_settings, breakdown="countries", limit="1")[1]) == [("US", 1, 2)]


def test_live_counts_unchanged_without_breakdown(api: FlaskClient, dashboard_settings: Settings) -> None:
    assert realtime(api, dashboard_settings, source="raw") == (200, {"visitors": 1, "pageviews": 2})


def test_unknown_breakdown_is_a_400_naming_it(api: FlaskClient, dashboard_settings: Settings) -> None:
    status, answer = realtime(api, dashboard_settings, breakdown="cities")
    assert status == 400 and answer["error"].startswith("breakdown: must be one of pages, sources, countries")
