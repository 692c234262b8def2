"""Team accounts end to end on the real dashboard server and ClickHouse engine: `tally users`
(invite, role, list, remove, audit, keys) with its one-line errors, the invitation page, sign-in
by email with the audit log, and per-user API keys on the stats API and the v2 query (a key
for site A reads A, gets 403 for B, 401 once revoked or once its user is removed)."""

from __future__ import annotations

import os
import uuid

import httpx
import pytest

from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.dashboard_server import DashboardServer

pytestmark = pytest.mark.integration

RANGE = "from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z"
PASSWORD = "correct horse battery"


def tally(settings: Settings, *args: str) -> tuple[int, str, str]:
    done = run_tally(os.environ | settings.environment(), *args)
    return done.returncode, done.stdout, done.stderr


def two_sites(settings: Settings) -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    sites = (f"a-{tag}.example.com", f"b-{tag}.example.com")
    client = connect(settings)
    for site in sites:
        add_site(client, site)
    return sites


def invited(settings: Settings, server: DashboardServer, email: str, site: str, role: str) -> None:
    """Invite `email` with the CLI and accept on the invitation page, as the invitee would."""
    code, out, err = tally(settings, "users", "invite", email, "--site", site, "--role", role)
    assert code == 0, err
    link = out.strip()
    assert link.startswith("http://") and "/invite/" in link
    path = link[link.index("/invite/") :]
    with httpx.Client(base_url=server.url) as browser:
        assert browser.get(path).status_code == 200
        accepted = browser.post(path, data={"password": PASSWORD, "confirm": PASSWORD})
        assert accepted.status_code == 302, accepted.text
        # The token works once.
        assert browser.get(path).status_code == 404


def stats(server: DashboardServer, key: str, site: str) -> int:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.get(f"{server.url}/api/v1/stats/aggregate?site={site}&{RANGE}", headers=headers).status_code


def v2(server: DashboardServer, key: str, site: str) -> int:
    body = {"site_id": site, "metrics": ["visitors"], "date_range": "7d"}
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.post(f"{server.url}/api/v2/query", json=body, headers=headers).status_code


def test_a_key_reads_only_its_sites_until_revoked(
    dashboard_settings: Settings, dashboard_server: DashboardServer
) -> None:
    site_a, site_b = two_sites(dashboard_settings)
    email = f"alice-{uuid.uuid4().hex[:6]}@example.com"
    invited(dashboard_settings, dashboard_server, email, site_a, "viewer")
    code, out, err = tally(dashboard_settings, "users", "keys", "create", email, "--site", site_a)
    assert code == 0, err
    key = out.strip()
    key_id = err.split()[1]

    assert (stats(dashboard_server, key, site_a), v2(dashboard_server, key, site_a)) == (200, 200)
    assert (stats(dashboard_server, key, site_b), v2(dashboard_server, key, site_b)) == (403, 403)
    # The operator's key still reads every site.
    assert stats(dashboard_server, dashboard_server.api_key, site_b) == 200

    # Key use is audited once per key per minute, however many calls.
    code, out, _ = tally(dashboard_settings, "users", "audit", "--limit", "1000")
    uses = [line for line in out.splitlines() if f"\tapi_key\t{email}\t{key_id}\t" in line]
    assert len(uses) == 1

    code, out, err = tally(dashboard_settings, "users", "keys", "revoke", key_id)
    assert code == 0, err
    assert (stats(dashboard_server, key, site_a), v2(dashboard_server, key, site_a)) == (401, 401)
    code, out, _ = tally(dashboard_settings, "users", "keys", "list", email)
    assert out.split("\t")[:2] == [key_id, site_a] and "\trevoked" in out


def test_removing_a_user_ends_their_keys_and_their_role(
    dashboard_settings: Settings, dashboard_server: DashboardServer
) -> None:
    site_a, _ = two_sites(dashboard_settings)
    email = f"bob-{uuid.uuid4().hex[:6]}@example.com"
    invited(dashboard_settings, dashboard_server, email, site_a, "admin")
    code, out, err = tally(dashboard_settings, "users", "role", email, "--site", site_a, "--role", "owner")
    assert code == 0, err
    code, out, _ = tally(dashboard_settings, "users", "list", "--site", site_a)
    assert f"{email}\t{site_a}\towner" in out.splitlines()
    key = tally(dashboard_settings, "users", "keys", "create", email, "--site", site_a)[1].strip()
    assert stats(dashboard_server, key, site_a) == 200
    # Removing the role on the key's site narrows the key at once.
    assert tally(dashboard_settings, "users", "remove", email, "--site", site_a)[0] == 0
    assert stats(dashboard_server, key, site_a) == 403
    assert tally(dashboard_settings, "users", "remove", email)[0] == 0
    assert stats(dashboard_server, key, site_a) == 401


def test_sign_in_by_email_is_audited(dashboard_settings: Settings, dashboard_server: DashboardServer) -> None:
    site_a, _ = two_sites(dashboard_settings)
    email = f"carol-{uuid.uuid4().hex[:6]}@example.com"
    invited(dashboard_settings, dashboard_server, email, site_a, "viewer")
    with httpx.Client(base_url=dashboard_server.url) as browser:
        assert browser.post("/login", data={"email": email, "password": "wrong password"}).status_code == 401
        assert browser.post("/login", data={"email": email, "password": PASSWORD}).status_code == 302
        # The operator's password still signs in, with or without its email.
        assert browser.post("/login", data={"password": dashboard_server.password}).status_code == 302
    out = tally(dashboard_settings, "users", "audit", "--limit", "1000")[1]
    mine = [line.split("\t")[1:5:3] for line in out.splitlines() if f"\t{email}\t" in line]
    assert ["sign_in", "failed"] in mine and ["sign_in", "ok"] in mine


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["invite", "not-an-email", "--site", "x.example.com", "--role", "viewer"], "email: 'not-an-email'"),
        (
            ["invite", "a@example.com", "--site", "x.example.com", "--role", "god"],
            "role: one of owner, admin",
        ),
        (["invite", "a@example.com", "--site", "nowhere.invalid", "--role", "viewer"], "is not registered"),
        (
            ["role", "nobody@example.com", "--site", "nowhere.invalid", "--role", "viewer"],
            "is not registered",
        ),
        (["remove", "nobody@example.com"], "email: nobody@example.com has no account"),
        (["keys", "create", "nobody@example.com", "--site", "x.example.com"], "has no account"),
        (["keys", "revoke", "feedbeef"], "key: no API key 'feedbeef'"),
        (["invite", "a@example.com", "--role", "viewer"], "missing option '--site'"),
    ],
)
def test_cli_mistakes_are_one_line(dashboard_settings: Settings, arguments: list[str], message: str) -> None:
    code, _, err = tally(dashboard_settings, "users", *arguments)
    assert code != 0
    assert err.startswith("tally: ") and message.lower() in err.lower(), err
    assert len(err.strip().splitlines()) == 1
