"""Finding 3 of issue 29: behind the TLS proxy every client was one address, so ten wrong passwords
from a stranger locked everyone out of sign-in, share-link passwords and invitations, and the
audit log recorded the proxy's address for everyone.

Through the real server (`python -m dashboard.app` under waitress) with the proxy trusted as
docker-compose.yml trusts it (TALLY_TRUSTED_PROXIES = the proxy's one address): here the tests'
own 127.0.0.1 plays the proxy, telling clients apart by X-Forwarded-For; then through Caddy
running the repo's deploy/Caddyfile in front of the same server, with clients on addresses of
their own (127.0.0.2, 127.0.0.3: all of 127/8 is loopback).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from dashboard.throttles import ADDRESS_FAILURES
from storage import shared_links, users
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.caddy import CaddyFront, deploy_caddyfile
from tests.fixtures.dashboard_server import DashboardServer
from tests.fixtures.ports import free_port
from tests.fixtures.service_process import running_module
from tests.security.conftest import PASSWORD, Member, make_member

pytestmark = pytest.mark.integration

PROXY = "127.0.0.1"  # the tests' own address: the trusted proxy
STRANGER = "203.0.113.7"
OPERATOR = "198.51.100.20"


@contextmanager
def own_dashboard(settings: Settings, home: Path) -> Iterator[DashboardServer]:
    """A dashboard server of its own (its throttles are not shared with other tests) on the
    shared store, trusting X-Forwarded-For from PROXY only, as production trusts Caddy."""
    port = free_port()
    environment = {key: value for key, value in os.environ.items() if not key.startswith("TALLY_")} | {
        "TALLY_HOME": str(home),
        "TALLY_CLICKHOUSE_URL": settings.clickhouse_url,
        "TALLY_CLICKHOUSE_PASSWORD": settings.clickhouse_password,
        "TALLY_DASHBOARD_PORT": str(port),
        "TALLY_DASHBOARD_SOURCE": "raw",
        "TALLY_TRUSTED_PROXIES": f"{PROXY}/32",
        # Plain HTTP here (TLS ends at the proxy): a Secure cookie would never come back.
        "TALLY_DASHBOARD_COOKIE_SECURE": "false",
    }
    url = f"http://127.0.0.1:{port}"
    log_path = home / "dashboard.log"
    with running_module("dashboard.app", environment, log_path, f"{url}/healthz"):
        password = (home / "dashboard_password").read_text().strip()
        yield DashboardServer(url, "", password, log_path)


@pytest.fixture(scope="module")
def behind_proxy(
    dashboard_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DashboardServer]:
    with own_dashboard(dashboard_settings, tmp_path_factory.mktemp("behind-proxy")) as server:
        yield server


@pytest.fixture(scope="module")
def site(dashboard_settings: Settings) -> str:
    name = f"ip-{uuid.uuid4().hex[:8]}.example.com"
    add_site(connect(dashboard_settings), name)
    return name


def member(settings: Settings, site: str, role: str = "viewer") -> Member:
    return make_member(settings, f"{role}-{uuid.uuid4().hex[:8]}@example.com", site, role)


def sign_in(server: DashboardServer, client: str, email: str = "", password: str | None = None) -> int:
    """One sign-in through the proxy on behalf of `client`: the answer's status."""
    with httpx.Client(base_url=server.url, timeout=30) as browser:
        answer = browser.post(
            "/login",
            data={"email": email, "password": server.password if password is None else password},
            headers={"X-Forwarded-For": client, "Origin": server.url},
        )
        return answer.status_code


def sign_in_rows(settings: Settings, email: str) -> list[tuple[str, str]]:
    """(outcome, address) of the audit log's sign-in rows for `email`."""
    return [
        (entry.outcome, entry.address)
        for entry in users.audit(connect(settings), limit=1000)
        if entry.action == "sign_in" and entry.email == email
    ]


def guess(server: DashboardServer, client: str, email: str = "") -> None:
    """Wrong passwords from `client` until its own limit: each refused as wrong, then 429."""
    for _ in range(ADDRESS_FAILURES):
        assert sign_in(server, client, email, "not the password") == 401
    assert sign_in(server, client, email, "not the password") == 429


def test_ten_wrong_passwords_from_a_stranger_do_not_lock_the_operator_out(
    behind_proxy: DashboardServer, dashboard_settings: Settings
) -> None:
    guess(behind_proxy, STRANGER)
    assert sign_in(behind_proxy, STRANGER) == 429  # the stranger, even with the password
    assert sign_in(behind_proxy, OPERATOR) == 302
    rows = sign_in_rows(dashboard_settings, dashboard_settings.owner_email)
    assert ("ok", OPERATOR) in rows
    assert ("failed", STRANGER) in rows


def test_a_client_that_is_not_the_proxy_cannot_choose_its_address(
    behind_proxy: DashboardServer, dashboard_settings: Settings, site: str
) -> None:
    viewer = member(dashboard_settings, site)
    direct = httpx.HTTPTransport(local_address="127.0.0.4")  # a peer that is not the proxy
    with httpx.Client(base_url=behind_proxy.url, timeout=30, transport=direct) as browser:
        answer = browser.post(
            "/login",
            data={"email": viewer.email, "password": PASSWORD},
            headers={"X-Forwarded-For": OPERATOR, "Origin": behind_proxy.url},
        )
    assert answer.status_code == 302
    assert sign_in_rows(dashboard_settings, viewer.email) == [("ok", "127.0.0.4")]


def test_strangers_on_many_addresses_slow_guessing_at_an_account_but_not_its_usual_client(
    behind_proxy: DashboardServer, dashboard_settings: Settings, site: str
) -> None:
    viewer = member(dashboard_settings, site)
    usual = "198.51.100.30"
    own_browser = httpx.Client(base_url=behind_proxy.url, timeout=30)
    with own_browser:

        def sign_in_with_own_browser(address: str) -> int:
            form = {"email": viewer.email, "password": PASSWORD}
            return own_browser.post("/login", data=form, headers={"X-Forwarded-For": address}).status_code

        assert sign_in_with_own_browser(usual) == 302  # the member's own browser, once
        guess(behind_proxy, "203.0.113.21", viewer.email)
        guess(behind_proxy, "203.0.113.22", viewer.email)
        # Twenty wrong guesses for this account: a new client waits, even with the right password ...
        assert sign_in(behind_proxy, "203.0.113.23", viewer.email, PASSWORD) == 429
        # ... its usual clients do not: the network it signed in from, and its browser elsewhere ...
        assert sign_in(behind_proxy, usual, viewer.email, PASSWORD) == 302
        assert sign_in_with_own_browser("192.0.2.77") == 302
    # ... nor does anyone signing in to another account.
    other = member(dashboard_settings, site)
    assert sign_in(behind_proxy, "203.0.113.23", other.email, PASSWORD) == 302


def test_wrong_share_passwords_from_a_stranger_do_not_lock_the_link_for_its_visitors(
    behind_proxy: DashboardServer, dashboard_settings: Settings, site: str
) -> None:
    link = shared_links.create_link(
        connect(dashboard_settings), site, label="guessed", password="link secret"
    )

    def open_link(client: str, password: str) -> int:
        with httpx.Client(base_url=behind_proxy.url, timeout=30) as browser:
            headers = {"X-Forwarded-For": client, "Origin": behind_proxy.url}
            return browser.post(link.path(), data={"password": password}, headers=headers).status_code

    for _ in range(ADDRESS_FAILURES):
        assert open_link(STRANGER, "guess") == 401
    assert open_link(STRANGER, "link secret") == 429
    assert open_link(OPERATOR, "link secret") == 200


def test_wrong_passwords_on_an_invitation_from_a_stranger_do_not_stop_its_invitee(
    behind_proxy: DashboardServer, dashboard_settings: Settings, site: str
) -> None:
    invitee = member(dashboard_settings, site)  # an account already: the invitation asks its password
    other_site = f"ip-{uuid.uuid4().hex[:8]}.example.com"
    client = connect(dashboard_settings)
    add_site(client, other_site)
    token = users.create_invite(client, invitee.email, other_site, "viewer")

    def accept(address: str, password: str) -> int:
        with httpx.Client(base_url=behind_proxy.url, timeout=30) as browser:
            headers = {"X-Forwarded-For": address, "Origin": behind_proxy.url}
            return browser.post(f"/invite/{token}", data={"password": password}, headers=headers).status_code

    for _ in range(ADDRESS_FAILURES):
        assert accept(STRANGER, "guess") == 400
    assert accept(STRANGER, PASSWORD) == 429
    assert accept(OPERATOR, PASSWORD) == 302
    accepted = [
        e
        for e in users.audit(client, [other_site])
        if e.action == "invite_accepted" and e.email == invitee.email
    ]
    assert [(e.address, e.detail) for e in accepted] == [(OPERATOR, other_site)]


# -- through Caddy, as docker-compose.yml runs it ---------------------------------------------


@pytest.fixture(scope="module")
def behind_caddy(
    dashboard_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DashboardServer]:
    """Its own server: the operator's throttle starts clean (the tests above guessed at it)."""
    with own_dashboard(dashboard_settings, tmp_path_factory.mktemp("behind-caddy")) as server:
        yield server


@pytest.fixture(scope="module")
def caddy_front(
    behind_caddy: DashboardServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CaddyFront]:
    """The repo's deploy/Caddyfile in front of `behind_caddy` (tests/fixtures/caddy.py)."""
    upstream = behind_caddy.url.removeprefix("http://")
    with deploy_caddyfile(tmp_path_factory.mktemp("caddy"), {"dashboard:8050": upstream}) as front:
        yield front


def from_address(url: str, address: str) -> httpx.Client:
    """A browser whose connections come from `address` (a loopback address of its own)."""
    return httpx.Client(base_url=url, timeout=30, transport=httpx.HTTPTransport(local_address=address))


def test_behind_caddy_a_strangers_wrong_passwords_do_not_lock_the_operator_out(
    caddy_front: CaddyFront, behind_caddy: DashboardServer, dashboard_settings: Settings
) -> None:
    stranger, operator = "127.0.0.2", "127.0.0.3"
    with from_address(caddy_front.url, stranger) as browser:
        for _ in range(ADDRESS_FAILURES):
            # The stranger even claims to be the operator's address: Caddy replaces the claim.
            answer = browser.post("/login", data={"password": "guess"}, headers={"X-Forwarded-For": operator})
            assert answer.status_code == 401, answer.text[:300]
        assert browser.post("/login", data={"password": "guess"}).status_code == 429
    with from_address(caddy_front.url, operator) as browser:
        answer = browser.post("/login", data={"password": behind_caddy.password})
        assert answer.status_code == 302, answer.text[:300]
    rows = sign_in_rows(dashboard_settings, dashboard_settings.owner_email)
    assert ("ok", operator) in rows and ("failed", stranger) in rows
    assert ("failed", operator) not in rows


def handlers(config: Any) -> list[dict[str, Any]]:
    """Every handler of an adapted Caddy configuration, however deep in its routes."""
    if isinstance(config, list):
        return [found for item in config for found in handlers(item)]
    if not isinstance(config, dict):
        return []
    own = [config] if "handler" in config else []
    return own + [found for value in config.values() for found in handlers(value)]


def test_caddy_bounds_dashboard_bodies_at_the_servers_limit(caddy_front: CaddyFront) -> None:
    limits = [h["max_size"] for h in handlers(caddy_front.config) if h["handler"] == "request_body"]
    assert limits == [Settings().dashboard_max_body_bytes]


def test_behind_caddy_a_body_over_the_limit_is_refused(caddy_front: CaddyFront) -> None:
    with from_address(caddy_front.url, "127.0.0.5") as browser:
        try:
            answer = browser.post("/_dash-update-component", content=b"x" * (33 * 2**20))
        except httpx.TransportError:
            return  # refused before the whole body was sent: nobody read it
    # Caddy cuts the body at 32 MiB (Debian's Caddy 2.6 answers 502), or waitress refuses it (413).
    assert answer.status_code in (413, 502), answer.text[:300]
