"""The settings and accounts API (dashboard/http_api/manage.py) on the real dashboard app (in-process
over WSGI) and the real ClickHouse engine: exclusions, members, invitations, API keys, the
audit log and email report subscriptions, each with what a caller observes — the change made
(read back through the store and the API), a 400 naming the field, a 403 for a role or a key
scope that does not allow it, a 404 for an unknown site or thing — and the dashboard's cookie
refused in place of a key."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage import exclusions, report_subscriptions, users
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.cli import run_tally

pytestmark = pytest.mark.integration

PASSWORD = "a long member password"
RANGE = {"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z"}
UNKNOWN_SITE = "never-registered.example.com"


@dataclass(frozen=True)
class Team:
    """A site with an owner, an admin and a viewer, each with a manage key and a read key."""

    site: str
    other_site: str
    emails: dict[str, str]  # role -> email
    manage: dict[str, dict[str, str]]  # role -> Authorization header of a manage key
    read: dict[str, dict[str, str]]  # role -> header of a read key
    operator: dict[str, str]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings) -> Iterator[FlaskClient]:
    yield build_app(dashboard_settings).server.test_client()


def member(settings: Settings, email: str, site: str, role: str) -> None:
    client = connect(settings)
    token = users.create_invite(client, email, site, role)
    invite = users.find_invite(client, token)
    assert invite is not None
    users.accept_invite(client, token, invite, PASSWORD)


@pytest.fixture
def team(dashboard_settings: Settings) -> Team:
    tag = uuid.uuid4().hex[:8]
    site, other = f"team-{tag}.example.com", f"other-{tag}.example.com"
    client = connect(dashboard_settings)
    add_site(client, site)
    add_site(client, other)
    emails, manage, read = {}, {}, {}
    for role in users.ROLES:
        email = f"{role}-{tag}@example.com"
        member(dashboard_settings, email, site, role)
        emails[role] = email
        manage[role] = bearer(users.create_key(client, email, [site], scope="manage")[1])
        read[role] = bearer(users.create_key(client, email, [site])[1])
    operator = bearer(dashboard_settings.resolved_api_key())
    return Team(site, other, emails, manage, read, operator)


def refused(answer, status: int, field: str | None = None) -> None:  # type: ignore[no-untyped-def]
    assert answer.status_code == status, answer.get_json()
    error = answer.get_json()["error"]
    if field is not None:
        assert error.startswith(f"{field}:"), error


# -- exclusions -------------------------------------------------------------------------------


def test_an_admin_excludes_a_range_lists_it_and_removes_it(
    api: FlaskClient, team: Team, dashboard_settings: Settings
) -> None:
    url = f"/api/v1/exclusions?site={team.site}"
    added = api.post(url, json={"kind": "ip", "value": "10.1.2.3/8"}, headers=team.manage["admin"])
    assert added.status_code == 201, added.get_json()
    assert added.get_json() == {"site": team.site, "kind": "ip", "value": "10.0.0.0/8"}
    # The collector's copy reads the store: the exclusion is there.
    stored = exclusions.list_exclusions(connect(dashboard_settings), team.site)
    assert stored == [exclusions.Exclusion(team.site, "ip", "10.0.0.0/8")]
    again = api.post(url, json={"kind": "ip", "value": "10.0.0.0/8"}, headers=team.operator)
    assert again.status_code == 200
    # A read key of an admin reads them.
    listed = api.get(url, headers=team.read["admin"])
    assert listed.get_json() == {"site": team.site, "exclusions": [{"kind": "ip", "value": "10.0.0.0/8"}]}

    removed = api.delete(
        "/api/v1/exclusions", query_string={"site": team.site, "kind": "ip", "value": "10.0.0.0/8"},
        headers=team.manage["admin"],
    )  # fmt: skip
    assert removed.status_code == 200, removed.get_json()
    assert exclusions.list_exclusions(connect(dashboard_settings), team.site) == []
    gone = api.delete(
        "/api/v1/exclusions", query_string={"site": team.site, "kind": "ip", "value": "10.0.0.0/8"},
        headers=team.manage["admin"],
    )  # fmt: skip
    refused(gone, 404, "value")


def test_exclusions_refuse_bad_fields_roles_read_keys_and_unknown_sites(api: FlaskClient, team: Team) -> None:
    url = f"/api/v1/exclusions?site={team.site}"
    admin = team.manage["admin"]
    refused(api.post(url, json={"kind": "ip", "value": "10.0.0.300"}, headers=admin), 400, "value")
    refused(api.post(url, json={"kind": "browser", "value": "x"}, headers=admin), 400, "kind")
    refused(api.post(url, json={"kind": "country"}, headers=admin), 400, "value")
    refused(api.post(url, json={"kind": "path", "value": "/a", "why": 1}, headers=admin), 400, "why")
    refused(api.post(url, data="kind=ip", headers=admin), 400, "body")
    refused(
        api.post("/api/v1/exclusions", json={"kind": "ip", "value": "10.0.0.0/8"}, headers=admin), 400, "site"
    )
    refused(
        api.get("/api/v1/exclusions", query_string={"site": "not a site"}, headers=team.operator), 400, "site"
    )
    refused(api.get(f"/api/v1/exclusions?site={team.site}&sort=1", headers=admin), 400, "sort")
    refused(api.post(url, json={"kind": "country", "value": "DE"}, headers=team.manage["viewer"]), 403)
    refused(api.get(url, headers=team.manage["viewer"]), 403)
    refused(api.post(url, json={"kind": "country", "value": "DE"}, headers=team.read["admin"]), 403)
    # A key for another site: its scope does not hold this one.
    refused(api.get(f"/api/v1/exclusions?site={team.other_site}", headers=admin), 403)
    refused(api.get(f"/api/v1/exclusions?site={UNKNOWN_SITE}", headers=team.operator), 404, "site")
    refused(api.post(url, json={"kind": "country", "value": "DE"}), 401)


def test_an_exclusion_past_the_sites_cap_is_the_stores_refusal_as_a_400_naming_site(
    api: FlaskClient, team: Team, dashboard_settings: Settings
) -> None:
    full = [exclusions.Exclusion(team.site, "path", f"/full/{n}") for n in range(exclusions.MAX_PER_SITE)]
    exclusions.add_exclusions(connect(dashboard_settings), full)
    url = f"/api/v1/exclusions?site={team.site}"
    answer = api.post(url, json={"kind": "path", "value": "/one-more"}, headers=team.manage["admin"])
    refused(answer, 400, "site")
    assert answer.get_json()["error"] == f"site: at most {exclusions.MAX_PER_SITE} exclusions per site"
    assert len(exclusions.list_exclusions(connect(dashboard_settings), team.site)) == exclusions.MAX_PER_SITE


def test_the_dashboard_cookie_is_no_key(api: FlaskClient, team: Team, dashboard_settings: Settings) -> None:
    """Signed in to the dashboard (the cookie a page on another site could make the browser
    send), the API still wants a key: writes cannot be forged from a page the operator opens."""
    signed_in = api.post("/login", data={"password": dashboard_settings.resolved_dashboard_password()})
    assert signed_in.status_code == 302
    answer = api.post(f"/api/v1/exclusions?site={team.site}", json={"kind": "country", "value": "DE"})
    refused(answer, 401)
    # The dashboard's own cookie-authenticated writes, Dash callbacks, are read only as JSON: a
    # form or a no-cors fetch (text/plain, no preflight) from another page is refused.
    body = '{"output": "exclusion-status.children", "inputs": [], "state": []}'
    forged = api.post("/_dash-update-component", data=body, content_type="text/plain")
    assert forged.status_code == 415
    api.post("/logout")


# -- members, invitations, the audit log ------------------------------------------------------


def test_an_owner_lists_members_changes_a_role_and_removes_one(
    api: FlaskClient, team: Team, dashboard_settings: Settings
) -> None:
    owner, viewer = team.manage["owner"], team.emails["viewer"]
    listed = api.get(f"/api/v1/members?site={team.site}", headers=team.read["owner"])
    assert listed.status_code == 200
    members = {row["email"]: row["role"] for row in listed.get_json()["members"]}
    assert members == {dashboard_settings.owner_email: "owner"} | {team.emails[r]: r for r in users.ROLES}

    changed = api.put(
        f"/api/v1/members?site={team.site}", json={"email": viewer, "role": "admin"}, headers=owner
    )
    assert changed.get_json() == {"email": viewer, "site": team.site, "role": "admin"}
    user = users.get_user(connect(dashboard_settings), viewer)
    assert user is not None and user.role_on(team.site) == "admin"
    # The new role holds at once: the former viewer's key now manages exclusions.
    excluded = api.post(
        f"/api/v1/exclusions?site={team.site}", json={"kind": "country", "value": "FR"},
        headers=team.manage["viewer"],
    )  # fmt: skip
    assert excluded.status_code == 201

    removed = api.delete("/api/v1/members", query_string={"site": team.site, "email": viewer}, headers=owner)
    assert removed.get_json() == {"removed": {"email": viewer, "site": team.site, "role": "admin"}}
    user = users.get_user(connect(dashboard_settings), viewer)
    assert user is not None and team.site not in user.roles
    # Their key lost the site with the role.
    stats = api.get(
        "/api/v1/stats/aggregate", query_string={"site": team.site, **RANGE}, headers=team.read["viewer"]
    )
    assert stats.status_code == 403
    again = api.delete("/api/v1/members", query_string={"site": team.site, "email": viewer}, headers=owner)
    refused(again, 404, "email")


def test_member_changes_refuse_bad_fields_non_owners_and_unknown_sites(api: FlaskClient, team: Team) -> None:
    url = f"/api/v1/members?site={team.site}"
    owner, viewer = team.manage["owner"], team.emails["viewer"]
    refused(api.put(url, json={"email": viewer, "role": "god"}, headers=owner), 400, "role")
    refused(api.put(url, json={"email": "not-an-address", "role": "admin"}, headers=owner), 400, "email")
    refused(api.put(url, json={"role": "admin"}, headers=owner), 400, "email")
    refused(
        api.put(url, json={"email": "stranger@example.com", "role": "admin"}, headers=owner), 404, "email"
    )
    refused(api.put(url, json={"email": viewer, "role": "owner"}, headers=team.manage["admin"]), 403)
    refused(api.put(url, json={"email": viewer, "role": "owner"}, headers=team.read["owner"]), 403)
    refused(api.get(url, headers=team.manage["admin"]), 403)
    refused(api.delete("/api/v1/members", query_string={"site": team.site}, headers=owner), 400, "email")
    unknown = api.put(
        f"/api/v1/members?site={UNKNOWN_SITE}", json={"email": viewer, "role": "admin"}, headers=team.operator
    )
    refused(unknown, 404, "site")


def test_an_owners_invitation_to_a_new_address_waits_for_the_operator_then_works(
    api: FlaskClient, team: Team, dashboard_settings: Settings
) -> None:
    email = f"new-{uuid.uuid4().hex[:6]}@example.com"
    url = f"/api/v1/invites?site={team.site}"
    answer = api.post(url, json={"email": email, "role": "viewer"}, headers=team.manage["owner"])
    assert answer.status_code == 201, answer.get_json()
    invitation = answer.get_json()
    assert (invitation["email"], invitation["site"], invitation["role"]) == (email, team.site, "viewer")
    # No SMTP server here: the address is unproven, so no link for the owner; the operator approves.
    assert (invitation["status"], invitation["delivery"]) == (
        "pending",
        "pending",
    ) and "link" not in invitation
    listed = api.get(url, headers=team.read["owner"]).get_json()["invites"]
    assert [row["id"] for row in listed if row["email"] == email] == [invitation["id"]]
    _approved, token = users.approve_invite(connect(dashboard_settings), invitation["id"])
    path = f"/invite/{token}"
    accepted = api.post(path, data={"password": PASSWORD, "confirm": PASSWORD})
    assert accepted.status_code == 302
    api.post("/logout")
    user = users.get_user(connect(dashboard_settings), email)
    assert user is not None and user.role_on(team.site) == "viewer"

    refused(api.post(url, json={"email": "x", "role": "viewer"}, headers=team.manage["owner"]), 400, "email")
    refused(api.post(url, json={"email": email, "role": "boss"}, headers=team.manage["owner"]), 400, "role")
    refused(api.post(url, json={"email": email, "role": "viewer"}, headers=team.manage["admin"]), 403)
    unknown = api.post(
        f"/api/v1/invites?site={UNKNOWN_SITE}", json={"email": email, "role": "viewer"}, headers=team.operator
    )
    refused(unknown, 404, "site")


def test_the_owner_reads_the_audit_log_with_the_changes_made_over_the_api(
    api: FlaskClient, team: Team
) -> None:
    owner, viewer = team.manage["owner"], team.emails["viewer"]
    api.put(f"/api/v1/members?site={team.site}", json={"email": viewer, "role": "admin"}, headers=owner)
    answer = api.get(f"/api/v1/audit?site={team.site}&limit=20", headers=team.read["owner"])
    assert answer.status_code == 200, answer.get_json()
    entries = answer.get_json()["entries"]
    changed = [entry for entry in entries if entry["action"] == "role_changed"]
    assert changed and changed[0]["email"] == team.emails["owner"]
    assert changed[0]["detail"] == f"{viewer} {team.site} admin"
    refused(api.get(f"/api/v1/audit?site={team.site}&limit=0", headers=owner), 400, "limit")
    refused(api.get(f"/api/v1/audit?site={team.site}", headers=team.manage["admin"]), 403)
    refused(api.get(f"/api/v1/audit?site={UNKNOWN_SITE}", headers=team.operator), 404, "site")


# -- API keys ---------------------------------------------------------------------------------


def test_a_member_creates_lists_and_revokes_their_own_keys(api: FlaskClient, team: Team) -> None:
    viewer = team.manage["viewer"]
    created = api.post("/api/v1/keys", json={"sites": [team.site], "label": "grafana"}, headers=viewer)
    assert created.status_code == 201, created.get_json()
    key = created.get_json()
    assert (key["email"], key["sites"], key["scope"], key["label"]) == (
        team.emails["viewer"], [team.site], "read", "grafana",
    )  # fmt: skip
    stats = {"site": team.site, **RANGE}
    assert (
        api.get("/api/v1/stats/aggregate", query_string=stats, headers=bearer(key["key"])).status_code == 200
    )
    # The new key is read-only: it changes nothing, not even keys.
    refused(api.post("/api/v1/keys", json={"sites": [team.site]}, headers=bearer(key["key"])), 403)

    listed = api.get("/api/v1/keys", headers=viewer).get_json()
    assert listed["email"] == team.emails["viewer"]
    assert key["id"] in [row["id"] for row in listed["keys"]] and "key" not in listed["keys"][0]

    revoked = api.delete("/api/v1/keys", query_string={"id": key["id"]}, headers=viewer)
    assert revoked.status_code == 200 and revoked.get_json()["revoked"]["revoked"] is True
    assert (
        api.get("/api/v1/stats/aggregate", query_string=stats, headers=bearer(key["key"])).status_code == 401
    )


def test_keys_refuse_bad_fields_other_users_and_other_sites(api: FlaskClient, team: Team) -> None:
    viewer = team.manage["viewer"]
    refused(
        api.post("/api/v1/keys", json={"sites": [team.site], "scope": "root"}, headers=viewer), 400, "scope"
    )
    refused(api.post("/api/v1/keys", json={"sites": []}, headers=viewer), 400, "sites")
    refused(api.post("/api/v1/keys", json={"sites": [team.other_site]}, headers=viewer), 403)
    other = {"sites": [team.site], "email": team.emails["owner"]}
    refused(api.post("/api/v1/keys", json=other, headers=viewer), 403)
    refused(api.get("/api/v1/keys", query_string={"email": team.emails["owner"]}, headers=viewer), 403)
    refused(api.get("/api/v1/keys", headers=team.operator), 400, "email")
    # The operator creates a key for a member on a site the member has no role on: refused.
    not_theirs = {"sites": [team.other_site], "email": team.emails["viewer"]}
    refused(api.post("/api/v1/keys", json=not_theirs, headers=team.operator), 400, "sites")
    # Another user's key is unknown to a member's key.
    owners = api.get("/api/v1/keys", query_string={"email": team.emails["owner"]}, headers=team.operator)
    owner_key = owners.get_json()["keys"][0]["id"]
    refused(api.delete("/api/v1/keys", query_string={"id": owner_key}, headers=viewer), 404, "id")
    refused(api.delete("/api/v1/keys", query_string={"id": owner_key}, headers=team.read["owner"]), 403)


# -- email report subscriptions ---------------------------------------------------------------


def test_an_admin_subscribes_and_unsubscribes_an_address(
    api: FlaskClient, team: Team, dashboard_settings: Settings
) -> None:
    url = f"/api/v1/reports?site={team.site}"
    admin = team.manage["admin"]
    answer = api.post(url, json={"email": "boss@example.com", "frequency": "weekly"}, headers=admin)
    assert answer.status_code == 201, answer.get_json()
    stored = report_subscriptions.list_subscriptions(connect(dashboard_settings), team.site)
    assert stored == [report_subscriptions.Subscription(team.site, "boss@example.com", "weekly")]
    listed = api.get(url, headers=team.read["admin"]).get_json()
    assert listed == {
        "site": team.site,
        "subscriptions": [{"email": "boss@example.com", "frequency": "weekly"}],
    }

    ended = api.delete(
        "/api/v1/reports", query_string={"site": team.site, "email": "boss@example.com"}, headers=admin
    )
    assert ended.get_json() == {
        "removed": [{"site": team.site, "email": "boss@example.com", "frequency": "weekly"}]
    }
    again = api.delete(
        "/api/v1/reports", query_string={"site": team.site, "email": "boss@example.com"}, headers=admin
    )
    refused(again, 404, "email")

    refused(
        api.post(url, json={"email": "boss@example.com", "frequency": "daily"}, headers=admin),
        400,
        "frequency",
    )
    refused(api.post(url, json={"email": "boss", "frequency": "weekly"}, headers=admin), 400, "email")
    refused(
        api.post(
            url, json={"email": "boss@example.com", "frequency": "weekly"}, headers=team.manage["viewer"]
        ),
        403,
    )
    unknown = api.get(f"/api/v1/reports?site={UNKNOWN_SITE}", headers=team.operator)
    refused(unknown, 404, "site")


def test_a_manage_key_made_with_the_cli_changes_what_its_role_allows(
    api: FlaskClient, team: Team, dashboard_settings: Settings
) -> None:
    def create(scope: str) -> subprocess.CompletedProcess[str]:
        arguments = ["users", "keys", "create", team.emails["admin"], "--site", team.site, "--scope", scope]
        return run_tally(os.environ | dashboard_settings.environment(), *arguments)

    made = create("manage")
    assert made.returncode == 0, made.stderr
    assert "(manage)" in made.stderr
    url = f"/api/v1/exclusions?site={team.site}"
    added = api.post(url, json={"kind": "country", "value": "NL"}, headers=bearer(made.stdout.strip()))
    assert added.status_code == 201
    listed = run_tally(
        os.environ | dashboard_settings.environment(), "users", "keys", "list", team.emails["admin"]
    )
    assert "\tmanage" in listed.stdout and "\tread" in listed.stdout

    wrong = create("root")
    assert wrong.returncode != 0 and len(wrong.stderr.strip().splitlines()) == 1, wrong.stderr
    assert "--scope" in wrong.stderr


# -- the site's time zone ---------------------------------------------------------------------


def test_an_admin_sets_the_time_zone_and_reports_follow(api: FlaskClient, team: Team) -> None:
    url = f"/api/v1/timezone?site={team.site}"
    assert api.get(url, headers=team.read["viewer"]).get_json() == {"site": team.site, "timezone": "UTC"}
    changed = api.put(url, json={"timezone": "Europe/Berlin"}, headers=team.manage["admin"])
    assert changed.get_json() == {"site": team.site, "timezone": "Europe/Berlin"}
    assert api.get(url, headers=team.read["viewer"]).get_json()["timezone"] == "Europe/Berlin"
    # The stats API's days now start at Berlin's midnight.
    points = api.get(
        "/api/v1/stats/timeseries",
        query_string={"site": team.site, "from": "2026-11-10", "to": "2026-11-11", "interval": "day"},
        headers=team.read["viewer"],
    ).get_json()
    assert points[0]["t"] == "2026-11-10T00:00:00+01:00"

    refused(api.put(url, json={"timezone": "Mars/Olympus"}, headers=team.manage["admin"]), 400, "timezone")
    refused(api.put(url, json={}, headers=team.manage["admin"]), 400, "timezone")
    refused(api.put(url, json={"timezone": "UTC"}, headers=team.manage["viewer"]), 403)
    refused(api.put(url, json={"timezone": "UTC"}, headers=team.read["admin"]), 403)
    refused(api.get(f"/api/v1/timezone?site={UNKNOWN_SITE}", headers=team.operator), 404, "site")


def test_an_admin_sets_the_visitor_identity_and_members_read_it(api: FlaskClient, team: Team) -> None:
    url = f"/api/v1/identity?site={team.site}"
    daily = {
        "site": team.site,
        "rotation": "daily",
        "since": None,
        "history": [{"rotation": "daily", "since": None}],
    }
    assert api.get(url, headers=team.read["viewer"]).get_json() == daily
    changed = api.put(url, json={"rotation": "weekly"}, headers=team.manage["admin"])
    assert changed.status_code == 200, changed.get_json()
    answer = changed.get_json()
    assert answer["rotation"] == "weekly" and answer["since"] is not None
    assert [change["rotation"] for change in answer["history"]] == ["daily", "weekly"]
    assert api.get(url, headers=team.read["viewer"]).get_json() == answer
    assert (
        api.put(url, json={"rotation": "Monthly"}, headers=team.manage["owner"]).get_json()["rotation"]
        == "monthly"
    )
    audit = api.get(f"/api/v1/audit?site={team.site}", headers=team.operator).get_json()
    assert f"{team.site} weekly" in [
        row["detail"] for row in audit["entries"] if row["action"] == "identity_changed"
    ]

    refused(api.put(url, json={"rotation": "hourly"}, headers=team.manage["admin"]), 400, "rotation")
    refused(api.put(url, json={}, headers=team.manage["admin"]), 400, "rotation")
    refused(api.put(url, json={"rotation": "daily"}, headers=team.manage["viewer"]), 403)
    refused(api.put(url, json={"rotation": "daily"}, headers=team.read["admin"]), 403)
    other = f"/api/v1/identity?site={team.other_site}"
    refused(api.put(other, json={"rotation": "daily"}, headers=team.manage["admin"]), 403)
    refused(api.get(other, headers=team.read["viewer"]), 403)
    refused(api.get(f"/api/v1/identity?site={UNKNOWN_SITE}", headers=team.operator), 404, "site")
    assert (
        api.get(url, headers=team.read["viewer"]).get_json()["rotation"] == "monthly"
    )  # unchanged by the refusals
