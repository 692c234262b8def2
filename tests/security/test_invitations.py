"""Invitations and the audit log, attacked on the real dashboard server (issue 29, findings 2
(an old invitation brings a removed account back), 6, 7 and 11).

An owner must not be able to claim an address that is not theirs: with an SMTP server the link
goes by mail to the address alone (a second real server, with the `inbox` SMTP fixture), without
one it waits for the operator's approval. Invitations are listed and revoked through the CLI, the
API and the Team panel, die with their inviter's right and with the invitee's removal. Each audit
row names its site: the owner of A reads none of B's rows, nor the addresses members sign in from;
a stranger's failed sign-in under an address with no account writes no row under it.
"""

from __future__ import annotations

import email
import json
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import closing
from email.policy import default
from typing import Any

import httpx
import pytest

from storage import users
from storage.client import connect
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.dashboard_server import DashboardServer, server_environment
from tests.fixtures.ports import free_port
from tests.fixtures.service_process import running_module
from tests.fixtures.smtp_inbox import Inbox
from tests.security.conftest import PASSWORD, Tenants, bearer, make_member, signed_in

pytestmark = pytest.mark.integration

CALLBACK = "/_dash-update-component"
OPERATOR_EMAIL = "the-operator@example.com"
LINK = re.compile(r"https?://[^\s\"'<>]+/invite/[A-Za-z0-9_-]+")


def fresh(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}@example.com"


def tally(settings: Settings, *args: str) -> tuple[int, str, str]:
    done = run_tally(os.environ | settings.environment(), *args)
    return done.returncode, done.stdout, done.stderr


def api(server_url: str, method: str, path: str, key: str, **kwargs: Any) -> httpx.Response:
    return httpx.request(method, f"{server_url}{path}", headers=bearer(key), timeout=30, **kwargs)


def invite_over_api(
    server_url: str, key: str, site: str, address: str, role: str = "viewer"
) -> httpx.Response:
    return api(server_url, "POST", f"/api/v1/invites?site={site}", key, json={"email": address, "role": role})


def accept(server_url: str, link: str, password: str = PASSWORD) -> httpx.Response:
    path = link[link.index("/invite/") :]
    with httpx.Client(base_url=server_url, timeout=30) as browser:
        return browser.post(path, data={"password": password, "confirm": password})


def opens(server_url: str, link: str) -> int:
    return httpx.get(f"{server_url}{link[link.index('/invite/') :]}", timeout=30).status_code


def browser_of(server: DashboardServer, address: str = "", password: str | None = None) -> httpx.Client:
    """`signed_in`, with the session cookie also sent over plain HTTP: it is Secure, which browsers
    honour on loopback and httpx's cookie jar does not."""
    browser = signed_in(server, address, password)
    browser.headers["Cookie"] = "; ".join(f"{cookie.name}={cookie.value}" for cookie in browser.cookies.jar)
    return browser


def audit_rows(settings: Settings) -> list[users.AuditEntry]:
    return users.audit(connect(settings), limit=10_000)


# -- the Team panel, as a browser's Dash callbacks ----------------------------------------------


def callback_key(browser: httpx.Client, *outputs: str) -> str:
    """The registered callback whose outputs are these (the key Dash expects as `output`)."""
    dependencies = browser.get("/_dash-dependencies").json()
    for dependency in dependencies:
        named = [part.split("@")[0] for part in dependency["output"].strip(".").split("...")]
        if named == list(outputs):
            return dependency["output"]
    raise AssertionError(f"no callback with outputs {outputs}")


def call(
    browser: httpx.Client,
    outputs: list[tuple[str, str]],
    inputs: list[Any],
    state: list[dict[str, Any]],
    changed: str,
) -> httpx.Response:
    key = callback_key(browser, *(f"{component}.{prop}" for component, prop in outputs))
    listed = [{"id": component, "property": prop} for component, prop in outputs]
    body = {
        "output": key,
        # One output is sent as itself, several as a list (as Dash's renderer does).
        "outputs": listed[0] if len(listed) == 1 else listed,
        "inputs": inputs,
        "state": state,
        "changedPropIds": [changed],
    }
    return browser.post(CALLBACK, json=body)


def panel_invite(browser: httpx.Client, site: str, address: str, role: str = "viewer") -> httpx.Response:
    return call(
        browser,
        [("invite-created", "children"), ("team-version", "data")],
        [{"id": "invite-create", "property": "n_clicks", "value": 1}],
        [
            {"id": "site", "property": "value", "value": site},
            {"id": "invite-email", "property": "value", "value": address},
            {"id": "invite-role", "property": "value", "value": role},
            {"id": "team-version", "property": "data", "value": 0},
        ],
        "invite-create.n_clicks",
    )


def panel_invites(browser: httpx.Client, site: str) -> httpx.Response:
    return call(
        browser,
        [("team-invites", "children")],
        [
            # The list reads the site the Settings view shows (dashboard/view_tabs.py).
            {"id": "settings-site", "property": "data", "value": site},
            {"id": "team-version", "property": "data", "value": 0},
        ],
        [],
        "settings-site.data",
    )


def panel_revoke(browser: httpx.Client, site: str, invite_id: str) -> httpx.Response:
    button = {"id": invite_id, "type": "invite-revoke"}
    return call(
        browser,
        [("invite-status", "children"), ("team-version", "data")],
        [[{"id": button, "property": "n_clicks", "value": 1}]],
        [
            {"id": "site", "property": "value", "value": site},
            {"id": "team-version", "property": "data", "value": 0},
        ],
        json.dumps(button, sort_keys=True, separators=(",", ":")) + ".n_clicks",
    )


def panel_remove(browser: httpx.Client, site: str, address: str) -> httpx.Response:
    button = {"email": address, "type": "member-remove"}
    return call(
        browser,
        [("member-status", "children"), ("team-version", "data")],
        [[{"id": button, "property": "n_clicks", "value": 1}]],
        [
            {"id": "site", "property": "value", "value": site},
            {"id": "team-version", "property": "data", "value": 0},
        ],
        json.dumps(button, sort_keys=True, separators=(",", ":")) + ".n_clicks",
    )


def panel_members_and_audit(browser: httpx.Client, site: str) -> httpx.Response:
    return call(
        browser,
        [("team-owner", "style"), ("team-members", "children"), ("team-audit", "children")],
        [
            {"id": "site", "property": "value", "value": site},
            {"id": "team-version", "property": "data", "value": 0},
        ],
        [],
        "site.value",
    )


# -- a second server with an SMTP server configured ---------------------------------------------


@pytest.fixture(scope="module")
def mailing_server(dashboard_settings: Settings, inbox: tuple[Inbox, int]) -> Iterator[DashboardServer]:
    """The same store and home as `dashboard_server`, with TALLY_SMTP_HOST set: invitations go by mail."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    home = dashboard_settings.home_dir
    environment = server_environment(
        dashboard_settings,
        port,
        TALLY_DASHBOARD_URL=url,
        TALLY_SMTP_HOST="127.0.0.1",
        TALLY_SMTP_PORT=str(inbox[1]),
        TALLY_SMTP_STARTTLS="false",
        TALLY_SMTP_FROM="tally@example.com",
        TALLY_OWNER_EMAIL=OPERATOR_EMAIL,
    )
    log_path = home / "dashboard-mailing.log"
    with running_module("dashboard.app", environment, log_path, f"{url}/healthz"):
        password = (home / "dashboard_password").read_text().strip()
        yield DashboardServer(url, dashboard_settings.resolved_api_key(), password, log_path)


def mailed_links(inbox: Inbox, address: str) -> list[str]:
    links = []
    for raw in inbox.messages:
        mail = email.message_from_bytes(raw, policy=default)
        if mail["To"] == address:
            links += LINK.findall(mail.get_body(("plain",)).get_content())  # type: ignore[union-attr]
    return links


# -- finding 11: an owner claims someone else's address ------------------------------------------


def test_with_smtp_the_owner_of_a_never_sees_the_link_and_only_the_mailbox_gets_it(
    tenants: Tenants, mailing_server: DashboardServer, inbox: tuple[Inbox, int], dashboard_settings: Settings
) -> None:
    victim = fresh("victim")
    # The owner even names his own host: the mailed link must not follow the request's Host.
    answer = httpx.post(
        f"{mailing_server.url}/api/v1/invites?site={tenants.site_a}",
        json={"email": victim, "role": "owner"},
        headers=bearer(tenants.owner_a.manage_key) | {"Host": "attacker.example"},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    assert "link" not in answer.json() and "/invite/" not in answer.text
    assert answer.json()["delivery"] == "mail"

    links = mailed_links(inbox[0], victim)
    assert len(links) == 1 and links[0].startswith(f"{mailing_server.url}/invite/")

    # Nor does the Team panel show it.
    with closing(browser_of(mailing_server, tenants.owner_a.email, PASSWORD)) as owner:
        victim_too = fresh("victim")
        shown = panel_invite(owner, tenants.site_a, victim_too)
        assert shown.status_code == 200, shown.text
        assert "/invite/" not in shown.text and "mailed" in shown.text
    assert len(mailed_links(inbox[0], victim_too)) == 1

    # Whoever reads the mailbox accepts and gets the account.
    assert accept(mailing_server.url, links[0]).status_code == 302
    user = users.get_user(connect(dashboard_settings), victim)
    assert user is not None and user.role_on(tenants.site_a) == "owner"


def test_without_smtp_an_owners_invitation_waits_for_the_operator_and_shows_no_link(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    server, victim = tenants.server, fresh("claimed")
    answer = invite_over_api(server.url, tenants.owner_a.manage_key, tenants.site_a, victim, "owner")
    assert answer.status_code == 201, answer.text
    assert "link" not in answer.json() and "/invite/" not in answer.text
    assert (answer.json()["status"], answer.json()["delivery"]) == ("pending", "pending")
    invite_id = answer.json()["id"]
    with closing(browser_of(server, tenants.owner_a.email, PASSWORD)) as owner:
        shown = panel_invite(owner, tenants.site_a, fresh("claimed"))
        assert "/invite/" not in shown.text and "approval" in shown.text

    # The operator sees it pending, approves it, and alone gets the link.
    code, out, err = tally(dashboard_settings, "users", "invites", "--site", tenants.site_a)
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith(invite_id))
    assert line.split("\t")[1:6] == [victim, tenants.site_a, "owner", "pending", tenants.owner_a.email]
    code, out, err = tally(dashboard_settings, "users", "invites", "approve", invite_id)
    assert code == 0, err
    link = out.strip()
    assert "/invite/" in link
    assert accept(server.url, link).status_code == 302
    user = users.get_user(connect(dashboard_settings), victim)
    assert user is not None and user.role_on(tenants.site_a) == "owner"
    # Approving twice, or an unknown id: one line, no traceback.
    code, _out, err = tally(dashboard_settings, "users", "invites", "approve", invite_id)
    assert code != 0 and "id:" in err and "Traceback" not in err


def test_an_owner_cannot_accept_a_shown_invitation_of_an_existing_account_himself(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    server = tenants.server
    # The address has an account (the viewer of A): the owner is shown the link...
    answer = invite_over_api(server.url, tenants.owner_a.manage_key, tenants.site_a, tenants.viewer_a.email)
    assert answer.json()["delivery"] == "shown"
    link = answer.json()["link"]
    # ...but only that account's own password accepts it.
    assert accept(server.url, link, PASSWORD + " not his").status_code == 400
    user = users.get_user(connect(dashboard_settings), tenants.viewer_a.email)
    assert user is not None and user.role_on(tenants.site_a) == "viewer"
    api(
        server.url,
        "DELETE",
        f"/api/v1/invites?site={tenants.site_a}&id={answer.json()['id']}",
        tenants.operator_key,
    )


def test_once_the_account_is_removed_a_shown_link_cannot_recreate_it(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    target = make_member(dashboard_settings, fresh("target"), tenants.site_a, "viewer")
    answer = invite_over_api(
        tenants.server.url, tenants.owner_a.manage_key, tenants.site_a, target.email, "admin"
    )
    link = answer.json()["link"]
    code, _out, err = tally(dashboard_settings, "users", "remove", target.email)
    assert code == 0, err
    # The owner holding the link would now choose the password of a new account: refused.
    assert opens(tenants.server.url, link) == 404
    assert accept(tenants.server.url, link, "the owner's own choice").status_code == 404
    assert users.get_user(connect(dashboard_settings), target.email) is None


def test_no_team_account_takes_the_operators_own_address(
    tenants: Tenants, mailing_server: DashboardServer, dashboard_settings: Settings
) -> None:
    operator_email = OPERATOR_EMAIL  # the mailing server's TALLY_OWNER_EMAIL
    for key in (tenants.owner_a.manage_key, tenants.operator_key):
        answer = invite_over_api(mailing_server.url, key, tenants.site_a, operator_email.upper())
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"].startswith("email:") and "operator" in answer.json()["error"]
    with closing(browser_of(mailing_server)) as operator:
        shown = panel_invite(operator, tenants.site_a, operator_email)
        assert "operator" in shown.text and "/invite/" not in shown.text
    environment = os.environ | dashboard_settings.environment() | {"TALLY_OWNER_EMAIL": operator_email}
    done = run_tally(
        environment, "users", "invite", operator_email, "--site", tenants.site_a, "--role", "viewer"
    )
    assert done.returncode != 0 and "email:" in done.stderr and "Traceback" not in done.stderr
    # An invitation made for it before (storage-level) does not open either.
    token = users.create_invite(connect(dashboard_settings), operator_email, tenants.site_a, "owner")
    assert opens(mailing_server.url, f"/invite/{token}") == 404


# -- finding 7 and 2: invitations bound to their inviter, and to the invitee's removal ----------


def test_an_invitation_dies_when_its_inviter_is_demoted(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    inviter = make_member(dashboard_settings, fresh("inviter"), tenants.site_a, "owner")
    invitee = make_member(dashboard_settings, fresh("invitee"), tenants.site_b, "viewer")
    answer = invite_over_api(tenants.server.url, inviter.manage_key, tenants.site_a, invitee.email, "owner")
    link = answer.json()["link"]
    assert opens(tenants.server.url, link) == 200
    code, _out, err = tally(
        dashboard_settings, "users", "role", inviter.email, "--site", tenants.site_a, "--role", "viewer"
    )
    assert code == 0, err
    assert opens(tenants.server.url, link) == 404
    assert accept(tenants.server.url, link).status_code == 404
    user = users.get_user(connect(dashboard_settings), invitee.email)
    assert user is not None and tenants.site_a not in user.roles


def test_an_invitation_dies_when_its_inviter_is_removed(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    inviter = make_member(dashboard_settings, fresh("inviter"), tenants.site_a, "owner")
    invitee = make_member(dashboard_settings, fresh("invitee"), tenants.site_b, "viewer")
    link = invite_over_api(tenants.server.url, inviter.manage_key, tenants.site_a, invitee.email).json()[
        "link"
    ]
    assert tally(dashboard_settings, "users", "remove", inviter.email)[0] == 0
    assert accept(tenants.server.url, link).status_code == 404


def test_a_removed_account_does_not_come_back_through_an_old_invitation(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    client = connect(dashboard_settings)
    address = fresh("removed")
    # The operator invited them twice; they accepted one and kept the other.
    first = users.create_invite(client, address, tenants.site_a, "viewer")
    kept = users.create_invite(client, address, tenants.site_b, "owner")
    first_invite = users.find_invite(client, first)
    assert first_invite is not None
    users.accept_invite(client, first, first_invite, PASSWORD)
    assert tally(dashboard_settings, "users", "remove", address)[0] == 0

    assert opens(tenants.server.url, f"/invite/{kept}") == 404
    assert accept(tenants.server.url, f"/invite/{kept}").status_code == 404
    assert users.get_user(client, address) is None
    with httpx.Client(base_url=tenants.server.url, timeout=30) as browser:
        refused = browser.post("/login", data={"email": address, "password": PASSWORD})
        assert refused.status_code == 401

    # A new invitation, made after the removal by someone with the right, works.
    again = users.create_invite(client, address, tenants.site_a, "viewer")
    assert opens(tenants.server.url, f"/invite/{again}") == 200


def test_an_old_invitation_to_a_site_dies_with_the_role_on_it(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    client = connect(dashboard_settings)
    member = make_member(dashboard_settings, fresh("member"), tenants.site_a, "viewer")
    make_member(dashboard_settings, member.email, tenants.site_b, "viewer")
    to_a = users.create_invite(client, member.email, tenants.site_a, "owner")
    to_b = users.create_invite(client, member.email, tenants.site_b, "admin")
    # Taken off A by a removal path that does not revoke (storage), then through the CLI.
    users.remove_user(client, member.email, tenants.site_a)
    assert opens(tenants.server.url, f"/invite/{to_a}") == 404
    assert opens(tenants.server.url, f"/invite/{to_b}") == 200  # still a member of B
    assert tally(dashboard_settings, "users", "remove", member.email, "--site", tenants.site_b)[0] == 0
    assert opens(tenants.server.url, f"/invite/{to_b}") == 404


# -- finding 7: list and revoke, through the CLI, the API and the Team panel ---------------------


def test_the_owner_of_a_lists_and_revokes_as_site_a_only_through_the_api(tenants: Tenants) -> None:
    server = tenants.server
    made = invite_over_api(server.url, tenants.owner_a.manage_key, tenants.site_a, tenants.admin_b.email)
    invite_id, link = made.json()["id"], made.json()["link"]
    on_b = invite_over_api(server.url, tenants.operator_key, tenants.site_b, fresh("b-guest")).json()

    listed = api(server.url, "GET", f"/api/v1/invites?site={tenants.site_a}", tenants.owner_a.read_key)
    assert listed.status_code == 200, listed.text
    rows = {row["id"]: row for row in listed.json()["invites"]}
    assert rows[invite_id]["email"] == tenants.admin_b.email
    assert rows[invite_id]["invited_by"] == tenants.owner_a.email and "link" not in rows[invite_id]
    assert on_b["id"] not in rows

    # Not the viewer of A, not B's admin, not A's owner on B; a read key changes nothing.
    assert (
        api(
            server.url, "GET", f"/api/v1/invites?site={tenants.site_a}", tenants.viewer_a.read_key
        ).status_code
        == 403
    )
    assert (
        api(
            server.url, "GET", f"/api/v1/invites?site={tenants.site_b}", tenants.owner_a.manage_key
        ).status_code
        == 403
    )
    revoke_b = f"/api/v1/invites?site={tenants.site_a}&id={on_b['id']}"
    assert api(server.url, "DELETE", revoke_b, tenants.owner_a.manage_key).status_code == 404
    revoke_a = f"/api/v1/invites?site={tenants.site_a}&id={invite_id}"
    assert api(server.url, "DELETE", revoke_a, tenants.owner_a.read_key).status_code == 403
    assert api(server.url, "DELETE", revoke_a, tenants.admin_b.manage_key).status_code == 403

    revoked = api(server.url, "DELETE", revoke_a, tenants.owner_a.manage_key)
    assert revoked.status_code == 200 and revoked.json()["revoked"]["status"] == "revoked"
    assert opens(server.url, link) == 404
    assert api(server.url, "DELETE", revoke_a, tenants.owner_a.manage_key).status_code == 404
    listed = api(server.url, "GET", f"/api/v1/invites?site={tenants.site_a}", tenants.owner_a.read_key)
    assert invite_id not in {row["id"] for row in listed.json()["invites"]}


def test_the_operator_lists_and_revokes_through_the_cli(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    address = fresh("cli")
    code, out, err = tally(
        dashboard_settings, "users", "invite", address, "--site", tenants.site_b, "--role", "viewer"
    )
    assert code == 0, err
    link = out.strip()
    code, out, err = tally(dashboard_settings, "users", "invites")
    assert code == 0, err
    mine = [line.split("\t") for line in out.splitlines() if f"\t{address}\t" in line]
    assert len(mine) == 1 and mine[0][2:6] == [tenants.site_b, "viewer", "open", "operator"]
    code, out, err = tally(dashboard_settings, "users", "invites", "revoke", mine[0][0])
    assert code == 0, err
    assert opens(tenants.server.url, link) == 404
    code, _out, err = tally(dashboard_settings, "users", "invites", "revoke", "nosuchid")
    assert code != 0 and "id:" in err and "Traceback" not in err


def test_the_owner_of_a_lists_and_revokes_in_the_team_panel_and_the_viewer_cannot(tenants: Tenants) -> None:
    server = tenants.server
    made = invite_over_api(server.url, tenants.operator_key, tenants.site_a, fresh("panel")).json()
    on_b = invite_over_api(server.url, tenants.operator_key, tenants.site_b, fresh("panel-b")).json()
    with closing(browser_of(server, tenants.owner_a.email, PASSWORD)) as owner:
        shown = panel_invites(owner, tenants.site_a)
        assert shown.status_code == 200 and made["email"] in shown.text and on_b["email"] not in shown.text
        # B's invitation, by its id, through A: refused.
        other = panel_revoke(owner, tenants.site_a, on_b["id"])
        assert "no waiting invitation" in other.text
        assert opens(server.url, on_b["link"]) == 200
        # B named as the site: the guard refuses (no role there).
        assert panel_revoke(owner, tenants.site_b, on_b["id"]).status_code == 403
        done = panel_revoke(owner, tenants.site_a, made["id"])
        assert "Revoked" in done.text, done.text
    assert opens(server.url, made["link"]) == 404
    with closing(browser_of(server, tenants.viewer_a.email, PASSWORD)) as viewer:
        assert made["email"] not in panel_invites(viewer, tenants.site_a).text
        refused = panel_revoke(viewer, tenants.site_a, on_b["id"])
        assert refused.status_code == 403, refused.text  # the callback is declared the owners' (access.py)
    assert opens(server.url, on_b["link"]) == 200


def test_the_team_panels_invite_and_remove_write_audit_rows(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    leaving = make_member(dashboard_settings, fresh("leaving"), tenants.site_a, "viewer")
    guest = fresh("guest")
    with closing(browser_of(tenants.server, tenants.owner_a.email, PASSWORD)) as owner:
        assert panel_invite(owner, tenants.site_a, guest).status_code == 200
        removed = panel_remove(owner, tenants.site_a, leaving.email)
        assert f"Removed {leaving.email}" in removed.text, removed.text
    rows = [
        (row.action, row.email, row.site)
        for row in audit_rows(dashboard_settings)
        if guest in row.detail or leaving.email in row.detail
    ]
    assert ("invite_created", tenants.owner_a.email, tenants.site_a) in rows
    assert ("member_removed", tenants.owner_a.email, tenants.site_a) in rows


# -- finding 6: the audit log, scoped by site -------------------------------------------------------


def test_audit_rows_of_site_b_are_invisible_to_the_owner_of_a(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    server, site_b = tenants.server, tenants.site_b
    # Things happen on B: the operator invites, B's admin adds a subscriber and an exclusion,
    # and signs in from their address.
    secret = fresh("b-secret")
    assert invite_over_api(server.url, tenants.operator_key, site_b, secret).status_code == 201
    subscriber = fresh("b-subscriber")
    assert api(server.url, "POST", f"/api/v1/reports?site={site_b}", tenants.admin_b.manage_key,
               json={"email": subscriber, "frequency": "weekly"}).status_code == 201  # fmt: skip
    assert api(server.url, "POST", f"/api/v1/exclusions?site={site_b}", tenants.admin_b.manage_key,
               json={"kind": "ip", "value": "203.0.113.77"}).status_code == 201  # fmt: skip
    signed_in(server, tenants.admin_b.email, PASSWORD).close()
    # And the viewer of A signs in: from where is account-level, the operator's to read.
    signed_in(server, tenants.viewer_a.email, PASSWORD).close()

    answer = api(
        server.url, "GET", f"/api/v1/audit?site={tenants.site_a}&limit=1000", tenants.owner_a.read_key
    )
    assert answer.status_code == 200, answer.text
    seen = answer.text
    for leaked in (secret, subscriber, "203.0.113.77", site_b):
        assert leaked not in seen
    assert all(row["site"] == tenants.site_a for row in answer.json()["entries"])
    assert not [row for row in answer.json()["entries"] if row["action"] == "sign_in"]
    with closing(browser_of(server, tenants.owner_a.email, PASSWORD)) as owner:
        panel = panel_members_and_audit(owner, tenants.site_a).text
        for leaked in (secret, subscriber, "203.0.113.77", site_b):
            assert leaked not in panel

    # B's rows name B; the operator reads them all.
    everything = api(
        server.url, "GET", f"/api/v1/audit?site={site_b}&limit=1000", tenants.operator_key
    ).json()
    assert any(secret in row["detail"] and row["site"] == site_b for row in everything["entries"])
    assert any(
        row["action"] == "sign_in" and row["email"] == tenants.admin_b.email for row in everything["entries"]
    )


def test_a_strangers_failed_sign_in_writes_no_row_under_the_address_typed(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    framed = fresh("framed")
    with httpx.Client(base_url=tenants.server.url, timeout=30) as stranger:
        assert stranger.post("/login", data={"email": framed, "password": "guess"}).status_code == 401
        wrong = stranger.post("/login", data={"email": tenants.viewer_a.email, "password": "guess"})
        assert wrong.status_code == 401
    rows = audit_rows(dashboard_settings)
    assert not [row for row in rows if framed in (row.email, row.detail)]
    assert [row for row in rows if row.email == "" and row.detail == "unknown account"]
    # A failed sign-in on a real account is still written under it.
    assert [
        row
        for row in rows
        if (row.action, row.email, row.outcome) == ("sign_in", tenants.viewer_a.email, "failed")
    ]
