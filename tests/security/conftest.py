"""The attacker's setting for the adversarial suite: two tenants on the real dashboard server.

Site A has an owner and a viewer, site B an admin; A has a shared link; every member has a read
key and a manage key; the operator has the password and `TALLY_API_KEY`. The server is the real
one (`python -m dashboard.app` under waitress, the `dashboard_server` fixture), so what these
tests find is what a browser or a script behind the same port would find.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import httpx
import pytest

from storage import shared_links, users
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.dashboard_server import DashboardServer, browser
from tests.fixtures.dashboard_server import signed_in as signed_in  # the suite's tests import it from here

PASSWORD = "a long member password"


@dataclass(frozen=True)
class Member:
    email: str
    site: str
    role: str
    read_key: str
    manage_key: str


@dataclass(frozen=True)
class Tenants:
    """Two sites and who may reach what on each."""

    site_a: str
    site_b: str
    owner_a: Member
    viewer_a: Member
    admin_b: Member
    share_a: shared_links.CreatedLink  # a read-only link to site A
    server: DashboardServer

    @property
    def operator_key(self) -> str:
        return self.server.api_key


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def make_member(settings: Settings, email: str, site: str, role: str) -> Member:
    """An account with a role on `site`, made as the operator makes one (`tally users invite`)."""
    client = connect(settings)
    token = users.create_invite(client, email, site, role)
    invite = users.find_invite(client, token)
    assert invite is not None
    users.accept_invite(client, token, invite, PASSWORD)
    read_key = users.create_key(client, email, [site])[1]
    manage_key = users.create_key(client, email, [site], scope="manage")[1]
    return Member(email, site, role, read_key, manage_key)


@pytest.fixture(scope="module")
def tenants(dashboard_settings: Settings, dashboard_server: DashboardServer) -> Tenants:
    tag = uuid.uuid4().hex[:8]
    site_a, site_b = f"a-{tag}.example.com", f"b-{tag}.example.com"
    client = connect(dashboard_settings)
    add_site(client, site_a)
    add_site(client, site_b)
    return Tenants(
        site_a=site_a,
        site_b=site_b,
        owner_a=make_member(dashboard_settings, f"owner-{tag}@example.com", site_a, "owner"),
        viewer_a=make_member(dashboard_settings, f"viewer-{tag}@example.com", site_a, "viewer"),
        admin_b=make_member(dashboard_settings, f"admin-{tag}@example.com", site_b, "admin"),
        share_a=shared_links.create_link(client, site_a, label="attacker's copy"),
        server=dashboard_server,
    )


def opened_share(server: DashboardServer, link: shared_links.CreatedLink) -> httpx.Client:
    """A browser that opened a shared link (and so holds a shared session)."""
    browser_client = browser(server)
    answer = browser_client.get(link.path())
    assert answer.status_code == 200, (answer.status_code, answer.text[:300])
    return browser_client
