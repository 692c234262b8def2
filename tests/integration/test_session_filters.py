"""Filters on a visit's acquisition (channel, source, referrer, the five UTM fields) on the stats
API and Plausible's v2 query, both sources, with known answers: a filter keeps the events of the
sessions whose property passes (storage/queries/contract.py, "session filters")."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from dashboard.app import build_app
from tally.settings import Settings
from tests.fixtures.archive import stored_site
from tests.fixtures.events import engagement_event, page_view
from tests.fixtures.stats_api import api_json

pytestmark = pytest.mark.integration

SITE = "session-filters.example.com"
DAY = datetime(2026, 11, 10, tzinfo=UTC)
RANGE = {"from": "2026-11-10T00:00:00Z", "to": "2026-11-11T00:00:00Z"}
GOOGLE = {"referrer_domain": "www.google.com"}
NEWSLETTER = {
    "utm_source": "newsletter", "utm_medium": "email", "utm_campaign": "launch",
    "utm_content": "header", "utm_term": "kafka",
}  # fmt: skip
ADS = {"referrer_domain": "www.google.com", "utm_source": "google", "utm_medium": "cpc"}


def at(hour: int, minute: int = 0) -> datetime:
    return DAY + timedelta(hours=hour, minutes=minute)


# Five sessions of four visitors:
#   organic  Organic Search  /, /pricing, a Signup event            2 page views
#   mail     Email           /                                      1
#   twice    Direct          /pricing;  two hours later:             1
#            Paid Search     /, /pricing                            2
#   social   Organic Social  /blog, engaged 12 s (so no bounce)     1
EVENTS = [
    page_view(SITE, "organic", at(1), "/", **GOOGLE),
    page_view(SITE, "organic", at(1, 2), "/pricing", **GOOGLE),
    page_view(SITE, "organic", at(1, 3), "/pricing", name="Signup", **GOOGLE),
    page_view(SITE, "mail", at(2), "/", **NEWSLETTER),
    page_view(SITE, "twice", at(3), "/pricing"),
    page_view(SITE, "twice", at(5), "/", **ADS),
    page_view(SITE, "twice", at(5, 1), "/pricing", **ADS),
    page_view(SITE, "social", at(6), "/blog", referrer_domain="l.facebook.com"),
    engagement_event(SITE, "social", at(6, 1), "/blog", 12_000),
]


@pytest.fixture(scope="module")
def store(dashboard_settings: Settings) -> Client:
    return stored_site(dashboard_settings, SITE, EVENTS, DAY.date(), (DAY + timedelta(days=1)).date())


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings, store: Client) -> FlaskClient:
    return build_app(dashboard_settings, clock=lambda: DAY + timedelta(days=1)).server.test_client()


def get(api: FlaskClient, settings: Settings, path: str, **params: str) -> Any:
    return api_json(api, settings, path, **{"site": SITE, **RANGE, **params})


def v2(api: FlaskClient, settings: Settings, filters: list, **extra: Any) -> list[list[Any]]:
    response = api.post(
        "/api/v2/query",
        json={"site_id": SITE, "metrics": ["visitors", "visits", "pageviews"],
              "date_range": ["2026-11-10", "2026-11-10"], "filters": filters, **extra},
        headers={"Authorization": f"Bearer {settings.resolved_api_key()}"},
    )  # fmt: skip
    assert response.status_code == 200, response.get_json()
    return [[*row["dimensions"], *row["metrics"]] for row in response.get_json()["results"]]


# filter → (page views, visitors, sessions)
ACQUISITION_FILTERS = {
    "channel=Organic Search": ({"channel": "Organic Search"}, (2, 1, 1)),
    "channel=Paid Search": ({"channel": "Paid Search"}, (2, 1, 1)),
    "channel=Direct": ({"channel": "Direct"}, (1, 1, 1)),
    "referrer": ({"referrer_domain": "www.google.com"}, (4, 2, 2)),
    "utm_source": ({"utm_source": "newsletter"}, (1, 1, 1)),
    "utm_medium": ({"utm_medium": "cpc"}, (2, 1, 1)),
    "utm_campaign": ({"utm_campaign": "launch"}, (1, 1, 1)),
    "utm_content": ({"utm_content": "header"}, (1, 1, 1)),
    "utm_term": ({"utm_term": "kafka"}, (1, 1, 1)),
    "entry page": ({"entry_path": "/pricing"}, (1, 1, 1)),
    "with a page": ({"channel": "Paid Search", "path": "/pricing"}, (1, 1, 1)),
}


@pytest.mark.parametrize("source", ["raw", "agg"])
@pytest.mark.parametrize("case", sorted(ACQUISITION_FILTERS))
def test_acquisition_filter_keeps_its_sessions_events(
    api: FlaskClient, dashboard_settings: Settings, case: str, source: str
) -> None:
    filters, (pageviews, visitors, sessions) = ACQUISITION_FILTERS[case]
    totals = get(api, dashboard_settings, "/stats/aggregate", source=source, filters=json.dumps(filters))
    assert (totals["pageviews"], totals["visitors"], totals["sessions"]) == (pageviews, visitors, sessions)


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_channel_filter_on_breakdowns_and_goals(
    api: FlaskClient, dashboard_settings: Settings, source: str
) -> None:
    paid = json.dumps({"channel": "Paid Search"})
    pages = get(api, dashboard_settings, "/stats/breakdown", by="path", source=source, filters=paid)
    assert {row["value"]: row["pageviews"] for row in pages} == {"/": 1, "/pricing": 1}
    organic = json.dumps({"channel": "Organic Search"})
    names = get(api, dashboard_settings, "/stats/breakdown", by="event:name", source=source, filters=organic)
    assert [(row["value"], row["events"]) for row in names] == [("Signup", 1)]
    assert (
        get(api, dashboard_settings, "/stats/breakdown", by="event:name", source=source, filters=paid) == []
    )
    # the engagement event belongs to the social session: one page, 12 s engaged, no bounce
    social = json.dumps({"channel": "Organic Social"})
    totals = get(api, dashboard_settings, "/stats/aggregate", source=source, filters=social)
    assert (totals["sessions"], totals["bounce_rate"]) == (1, 0.0)
    channels = get(api, dashboard_settings, "/stats/breakdown", by="channel", source=source, filters=social)
    assert [(row["value"], row["visitors"]) for row in channels] == [("Organic Social", 1)]


# Plausible's filter → [visitors, visits, pageviews]
PLAUSIBLE_CHANNEL_FILTERS = {
    "is": ([["is", "visit:channel", ["Organic Search"]]], [1, 1, 2]),
    "is_not": ([["is_not", "visit:channel", ["Direct"]]], [4, 4, 6]),
    "contains": ([["contains", "visit:channel", ["Search"]]], [2, 2, 4]),
    "matches": ([["matches", "visit:channel", ["^(Email|Organic Social)$"]]], [2, 2, 2]),
    "or": (
        [["or", [["is", "visit:channel", ["Direct"]], ["is", "visit:utm_campaign", ["launch"]]]]], [2, 2, 2]
    ),
    "and": (
        [["contains", "visit:channel", ["Search"]], ["is", "visit:source", ["www.google.com"]]], [2, 2, 4]
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(PLAUSIBLE_CHANNEL_FILTERS))
def test_plausible_visit_channel_filter(api: FlaskClient, dashboard_settings: Settings, case: str) -> None:
    filters, expected = PLAUSIBLE_CHANNEL_FILTERS[case]
    assert v2(api, dashboard_settings, filters) == [expected]


def test_plausible_channel_filter_by_channel(api: FlaskClient, dashboard_settings: Settings) -> None:
    rows = v2(
        api, dashboard_settings, [["contains", "visit:channel", ["Search"]]], dimensions=["visit:channel"],
        order_by=[["visit:channel", "asc"]],
    )  # fmt: skip
    assert rows == [["Organic Search", 1, 1, 2], ["Paid Search", 1, 1, 2]]


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_v1_expression_filters_on_channel(
    api: FlaskClient, dashboard_settings: Settings, source: str
) -> None:
    """Tally's own v1 API takes Plausible's filter list (Tally's dimension names) for is_not,
    contains, matches and or."""
    either = [["or", [["is", "channel", ["Direct"]], ["contains", "channel", ["Social"]]]]]
    totals = get(api, dashboard_settings, "/stats/aggregate", source=source, filters=json.dumps(either))
    assert (totals["pageviews"], totals["visitors"], totals["sessions"]) == (2, 2, 2)
    not_direct = [["is_not", "channel", ["Direct"]], ["matches", "channel", ["Search$"]]]
    totals = get(api, dashboard_settings, "/stats/aggregate", source=source, filters=json.dumps(not_direct))
    assert (totals["pageviews"], totals["visitors"], totals["sessions"]) == (4, 2, 2)


def test_unknown_filter_names_the_acquisition_dimensions(
    api: FlaskClient, dashboard_settings: Settings
) -> None:
    response = api.get(
        "/api/v1/stats/aggregate",
        query_string={"site": SITE, **RANGE, "filters": json.dumps({"chanel": "Direct"})},
        headers={"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"},
    )
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error.startswith("filters") and "channel" in error and "utm_term" in error


def test_a_pattern_that_is_no_re2_is_a_400(api: FlaskClient, dashboard_settings: Settings) -> None:
    response = api.get(
        "/api/v1/stats/aggregate",
        query_string={"site": SITE, **RANGE, "filters": json.dumps([["matches", "channel", ["Search("]]])},
        headers={"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"},
    )
    assert response.status_code == 400
    assert response.get_json()["error"].startswith("filters: not an RE2 regular expression: 'Search('")
    response = api.post(
        "/api/v2/query",
        json={"site_id": SITE, "metrics": ["visitors"], "date_range": "7d",
              "filters": [["matches", "visit:channel", ["("]]]},
        headers={"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"},
    )  # fmt: skip
    assert response.status_code == 400
    assert "not an RE2 regular expression" in response.get_json()["error"]


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_channel_filter_on_a_funnel(api: FlaskClient, dashboard_settings: Settings, source: str) -> None:
    steps = json.dumps([{"page": "/"}, {"page": "/pricing"}])
    for channel, reached in (("Paid Search", [1, 1]), ("Email", [1, 0]), ("Direct", [0, 0])):
        funnel = get(
            api, dashboard_settings, "/stats/funnel", steps=steps, source=source,
            filters=json.dumps({"channel": channel}),
        )  # fmt: skip
        assert [step["visitors"] for step in funnel["steps"]] == reached, channel


def test_plausible_v1_channel_filter(api: FlaskClient, dashboard_settings: Settings) -> None:
    """Plausible's v1 parameters on Tally's v1 path: `visit:channel==…` and `!=`."""
    for filters, visitors in (("visit:channel==Organic Search|Email", 2), ("visit:channel!=Direct", 4)):
        response = api.get(
            "/api/v1/stats/aggregate",
            query_string={"site_id": SITE, "period": "day", "date": "2026-11-10", "metrics": "visitors",
                          "filters": filters},
            headers={"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"},
        )  # fmt: skip
        assert response.status_code == 200, response.get_json()
        assert response.get_json()["results"]["visitors"]["value"] == visitors, filters
