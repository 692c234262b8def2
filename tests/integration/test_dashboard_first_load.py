"""What the dashboard's page brings with it (the real app through Flask's test client, the real
store): the site picker already filled with the viewer's sites, the first chosen, so that the
Overview's callbacks start with the page; and the time zone suggestions as plain HTML in the page,
not as hundreds of Dash components the renderer would revisit on every callback answer."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage import users
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

PASSWORD = "first-load"


@pytest.fixture(scope="module")
def sites(dashboard_settings: Settings) -> tuple[str, str]:
    """Two sites of this module's own, the first busier (the picker lists the busiest first)."""
    tag = uuid.uuid4().hex[:8]
    busy, quiet = f"busy-{tag}.example.com", f"quiet-{tag}.example.com"
    now = datetime.now(UTC) - timedelta(minutes=5)
    events = [page_view(busy, f"v{n}", now) for n in range(3)] + [page_view(quiet, "v0", now)]
    rows, columns = archive_rows(events)
    client = connect(dashboard_settings)
    client.insert("events", rows, column_names=columns)
    for site in (busy, quiet):
        add_site(client, site)
    return busy, quiet


@pytest.fixture(scope="module")
def app_client(dashboard_settings: Settings) -> FlaskClient:
    operator = dashboard_settings.model_copy(update={"dashboard_password": PASSWORD})
    return build_app(operator).server.test_client()


def signed_in(client: FlaskClient, email: str = "", password: str = PASSWORD) -> FlaskClient:
    answer = client.post("/login", data={"email": email, "password": password})
    assert answer.status_code == 302, answer.text[:300]
    return client


def components(node: object) -> Iterator[dict]:
    """Every Dash component of a layout as /_dash-layout sends it."""
    if isinstance(node, list):
        for item in node:
            yield from components(item)
    elif isinstance(node, dict) and "type" in node and "props" in node:
        yield node
        for value in node["props"].values():
            yield from components(value)


def site_picker(client: FlaskClient) -> dict:
    layout = client.get("/_dash-layout")
    assert layout.status_code == 200
    return next(c["props"] for c in components(layout.get_json()) if c["props"].get("id") == "site")


def test_the_operators_page_arrives_with_every_site_listed_and_the_busiest_chosen(
    app_client: FlaskClient, sites: tuple[str, str]
) -> None:
    busy, quiet = sites
    picker = site_picker(signed_in(app_client))
    listed = picker["options"]
    assert busy in listed and quiet in listed
    assert listed.index(busy) < listed.index(quiet)
    assert picker["value"] == listed[0]  # the store's busiest: other tests' sites share it


def test_a_members_page_lists_only_the_sites_they_have_a_role_on(
    dashboard_settings: Settings, sites: tuple[str, str]
) -> None:
    _, quiet = sites
    email = f"viewer-{uuid.uuid4().hex[:8]}@example.com"
    client = connect(dashboard_settings)
    users.set_password(client, email, "a long member password")
    users.set_role(client, email, quiet, "viewer")
    member = build_app(dashboard_settings).server.test_client()
    picker = site_picker(signed_in(member, email, "a long member password"))
    assert picker["options"] == [quiet]
    assert picker["value"] == quiet


def test_time_zone_suggestions_come_with_the_page_not_the_layout(app_client: FlaskClient) -> None:
    browser = signed_in(app_client)
    page = browser.get("/").text
    assert '<datalist id="timezone-names">' in page
    assert '<option value="Europe/Berlin"></option>' in page
    layout = list(components(browser.get("/_dash-layout").get_json()))
    zone_input = next(c["props"] for c in layout if c["props"].get("id") == "timezone-name")
    assert zone_input["list"] == "timezone-names"
    assert not [c for c in layout if c["type"] == "Option"]
