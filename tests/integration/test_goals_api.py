"""The stats API's goals, custom events and properties (issue 16), against the real engine:
GET /api/v1/stats/goals, breakdowns by=event:name and by=prop:KEY (with goal=), and the goal
and props.KEY filters, on both sources; the numbers are the known answers of a small archive."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage import goals as goal_store
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.events import archive_rows, page_view
from tests.fixtures.stats_api import api_json

pytestmark = pytest.mark.integration

SITE = "goals-api.example.com"
DAY = datetime(2026, 11, 10, tzinfo=UTC)
T0 = DAY + timedelta(hours=9)
RANGE = {"site": SITE, "from": "2026-11-10", "to": "2026-11-11"}


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


EVENTS = [
    *(page_view(SITE, visitor, at(0), "/") for visitor in ("a", "b", "c", "d")),
    page_view(SITE, "a", at(1), "/", name="Signup", props={"plan": "pro"}),
    page_view(SITE, "b", at(2), "/", name="Signup", props={"plan": "free"}),
    page_view(SITE, "b", at(3), "/", name="Purchase", revenue_amount="20", revenue_currency="EUR"),
    page_view(SITE, "c", at(4), "/", name="Purchase", revenue_amount="9.99", revenue_currency="EUR"),
    page_view(SITE, "c", at(5), "/", name="Purchase", revenue_amount="100", revenue_currency="GBP"),
    page_view(SITE, "d", at(6), "/checkout/pay"),
    page_view(SITE, "d", at(7), "/", name="engagement", props={"sd": "50"}),
]


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings) -> FlaskClient:
    client = connect(dashboard_settings)
    rows, columns = archive_rows(EVENTS)
    client.insert("events", rows, column_names=columns)
    add_site(client, SITE)
    for goal in (
        goal_store.make_goal(SITE, "Signup"),
        goal_store.make_goal(SITE, "Purchase", currency="EUR"),
        goal_store.make_goal(SITE, page_pattern="/checkout/*"),
    ):
        goal_store.add_goal(client, goal)
    return build_app(dashboard_settings, clock=lambda: DAY + timedelta(days=1)).server.test_client()


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_goals_endpoint(api: FlaskClient, dashboard_settings: Settings, source: str) -> None:
    assert api_json(api, dashboard_settings, "/stats/goals", **RANGE, source=source) == [
        {
            "goal": "Purchase",
            "kind": "event",
            "visitors": 2,
            "events": 3,
            "conversion_rate": 0.5,
            "revenue": {"currency": "EUR", "total": "29.99", "average": "15.00", "events": 2},
        },
        {
            "goal": "Signup",
            "kind": "event",
            "visitors": 2,
            "events": 2,
            "conversion_rate": 0.5,
            "revenue": None,
        },
        {
            "goal": "Visit /checkout/*",
            "kind": "page",
            "visitors": 1,
            "events": 1,
            "conversion_rate": 0.25,
            "revenue": None,
        },
    ]


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_custom_event_and_property_breakdowns(
    api: FlaskClient, dashboard_settings: Settings, source: str
) -> None:
    def breakdown(**params: str) -> list:
        return api_json(api, dashboard_settings, "/stats/breakdown", **RANGE, source=source, **params)

    assert breakdown(by="event:name") == [
        {"value": "Purchase", "events": 3, "visitors": 2},
        {"value": "Signup", "events": 2, "visitors": 2},
    ]
    assert breakdown(by="prop:plan") == [
        {"value": "free", "events": 1, "visitors": 1},
        {"value": "pro", "events": 1, "visitors": 1},
    ]
    assert breakdown(by="prop:plan", goal="Purchase") == []
    assert breakdown(by="prop:plan", goal="Signup", limit="1") == [
        {"value": "free", "events": 1, "visitors": 1}
    ]


def test_goal_filter_on_every_report(api: FlaskClient, dashboard_settings: Settings) -> None:
    signed_up = {**RANGE, "filters": json.dumps({"goal": "Signup"})}
    assert api_json(api, dashboard_settings, "/stats/aggregate", **signed_up)["visitors"] == 2
    assert api_json(api, dashboard_settings, "/stats/breakdown", **signed_up, by="event:name") == [
        {"value": "Signup", "events": 2, "visitors": 2},
        {"value": "Purchase", "events": 1, "visitors": 1},
    ]
    pro = {**RANGE, "filters": json.dumps({"props.plan": "pro"})}
    assert api_json(api, dashboard_settings, "/stats/breakdown", **pro, by="event:name") == [
        {"value": "Signup", "events": 1, "visitors": 1}
    ]
