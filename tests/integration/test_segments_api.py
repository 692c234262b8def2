"""Saved segments over HTTP (`/api/v1/segments`, dashboard/http_api/segments.py) on the real dashboard
app and ClickHouse engine: the operator's key lists, creates, renames, re-filters and deletes;
a viewer's key lists but may not change (403), an admin's may; bad input is a 400 naming the
field; a segment made here answers Plausible's `["is", "segment", [id]]` as its filters do."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage.client import connect
from storage.sites import add_site
from storage.users import create_key, set_password, set_role
from tally.settings import Settings
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

SITE = "segments-api.example.com"
OTHER = "segments-api-other.example.com"
DAY = datetime(2026, 11, 10, tzinfo=UTC)
SEARCH = [["is", "visit:channel", ["Organic Search"]]]


@pytest.fixture(scope="module")
def store(dashboard_settings: Settings) -> Client:
    client = connect(dashboard_settings)
    events = [
        page_view(SITE, "a", DAY + timedelta(hours=1), "/", referrer_domain="www.google.com", country="DE"),
        page_view(SITE, "b", DAY + timedelta(hours=2), "/", referrer_domain="www.bing.com", country="FR"),
        page_view(SITE, "c", DAY + timedelta(hours=3), "/", country="DE"),
    ]
    rows, columns = archive_rows(events)
    client.insert("events", rows, column_names=columns)
    add_site(client, SITE)
    add_site(client, OTHER)
    return client


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings, store: Client) -> FlaskClient:
    return build_app(dashboard_settings, clock=lambda: DAY + timedelta(days=1)).server.test_client()


@pytest.fixture(scope="module")
def operator(dashboard_settings: Settings) -> dict[str, str]:
    return {"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"}


def member_key(store: Client, email: str, role: str, scope: str = "manage") -> dict[str, str]:
    set_password(store, email, "a long member password")
    set_role(store, email, SITE, role)
    _, token = create_key(store, email, [SITE], scope=scope)
    return {"Authorization": f"Bearer {token}"}


def call(api: FlaskClient, method: str, headers: dict[str, str], body: Any = None, **query: str) -> Any:
    response = api.open(
        "/api/v1/segments", method=method, headers=headers, json=body, query_string={"site": SITE, **query}
    )
    return response.status_code, response.get_json()


def visitors(api: FlaskClient, headers: dict[str, str], filters: list) -> int:
    response = api.post(
        "/api/v2/query",
        json={"site_id": SITE, "metrics": ["visitors"], "date_range": ["2026-11-10", "2026-11-10"],
              "filters": filters},
        headers=headers,
    )  # fmt: skip
    assert response.status_code == 200, response.get_json()
    return response.get_json()["results"][0]["metrics"][0]


def test_operator_creates_renames_refilters_and_deletes(api: FlaskClient, operator: dict[str, str]) -> None:
    status, created = call(api, "POST", operator, {"name": "Searchers", "filters": SEARCH})
    assert status == 201 and created["name"] == "Searchers" and created["filters"] == SEARCH
    segment_id = str(created["id"])
    assert (
        visitors(api, operator, [["is", "segment", [created["id"]]]]) == 2 == visitors(api, operator, SEARCH)
    )
    status, listed = call(api, "GET", operator)
    assert status == 200 and created in listed

    status, renamed = call(api, "PATCH", operator, {"name": "Search engines"}, id=segment_id)
    assert status == 200 and renamed == {**created, "name": "Search engines"}
    german = [*SEARCH, ["is", "visit:country", ["DE"]]]
    status, narrowed = call(api, "PATCH", operator, {"filters": german}, id=segment_id)
    assert status == 200 and narrowed["filters"] == german
    assert visitors(api, operator, [["is", "segment", [created["id"]]]]) == 1

    status, deleted = call(api, "DELETE", operator, id=segment_id)
    assert status == 200 and deleted["name"] == "Search engines"
    assert created["id"] not in [segment["id"] for segment in call(api, "GET", operator)[1]]
    assert call(api, "DELETE", operator, id=segment_id)[0] == 404


@pytest.mark.parametrize(
    ("method", "body", "query", "status", "named"),
    [
        ("POST", {"filters": SEARCH}, {}, 400, "name"),
        ("POST", {"name": " ", "filters": SEARCH}, {}, 400, "name"),
        ("POST", {"name": "X"}, {}, 400, "filters"),
        ("POST", {"name": "X", "filters": [["is", "visit:city", ["Berlin"]]]}, {}, 400, "filters"),
        ("POST", {"name": "X", "filters": [["matches", "visit:channel", ["("]]]}, {}, 400, "filters"),
        ("POST", {"name": "X", "filters": SEARCH, "shared": True}, {}, 400, "shared"),
        ("POST", ["not", "an object"], {}, 400, "body"),
        ("POST", {"name": "X", "filters": SEARCH}, {"site": "nowhere.example.com"}, 404, "site"),
        ("PATCH", {"name": "Y"}, {}, 400, "id"),
        ("PATCH", {"name": "Y"}, {"id": "999999"}, 404, "id"),
        ("DELETE", None, {"id": "x"}, 400, "id"),
        ("GET", None, {"site": ""}, 400, "site"),
    ],
)  # fmt: skip
def test_bad_input_names_the_field(
    api: FlaskClient, operator: dict[str, str], method: str, body: Any, query: dict, status: int, named: str
) -> None:
    answer, error = call(api, method, operator, body, **query)
    assert answer == status, error
    assert error["error"].startswith(named), error


def test_a_taken_name_is_a_conflict(api: FlaskClient, operator: dict[str, str]) -> None:
    assert call(api, "POST", operator, {"name": "Twice", "filters": SEARCH})[0] == 201
    status, error = call(api, "POST", operator, {"name": "Twice", "filters": SEARCH})
    assert status == 409 and error["error"].startswith("name")


def test_viewer_key_lists_admin_key_changes(
    api: FlaskClient, store: Client, operator: dict[str, str]
) -> None:
    viewer = member_key(store, "segments-viewer@example.com", "viewer")
    admin = member_key(store, "segments-admin@example.com", "admin")
    assert call(api, "GET", viewer)[0] == 200
    status, error = call(api, "POST", viewer, {"name": "Viewer's", "filters": SEARCH})
    assert status == 403 and "needs an admin's or the owner's key" in error["error"]
    read_only = member_key(store, "segments-admin@example.com", "admin", scope="read")
    status, error = call(api, "POST", read_only, {"name": "Read key's", "filters": SEARCH})
    assert status == 403 and "scope manage" in error["error"]
    status, created = call(api, "POST", admin, {"name": "Admin's", "filters": SEARCH})
    assert status == 201
    assert call(api, "DELETE", viewer, id=str(created["id"]))[0] == 403
    assert call(api, "GET", admin, site=OTHER)[0] == 403  # outside the key's sites
    assert call(api, "DELETE", admin, id=str(created["id"]))[0] == 200
    # the role taken away applies to the next request
    set_role(store, "segments-admin@example.com", SITE, "viewer")
    assert call(api, "POST", admin, {"name": "Later", "filters": SEARCH})[0] == 403
