"""Imports over the stats API, as an integration would upload an export: `POST /api/v1/imports`
with the export's bytes and an admin's (or the operator's) key, `GET /api/v1/imports` to see
what a site holds, and the imported days in Plausible's v2 query (the real dashboard app, the
real ClickHouse engine)."""

from __future__ import annotations

import io
import uuid
import zipfile
from datetime import UTC, datetime
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage import users
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.events import archive_rows, page_view
from tests.integration.test_users import PASSWORD

pytestmark = pytest.mark.integration

TAG = uuid.uuid4().hex[:6]
SITE = f"api-imports-{TAG}.example.com"
OTHER = f"api-imports-other-{TAG}.example.com"
NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
VISITORS = "imported_visitors_20261001_20261002.csv"
VISITORS_CSV = (
    "date,visitors,pageviews,bounces,visits,visit_duration\n"
    "2026-10-01,10,30,4,12,600\n2026-10-02,5,8,2,6,120\n"
)
PAGES_CSV = (
    "date,hostname,page,visits,visitors,pageviews,scroll_depth,pageleave_visitors\n"
    "2026-10-01,h,/,10,8,20,,0\n2026-10-02,h,/,6,5,8,,0\n"
)


def export_zip() -> bytes:
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        archive.writestr(VISITORS, VISITORS_CSV)
        archive.writestr("imported_pages_20261001_20261002.csv", PAGES_CSV)
    return data.getvalue()


def member_key(client: Client, site: str, role: str, scope: str = "manage") -> str:
    """A team member with `role` on `site` (invited and accepted) and their API key for it."""
    email = f"{role}-{uuid.uuid4().hex[:6]}@example.com"
    token = users.create_invite(client, email, site, role)
    invite = users.find_invite(client, token)
    assert invite is not None
    users.accept_invite(client, token, invite, PASSWORD)
    return users.create_key(client, email, [site], scope=scope)[1]


@pytest.fixture(scope="module")
def store(dashboard_settings: Settings) -> Client:
    client = connect(dashboard_settings)
    add_site(client, SITE)
    add_site(client, OTHER)
    # OTHER's own events start on 2026-10-02: the imported 2nd is not used there.
    rows, columns = archive_rows([page_view(OTHER, "n", datetime(2026, 10, 2, 9, tzinfo=UTC), "/")])
    client.insert("events", rows, column_names=columns)
    return client


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings, store: Client) -> FlaskClient:
    return build_app(dashboard_settings, clock=lambda: NOW).server.test_client()


def upload(api: FlaskClient, key: str, data: bytes, **params: str) -> tuple[int, dict[str, Any]]:
    response = api.post(
        "/api/v1/imports",
        data=data,
        query_string=params,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/octet-stream"},
    )
    return response.status_code, response.get_json()


def visitors(api: FlaskClient, key: str, site: str) -> int:
    response = api.post(
        "/api/v2/query",
        json={"site_id": site, "metrics": ["visitors"], "date_range": ["2026-10-01", "2026-10-02"],
              "include": {"imports": True}, },
        headers={"Authorization": f"Bearer {key}"},
        query_string={"source": "raw"},
    )  # fmt: skip
    assert response.status_code == 200, response.get_json()
    return response.get_json()["results"][0]["metrics"][0]


def test_operator_uploads_an_export_and_reports_include_it(
    api: FlaskClient, dashboard_settings: Settings
) -> None:
    key = dashboard_settings.resolved_api_key()
    status, answer = upload(api, key, export_zip(), site=SITE, origin="plausible")
    assert status == 201, answer
    assert sorted(f["file"] for f in answer["imported"]) == [
        "imported_pages_20261001_20261002.csv",
        VISITORS,
    ]
    assert answer["imported"][0]["first_day"] == "2026-10-01" and answer["not_used"] is None
    assert visitors(api, key, SITE) == 15

    again_status, again = upload(api, key, export_zip(), site=SITE, origin="plausible")
    assert (again_status, again["imported"], len(again["already_imported"])) == (200, [], 2)
    assert visitors(api, key, SITE) == 15  # the same file twice changes nothing

    listed = api.get(
        "/api/v1/imports", query_string={"site": SITE}, headers={"Authorization": f"Bearer {key}"}
    )
    assert listed.status_code == 200
    assert {
        (f["file"], f["origin"], f["first_day"], f["last_day"]) for f in listed.get_json()["imports"]
    } == {
        (VISITORS, "plausible", "2026-10-01", "2026-10-02"),
        ("imported_pages_20261001_20261002.csv", "plausible", "2026-10-01", "2026-10-02"),
    }
    assert listed.get_json()["native_from"] is None


def test_a_single_csv_is_named_by_the_name_parameter(
    api: FlaskClient, dashboard_settings: Settings, store: Client
) -> None:
    key = dashboard_settings.resolved_api_key()
    status, answer = upload(api, key, VISITORS_CSV.encode(), site=OTHER, origin="plausible")
    assert status == 400 and answer["error"].startswith(
        "body: upload.csv: not a file of Plausible's CSV export"
    )
    status, answer = upload(api, key, VISITORS_CSV.encode(), site=OTHER, name=VISITORS, origin="plausible")
    assert status == 201, answer
    assert answer["not_used"] == {"first_day": "2026-10-02", "last_day": "2026-10-02"}
    assert "the site's own events start on 2026-10-02" in answer["note"]
    assert visitors(api, key, OTHER) == 10 + 1  # the imported 1st, the native 2nd


def test_an_admins_key_may_import_a_viewers_may_not(
    api: FlaskClient, dashboard_settings: Settings, store: Client
) -> None:
    site = f"api-imports-roles-{TAG}.example.com"
    add_site(store, site)
    ga4 = b"date,activeUsers,sessions,screenPageViews\n20261003,6,7,12\n"
    viewer = member_key(store, site, "viewer")
    status, answer = upload(api, viewer, ga4, site=site, origin="ga4")
    assert status == 403 and "needs an admin's or the owner's key" in answer["error"]
    # An admin's read key imports nothing: a key pasted into a reporting tool changes nothing.
    status, answer = upload(api, member_key(store, site, "admin", scope="read"), ga4, site=site, origin="ga4")
    assert status == 403 and "scope manage" in answer["error"]
    elsewhere = member_key(store, OTHER, "admin")  # an admin, of another site
    assert upload(api, elsewhere, ga4, site=site, origin="ga4")[0] == 403
    assert upload(api, "wrong", ga4, site=site, origin="ga4")[0] == 401
    admin = member_key(store, site, "admin")
    status, answer = upload(api, admin, ga4, site=site, origin="ga4")
    assert status == 201, answer
    assert visitors(api, admin, site) == 0  # the 3rd is outside the 1st and 2nd
    # The list of imported files is the Import panel's, an admin's: so is the API's (issue 29).
    listed = api.get(
        "/api/v1/imports", query_string={"site": site}, headers={"Authorization": f"Bearer {admin}"}
    )
    assert [f["file"] for f in listed.get_json()["imports"]] == ["upload.csv"]
    refused = api.get(
        "/api/v1/imports", query_string={"site": site}, headers={"Authorization": f"Bearer {viewer}"}
    )
    assert refused.status_code == 403


@pytest.mark.parametrize(
    ("params", "body", "named"),
    [
        ({"site": SITE}, b"x", "origin: required, one of plausible, ga4"),
        ({"site": SITE, "origin": "matomo"}, b"x", "origin: required, one of plausible, ga4"),
        ({"origin": "ga4"}, b"x", "site: required"),
        (
            {"site": "nowhere.example.com", "origin": "ga4"},
            b"x",
            "site: nowhere.example.com is not registered",
        ),
        ({"site": SITE, "origin": "ga4"}, b"", "body: empty"),
        ({"site": SITE, "origin": "ga4", "name": "../x.csv"}, b"x", "name: a file name without folders"),
        ({"site": SITE, "origin": "ga4", "limit": "3"}, b"x", "limit: unknown parameter"),
        (
            {"site": SITE, "origin": "ga4"},
            b"date,activeUsers,sessions\n20261001,x,1\n",
            "body: upload.csv: row 2, column 'activeUsers': 'x' is not a number",
        ),
    ],
)
def test_mistakes_get_400_naming_the_field(
    api: FlaskClient, dashboard_settings: Settings, params: dict[str, str], body: bytes, named: str
) -> None:
    status, answer = upload(api, dashboard_settings.resolved_api_key(), body, **params)
    assert status == 400 and answer["error"].startswith(named), answer


def remove(api: FlaskClient, key: str, **params: str) -> tuple[int, dict[str, Any]]:
    response = api.delete("/api/v1/imports", query_string=params, headers={"Authorization": f"Bearer {key}"})
    return response.status_code, response.get_json()


def test_an_imported_file_is_removed_by_name_or_id_and_reports_drop_it(
    api: FlaskClient, dashboard_settings: Settings, store: Client
) -> None:
    site = f"api-imports-remove-{TAG}.example.com"
    add_site(store, site)
    operator = dashboard_settings.resolved_api_key()
    assert upload(api, operator, export_zip(), site=site, origin="plausible")[0] == 201
    assert visitors(api, operator, site) == 15
    listed = api.get(
        "/api/v1/imports", query_string={"site": site}, headers={"Authorization": f"Bearer {operator}"}
    )
    ids = {f["file"]: f["id"] for f in listed.get_json()["imports"]}

    # A viewer's key and an admin's read key change nothing; mistakes name the field.
    assert remove(api, member_key(store, site, "viewer"), site=site, file=VISITORS)[0] == 403
    assert remove(api, member_key(store, site, "admin", scope="read"), site=site, file=VISITORS)[0] == 403
    status, answer = remove(api, operator, site=site)
    assert status == 400 and answer["error"].startswith("file: required"), answer
    status, answer = remove(api, operator, site=site, file="imported_nothing.csv")
    assert status == 400 and answer["error"].startswith(f"file: {site} has no imported file"), answer
    assert visitors(api, operator, site) == 15

    status, answer = remove(api, member_key(store, site, "admin"), site=site, file=VISITORS)
    assert status == 200 and answer["removed"]["id"] == ids[VISITORS], answer
    assert visitors(api, operator, site) == 0  # the day totals were that file's
    status, answer = remove(api, operator, site=site, file=ids["imported_pages_20261001_20261002.csv"])
    assert status == 200 and answer["removed"]["file"] == "imported_pages_20261001_20261002.csv"
    after = api.get(
        "/api/v1/imports", query_string={"site": site}, headers={"Authorization": f"Bearer {operator}"}
    )
    assert after.get_json()["imports"] == []
    assert store.query(
        "SELECT count() FROM imported_daily WHERE site = {site:String}", parameters={"site": site}
    ).result_rows == [(0,)]
    # Removed, the same export imports again whole.
    assert upload(api, operator, export_zip(), site=site, origin="plausible")[0] == 201
    assert visitors(api, operator, site) == 15
