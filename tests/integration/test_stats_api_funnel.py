"""GET /api/v1/stats/funnel against the real ClickHouse engine: the answer is the query
layer's funnel, with the source that answered; every bad `steps` is a 400 naming it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage.client import connect
from tally.settings import Settings
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

SITE = "stats-api-funnel.example.com"
DAY = datetime(2026, 11, 10, tzinfo=UTC)
T0 = DAY + timedelta(hours=9)
DAY_RANGE = {"site": SITE, "from": "2026-11-10T00:00:00Z", "to": "2026-11-11T00:00:00Z"}
CHECKOUT = [{"page": "/product/*"}, {"event": "Signup"}, {"page": "/thanks"}]

# a: product, sign-up, thanks (from Germany); b: product, sign-up; c: product only;
# d: the sign-up before the product page (step 1 only); e: nothing of the funnel.
EVENTS = [
    page_view(SITE, "a", T0, "/product/shoe", country="DE"),
    page_view(SITE, "a", T0 + timedelta(minutes=2), "/product/shoe", name="Signup"),
    page_view(SITE, "a", T0 + timedelta(minutes=3), "/thanks", country="DE"),
    page_view(SITE, "b", T0, "/product/hat"),
    page_view(SITE, "b", T0 + timedelta(minutes=9), "/", name="Signup"),
    page_view(SITE, "c", T0, "/product/hat"),
    page_view(SITE, "d", T0, "/", name="Signup"),
    page_view(SITE, "d", T0 + timedelta(minutes=1), "/product/hat"),
    page_view(SITE, "e", T0, "/"),
]


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings) -> FlaskClient:
    client: Client = connect(dashboard_settings)
    rows, columns = archive_rows(EVENTS)
    client.insert("events", rows, column_names=columns)
    return build_app(dashboard_settings, clock=lambda: T0 + timedelta(hours=1)).server.test_client()


@pytest.fixture(scope="module")
def auth(dashboard_settings: Settings) -> dict[str, str]:
    return {"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"}


def funnel(api: FlaskClient, auth: dict[str, str], steps: object, **extra: str) -> tuple[int, dict]:
    encoded = steps if isinstance(steps, str) else json.dumps(steps)
    response = api.get(
        "/api/v1/stats/funnel", query_string={**DAY_RANGE, "steps": encoded, **extra}, headers=auth
    )
    return response.status_code, response.get_json()


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_funnel_reports_each_step_with_dropoff_and_the_source_that_answered(
    api: FlaskClient, auth: dict[str, str], source: str
) -> None:
    status, body = funnel(api, auth, CHECKOUT, source=source)
    assert status == 200, body
    assert body["meta"].pop("funnel_days", None) == (
        # the API's clock says it is still 2026-11-10: an open day is computed live, not stored
        {"stored_days": 0, "computed_days": 0, "stored_from": None, "stored_to": None,
         "live": [["2026-11-10T00:00:00+00:00", "2026-11-11T00:00:00+00:00"]]}
        if source == "agg" else None
    )  # fmt: skip
    assert body == {
        "steps": [
            {"step": {"page": "/product/*"}, "visitors": 4, "sessions": 4, "dropoff": 0,
             "dropoff_rate": 0.0, "conversion_rate": 1.0},
            {"step": {"event": "Signup"}, "visitors": 2, "sessions": 2, "dropoff": 2,
             "dropoff_rate": 0.5, "conversion_rate": 0.5},
            {"step": {"page": "/thanks"}, "visitors": 1, "sessions": 1, "dropoff": 1,
             "dropoff_rate": 0.5, "conversion_rate": 0.25},
        ],
        "meta": {"source": source},
    }  # fmt: skip


def test_funnel_honours_filters_and_the_range(api: FlaskClient, auth: dict[str, str]) -> None:
    status, body = funnel(api, auth, CHECKOUT, filters=json.dumps({"country": "DE"}))
    assert status == 200, body
    assert [row["visitors"] for row in body["steps"]] == [1, 1, 1]
    status, body = funnel(api, auth, CHECKOUT, **{"from": "2026-11-11", "to": "2026-11-12"})
    assert status == 200, body
    assert [(row["visitors"], row["conversion_rate"]) for row in body["steps"]] == [(0, 0.0)] * 3


@pytest.mark.parametrize(
    ("steps", "problem"),
    [
        (None, "required"),
        ("", "required"),
        ("[{'page': '/x'}]", "not JSON"),
        ('{"page": "/x"}', "expected a JSON array"),
        ([{"page": "/x"}], "2 to 8 steps, not 1"),
        ([], "2 to 8 steps, not 0"),
        ([{"page": "/x"}] * 9, "2 to 8 steps, not 9"),
        ([{"page": "/x"}, {"page": ""}], "step 2: empty page"),
        ([{"page": "/x"}, {"event": "   "}], "step 2: empty event"),
        ([{"page": "/x"}, {"page": "x"}], "step 2: a page pattern starts with /"),
        ([{"page": "/x"}, {"page": "/" + "a" * 500}], "step 2: a page pattern has at most 500"),
        ([{"page": "/x"}, {"event": "E" * 121}], "step 2: an event name has at most 120"),
        ([{"page": "/x"}, {"page": "/" + "*" * 11}], "step 2: a page pattern has at most 10 wildcards"),
        ([{"page": "/x"}, {"event": "engagement"}], "'engagement' is no custom event"),
        ([{"page": "/x"}, {"goal": "Signup"}], "step 2: unknown key 'goal'"),
        ([{"page": "/x"}, {"page": "/x", "event": "E"}], "step 2: expected one key"),
        ([{"page": "/x"}, "/y"], "step 2: expected one key"),
        ([{"page": "/x"}, {"page": 7}], "step 2: the page must be a string"),
        ([{"page": "/x"}, {"event": "a\nb"}], "step 2: an event name cannot hold control characters"),
        ("[" + '{"page": "/x"},' * 700 + "]", "too long"),
        ("[" * 5000, "not JSON"),  # nested deeper than the parser recurses
    ],
)
def test_bad_steps_are_a_400_naming_steps(
    api: FlaskClient, auth: dict[str, str], steps: object, problem: str
) -> None:
    query = dict(DAY_RANGE)
    if steps is not None:
        query["steps"] = steps if isinstance(steps, str) else json.dumps(steps)
    response = api.get("/api/v1/stats/funnel", query_string=query, headers=auth)
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error.startswith("steps: ") and problem in error, error


def test_deeply_nested_filters_are_a_400_naming_filters(api: FlaskClient, auth: dict[str, str]) -> None:
    status, body = funnel(api, auth, CHECKOUT, filters="[" * 5000)
    assert status == 400 and body["error"].startswith("filters: not JSON"), body


def test_funnel_needs_the_api_key(api: FlaskClient) -> None:
    response = api.get("/api/v1/stats/funnel", query_string={**DAY_RANGE, "steps": json.dumps(CHECKOUT)})
    assert response.status_code == 401
