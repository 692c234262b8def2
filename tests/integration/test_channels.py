"""Acquisition channels (storage/channels.py, GA4's default channel grouping) on the stats API's
`by=channel` and Plausible's `visit:channel`, both sources: one session per rule, each landing
in the channel the documented rules name."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from dashboard.app import build_app
from tally.settings import Settings
from tests.fixtures.archive import stored_site
from tests.fixtures.events import page_view
from tests.fixtures.stats_api import api_json

pytestmark = pytest.mark.integration

SITE = "channels.example.com"
DAY = datetime(2026, 11, 10, tzinfo=UTC)
RANGE = {"from": "2026-11-10T00:00:00Z", "to": "2026-11-11T00:00:00Z"}

# visitor → (referrer_domain, utm_source, utm_medium, expected channel)
SESSIONS = {
    "direct": ("", "", "", "Direct"),
    "google": ("www.google.co.uk", "", "", "Organic Search"),
    "ddg": ("duckduckgo.com", "", "", "Organic Search"),
    "organic-medium": ("", "newsletter-x", "organic", "Organic Search"),
    "adwords": ("www.google.com", "google", "cpc", "Paid Search"),
    "facebook": ("l.facebook.com", "", "", "Organic Social"),
    "hn": ("news.ycombinator.com", "", "", "Organic Social"),
    "fb-ads": ("", "facebook", "paid_social", "Paid Social"),
    "banner": ("", "adnetwork", "banner", "Display"),
    "ppc-other": ("", "adnetwork", "ppc", "Paid Other"),
    "newsletter": ("", "newsletter", "email", "Email"),
    "partner": ("", "partner", "affiliate", "Affiliates"),
    "blog": ("someblog.example.org", "", "", "Referral"),
    "box": ("box.com", "", "", "Referral"),  # not x.com: a name matches whole labels only
    "unknown": ("", "foo", "", "Unassigned"),
}


@pytest.fixture(scope="module")
def store(dashboard_settings: Settings) -> Client:
    events = []
    for index, (visitor, (referrer, source, medium, _)) in enumerate(SESSIONS.items()):
        start = DAY + timedelta(hours=1, minutes=index)
        fields = {"referrer_domain": referrer, "utm_source": source, "utm_medium": medium}
        events.append(page_view(SITE, visitor, start, "/", **fields))
        if visitor == "google":  # a second page: this session does not bounce
            events.append(page_view(SITE, visitor, start + timedelta(seconds=30), "/next", **fields))
    return stored_site(dashboard_settings, SITE, events, DAY.date(), (DAY + timedelta(days=1)).date())


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings, store: Client) -> FlaskClient:
    return build_app(dashboard_settings, clock=lambda: DAY + timedelta(days=1)).server.test_client()


def get(api: FlaskClient, settings: Settings, path: str, **params: str) -> Any:
    return api_json(api, settings, path, **{"site": SITE, **RANGE, **params})


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_each_rule_names_its_channel(api: FlaskClient, dashboard_settings: Settings, source: str) -> None:
    rows = get(api, dashboard_settings, "/stats/breakdown", by="channel", source=source, limit="20")
    expected: dict[str, int] = {}
    for _, _, _, channel in SESSIONS.values():
        expected[channel] = expected.get(channel, 0) + 1
    assert {row["value"]: row["visitors"] for row in rows} == expected
    assert next(row for row in rows if row["value"] == "Organic Search")["pageviews"] == 4
    total = get(api, dashboard_settings, "/stats/aggregate", source=source)
    assert sum(row["visitors"] for row in rows) == total["visitors"]


def test_plausible_visit_channel(api: FlaskClient, dashboard_settings: Settings) -> None:
    response = api.post(
        "/api/v2/query",
        json={"site_id": SITE, "metrics": ["visitors", "visits", "bounce_rate"],
              "date_range": ["2026-11-10", "2026-11-10"], "dimensions": ["visit:channel"],
              "order_by": [["visitors", "desc"], ["visit:channel", "asc"]]},
        headers={"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"},
    )  # fmt: skip
    assert response.status_code == 200, response.get_json()
    results = [[*row["dimensions"], *row["metrics"]] for row in response.get_json()["results"]]
    assert results[0] == ["Organic Search", 3, 3, 67]  # one of its three visits has two pages
    assert ["Direct", 1, 1, 100] in results


def test_unknown_dimension_names_channel_among_choices(
    api: FlaskClient, dashboard_settings: Settings
) -> None:
    response = api.get(
        "/api/v1/stats/breakdown",
        query_string={"site": SITE, **RANGE, "by": "chanel"},
        headers={"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"},
    )
    assert response.status_code == 400
    assert "channel" in response.get_json()["error"]
