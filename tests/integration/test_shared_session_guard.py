"""The shared session's guard on the real app (Flask's test client) and the real store: requests a
browser would never send — malformed callbacks, a missing site, the operator's routes — are
refused, and a shared session never holds the operator's sign-in."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage import goals as goal_store
from storage import shared_links
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.callbacks import goal_add_request

pytestmark = pytest.mark.integration

SITE_OPTIONS = "..site.options...site.value.."


@pytest.fixture
def shared(dashboard_settings: Settings) -> Iterator[tuple[FlaskClient, shared_links.CreatedLink]]:
    site = f"guard-{uuid.uuid4().hex[:8]}.example.com"
    add_site(connect(dashboard_settings), site)
    created = shared_links.create_link(connect(dashboard_settings), site)
    client = build_app(dashboard_settings).server.test_client()
    assert client.get(created.path()).status_code == 200
    yield client, created


def site_options(site: object, state: list | None = None) -> dict:
    return {
        "output": SITE_OPTIONS,
        "outputs": [{"id": "site", "property": "options"}, {"id": "site", "property": "value"}],
        "inputs": [{"id": "clock", "property": "n_intervals", "value": 1}],
        "state": state if state is not None else [{"id": "site", "property": "value", "value": site}],
    }


def test_malformed_callbacks_are_refused(shared: tuple[FlaskClient, shared_links.CreatedLink]) -> None:
    client, created = shared
    assert client.post("/_dash-update-component", json=site_options(created.link.site)).status_code == 200
    assert client.post("/_dash-update-component", data="not json").status_code == 403
    # Malformed: 400 naming the field (dashboard/access.py body_problem); another site: 403.
    assert client.post("/_dash-update-component", json=[1, 2]).status_code == 400
    assert client.post("/_dash-update-component", json=site_options(None, state=[])).status_code == 400
    assert client.post("/_dash-update-component", json=site_options(None)).status_code == 403
    assert client.post("/_dash-update-component", json=site_options([created.link.site])).status_code == 400
    assert client.post("/_dash-update-component", json={"output": "nope.children"}).status_code == 400


def test_a_shared_link_cannot_change_its_sites_goals(
    shared: tuple[FlaskClient, shared_links.CreatedLink], dashboard_settings: Settings
) -> None:
    """The Goals panel's add button as the operator's page posts it, for the link's own site:
    a read-only link changes no configuration."""
    client, created = shared
    site = created.link.site
    add_goal = goal_add_request(site, "Signup")
    assert client.post("/_dash-update-component", json=add_goal).status_code == 403
    assert goal_store.list_goals(connect(dashboard_settings), site) == []


def test_shared_session_reaches_nothing_of_the_operators(
    shared: tuple[FlaskClient, shared_links.CreatedLink],
) -> None:
    client, _ = shared
    with client.session_transaction() as session:
        assert "signed_in" not in session
    answer = client.get("/")
    assert answer.status_code == 302 and answer.headers["Location"].startswith("/login")
    assert client.get("/api/v1/stats/aggregate?site=x").status_code == 401
    assert client.get("/share/" + "A" * 43).status_code == 404


def test_revoked_link_is_gone_for_every_request_of_its_session(
    dashboard_settings: Settings, shared: tuple[FlaskClient, shared_links.CreatedLink]
) -> None:
    client, created = shared
    shared_links.revoke_link(connect(dashboard_settings), created.link.site, created.link.id)
    assert client.get("/_dash-layout").status_code == 410
    assert client.post("/_dash-update-component", json=site_options(created.link.site)).status_code == 410
    assert client.post("/_dash-update-component", json=site_options(created.link.site)).status_code == 410
    assert client.get(created.path()).status_code == 404
    with pytest.raises(shared_links.SharedLinkError, match="has no shared link"):
        shared_links.revoke_link(connect(dashboard_settings), "other.example.com", created.link.id)
