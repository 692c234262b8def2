"""Plausible's Sites API on Tally (issue 37; dashboard/http_api/sites_api.py), over HTTP to the
real dashboard server (`python -m dashboard.app` under waitress) and the real ClickHouse engine.

The provisioning client below is written from Plausible's documentation
(https://plausible.io/docs/sites-api: paths, form fields as its `curl -F` examples send them,
answers, cursor pagination), with plain httpx and no knowledge of Tally's code: what an agency's
script would do. The refusals are asked by the tenants of the adversarial suite (a viewer's
keys, an owner's read-only key, another site's admin)."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from dashboard.app import build_app
from dashboard.periods import period
from storage import annotations, custom_properties, goals, shared_links, users
from storage.client import connect
from storage.sites import add_site, list_sites, site_timezone
from tally.settings import Settings
from tests.fixtures.dashboard_server import DashboardServer, signed_in
from tests.fixtures.events import archive_rows, page_view
from tests.security.conftest import Tenants, bearer
from tests.security.conftest import tenants as tenants  # the module-scoped fixture, shared

pytestmark = pytest.mark.integration

SITES = 100


class PlausibleSitesClient:
    """A Sites API client as Plausible's documentation describes it."""

    def __init__(self, base_url: str, token: str) -> None:
        self.http = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=60)

    def create_site(self, domain: str, timezone: str) -> dict:
        answer = self.http.post("/api/v1/sites", data={"domain": domain, "timezone": timezone})
        answer.raise_for_status()
        return answer.json()

    def find_or_create_goal(self, site_id: str, event_name: str) -> dict:
        fields = {"site_id": site_id, "goal_type": "event", "event_name": event_name}
        answer = self.http.put("/api/v1/sites/goals", data=fields)
        answer.raise_for_status()
        return answer.json()

    def find_or_create_shared_link(self, site_id: str, name: str) -> dict:
        answer = self.http.put("/api/v1/sites/shared-links", data={"site_id": site_id, "name": name})
        answer.raise_for_status()
        return answer.json()

    def all_sites(self, limit: int) -> list[dict]:
        """Every page, following meta.after until it is null (Plausible's "Pagination")."""
        sites, after = [], None
        while True:
            params = {"limit": limit} | ({"after": after} if after else {})
            page = self.http.get("/api/v1/sites", params=params).json()
            assert page["meta"]["limit"] == limit
            sites.extend(page["sites"])
            after = page["meta"]["after"]
            if after is None:
                return sites

    def teams(self) -> list[dict]:
        answer = self.http.get("/api/v1/sites/teams")
        answer.raise_for_status()
        return answer.json()["teams"]

    def goals(self, site_id: str) -> list[dict]:
        return self.http.get("/api/v1/sites/goals", params={"site_id": site_id}).json()["goals"]

    def custom_props(self, site_id: str) -> list[str]:
        answer = self.http.get("/api/v1/sites/custom-props", params={"site_id": site_id})
        answer.raise_for_status()
        return [item["property"] for item in answer.json()["custom_properties"]]

    def add_custom_prop(self, site_id: str, name: str) -> dict:
        answer = self.http.put("/api/v1/sites/custom-props", data={"site_id": site_id, "property": name})
        answer.raise_for_status()
        return answer.json()

    def delete_custom_prop(self, site_id: str, name: str) -> dict:
        path = f"/api/v1/sites/custom-props/{quote(name, safe='')}"
        answer = self.http.request("DELETE", path, data={"site_id": site_id})
        answer.raise_for_status()
        return answer.json()

    def close(self) -> None:
        self.http.close()


def test_a_plausible_client_provisions_100_sites_with_a_goal_and_a_shared_link_each(
    dashboard_server: DashboardServer, dashboard_settings: Settings
) -> None:
    tag = uuid.uuid4().hex[:8]
    domains = [f"agency-{tag}-{number:03d}.example.com" for number in range(SITES)]
    plausible = PlausibleSitesClient(dashboard_server.url, dashboard_server.api_key)
    links = {}
    for domain in domains:
        assert plausible.create_site(domain, "Europe/London") == {
            "domain": domain,
            "timezone": "Europe/London",
        }
        goal = plausible.find_or_create_goal(domain, "Signup")
        assert goal["domain"] == domain and goal["goal_type"] == "event" and goal["event_name"] == "Signup"
        assert goal["display_name"] == "Signup" and goal["page_path"] is None
        link = plausible.find_or_create_shared_link(domain, "Wordpress")
        assert link["name"] == "Wordpress" and "/share/" in link["url"]
        links[domain] = link["url"]

    # The list, 30 a page: every site once, in pages whose cursors lead forward and back.
    listed = [site for site in plausible.all_sites(limit=30) if site["domain"] in links]
    assert [site["domain"] for site in listed] == domains
    assert all(site["timezone"] == "Europe/London" for site in listed)
    first = plausible.http.get("/api/v1/sites", params={"limit": 30}).json()
    assert first["meta"]["before"] is None
    second = plausible.http.get("/api/v1/sites", params={"limit": 30, "after": first["meta"]["after"]}).json()
    back = plausible.http.get(
        "/api/v1/sites", params={"limit": 30, "before": second["meta"]["before"]}
    ).json()
    assert back["sites"] == first["sites"]

    # The dashboard's site list and each site's settings hold them.
    client = connect(dashboard_settings)
    assert set(domains) <= set(list_sites(client))
    assert site_timezone(client, domains[7]) == "Europe/London"
    assert [goal.name for goal in goals.list_goals(client, domains[7])] == ["Signup"]
    assert [link.label for link in shared_links.list_links(client, domains[7])] == ["Wordpress"]

    # Find-or-create, as Plausible's: the same goal and the same URL again; the URL opens the site.
    again = plausible.find_or_create_goal(domains[0], "Signup")
    assert again["id"] == plausible.goals(domains[0])[0]["id"]
    assert plausible.find_or_create_shared_link(domains[0], "Wordpress")["url"] == links[domains[0]]
    opened = httpx.get(links[domains[0]], timeout=30)
    assert opened.status_code == 200, opened.status_code

    # A page goal, listed beside the event goal, and deleted by its id.
    page = plausible.http.put(
        "/api/v1/sites/goals", json={"site_id": domains[0], "goal_type": "page", "page_path": "/register"}
    ).json()
    assert (page["display_name"], page["page_path"], page["event_name"]) == (
        "Visit /register",
        "/register",
        None,
    )
    assert {goal["display_name"] for goal in plausible.goals(domains[0])} == {"Signup", "Visit /register"}
    deleted = plausible.http.request(
        "DELETE", f"/api/v1/sites/goals/{page['id']}", data={"site_id": domains[0]}
    )
    assert deleted.json() == {"deleted": True}
    assert [goal["display_name"] for goal in plausible.goals(domains[0])] == ["Signup"]
    plausible.close()


def test_deleting_a_site_removes_its_settings_and_revokes_its_links(
    dashboard_server: DashboardServer, dashboard_settings: Settings
) -> None:
    domain = f"gone-{uuid.uuid4().hex[:8]}.example.com"
    plausible = PlausibleSitesClient(dashboard_server.url, dashboard_server.api_key)
    plausible.create_site(domain, "Europe/Berlin")
    plausible.find_or_create_goal(domain, "Signup")
    url = plausible.find_or_create_shared_link(domain, "Embed")["url"]
    assert plausible.http.get(f"/api/v1/sites/{domain}").json() == {
        "domain": domain, "timezone": "Europe/Berlin", "custom_properties": [],
    }  # fmt: skip
    plausible.add_custom_prop(domain, "author")
    assert plausible.http.get(f"/api/v1/sites/{domain}").json()["custom_properties"] == ["author"]
    annotated = plausible.http.post(
        "/api/v1/annotations", params={"site": domain}, json={"date": "2026-11-02", "text": "Launch"}
    )
    assert annotated.status_code == 201, annotated.text

    assert plausible.http.delete(f"/api/v1/sites/{domain}").json() == {"deleted": True, "events": "kept"}
    client = connect(dashboard_settings)
    assert domain not in list_sites(client)
    assert goals.list_goals(client, domain) == []
    assert custom_properties.list_properties(client, domain) == []
    assert annotations.list_notes(client, domain) == []
    assert all(link.revoked for link in shared_links.list_links(client, domain))
    assert httpx.get(url, timeout=30).status_code != 200
    gone = plausible.http.get(f"/api/v1/sites/{domain}")
    assert gone.status_code == 404 and gone.json()["error"].startswith("site_id:")
    audit = users.audit(client, [domain])
    assert any(entry.action == "site_removed" and "1 annotations" in entry.detail for entry in audit)
    plausible.close()


def test_guests_are_invited_listed_and_removed_with_plausibles_roles(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    api = httpx.Client(base_url=tenants.server.url, headers=bearer(tenants.operator_key), timeout=30)
    site = tenants.site_a
    email = f"guest-{uuid.uuid4().hex[:8]}@example.com"
    made = api.put("/api/v1/sites/guests", data={"site_id": site, "email": email, "role": "editor"}).json()
    assert (made["email"], made["role"], made["accepted"]) == (email, "editor", False)
    assert made["link"]  # the operator's invitation: its link goes to the caller, as POST /invites
    # Tally's role for Plausible's editor: admin.
    assert [
        (i.email, i.role) for i in users.list_invites(connect(dashboard_settings), site) if i.email == email
    ] == [(email, "admin")]
    listed = api.get("/api/v1/sites/guests", params={"site_id": site}).json()
    assert {"email": email, "role": "editor", "accepted": False} in listed["guests"]
    assert {"email": tenants.viewer_a.email, "role": "viewer", "accepted": True} in listed["guests"]
    assert tenants.owner_a.email not in {guest["email"] for guest in listed["guests"]}  # team, not guest
    again = api.put("/api/v1/sites/guests", data={"site_id": site, "email": email, "role": "editor"}).json()
    assert again == {"email": email, "role": "editor", "accepted": False}

    removed = api.request("DELETE", f"/api/v1/sites/guests/{email}", data={"site_id": site})
    assert removed.json() == {"deleted": True}
    listed = api.get("/api/v1/sites/guests", params={"site_id": site}).json()
    assert email not in {guest["email"] for guest in listed["guests"]}
    api.close()


def refused(answer: httpx.Response, status: int, field: str) -> None:
    assert answer.status_code == status, (answer.status_code, answer.text)
    assert answer.json()["error"].startswith(f"{field}:"), answer.json()


def test_every_refusal_names_its_field(tenants: Tenants, dashboard_settings: Settings) -> None:
    url, site = tenants.server.url, tenants.site_a
    operator = httpx.Client(base_url=url, headers=bearer(tenants.operator_key), timeout=30)
    goal = {"site_id": site, "goal_type": "event", "event_name": "Refused"}

    # A viewer's key, even with scope manage: no goals, links or guests; it reads the goals.
    viewer = httpx.Client(base_url=url, headers=bearer(tenants.viewer_a.manage_key), timeout=30)
    refused(viewer.put("/api/v1/sites/goals", data=goal), 403, "site_id")
    refused(viewer.put("/api/v1/sites/shared-links", data={"site_id": site, "name": "x"}), 403, "site_id")
    refused(viewer.get("/api/v1/sites/guests", params={"site_id": site}), 403, "site_id")
    assert viewer.get("/api/v1/sites/goals", params={"site_id": site}).status_code == 200
    refused(viewer.delete(f"/api/v1/sites/{site}"), 403, "site_id")

    # The owner's read-only key changes nothing.
    read_only = httpx.Client(base_url=url, headers=bearer(tenants.owner_a.read_key), timeout=30)
    answer = read_only.put("/api/v1/sites/goals", data=goal)
    assert answer.status_code == 403 and "read-only" in answer.json()["error"]
    assert read_only.get(f"/api/v1/sites/{site}").status_code == 200

    # Another site's admin: neither reads nor changes site A; lists only its own site.
    other = httpx.Client(base_url=url, headers=bearer(tenants.admin_b.manage_key), timeout=30)
    refused(other.put("/api/v1/sites/goals", data=goal), 403, "site_id")
    refused(other.get("/api/v1/sites/goals", params={"site_id": site}), 403, "site_id")
    refused(other.get(f"/api/v1/sites/{site}"), 403, "site_id")
    refused(other.put("/api/v1/sites/shared-links", data={"site_id": site, "name": "x"}), 403, "site_id")
    assert [row["domain"] for row in other.get("/api/v1/sites").json()["sites"]] == [tenants.site_b]
    # Creating a site is the operator's.
    assert (
        other.post("/api/v1/sites", data={"domain": f"x-{uuid.uuid4().hex[:6]}.example.com"}).status_code
        == 403
    )

    # Unknown site, typo'd goal type, missing or bad fields.
    unknown = "never-registered.example.com"
    refused(operator.get(f"/api/v1/sites/{unknown}"), 404, "site_id")
    refused(operator.put("/api/v1/sites/goals", data=goal | {"site_id": unknown}), 404, "site_id")
    refused(operator.put("/api/v1/sites/goals", data=goal | {"goal_type": "evnt"}), 400, "goal_type")
    refused(
        operator.put("/api/v1/sites/goals", data={"site_id": site, "goal_type": "event"}), 400, "event_name"
    )
    refused(operator.put("/api/v1/sites/goals", data={"site_id": site, "event_name": "X"}), 400, "goal_type")
    refused(operator.request("DELETE", "/api/v1/sites/goals/0", data={"site_id": site}), 404, "goal_id")
    refused(operator.post("/api/v1/sites", data={"timezone": "Europe/London"}), 400, "domain")
    refused(operator.post("/api/v1/sites", json={"domain": "not a domain"}), 400, "domain")
    refused(operator.post("/api/v1/sites", data={"domain": site}), 400, "domain")  # taken
    fresh = f"zone-{uuid.uuid4().hex[:6]}.example.com"
    refused(
        operator.post("/api/v1/sites", data={"domain": fresh, "timezone": "Mars/Olympus"}), 400, "timezone"
    )
    assert fresh not in list_sites(connect(dashboard_settings))
    refused(
        operator.put("/api/v1/sites/guests", data={"site_id": site, "email": "a@b.example", "role": "owner"}),
        400,
        "role",
    )
    refused(operator.get("/api/v1/sites", params={"limit": "0"}), 400, "limit")
    refused(operator.get("/api/v1/sites", params={"after": "%%%"}), 400, "after")
    refused(operator.put("/api/v1/sites/goals", data=goal | {"colour": "red"}), 400, "colour")

    # A domain change: Tally keys the archive by the domain, so it refuses and says why.
    moved = operator.put(f"/api/v1/sites/{site}", data={"domain": f"moved-{site}"})
    refused(moved, 400, "domain")
    assert site in list_sites(connect(dashboard_settings))
    for client in (operator, viewer, read_only, other):
        client.close()


def test_a_site_owners_manage_key_provisions_its_own_site(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    owner = httpx.Client(base_url=tenants.server.url, headers=bearer(tenants.owner_a.manage_key), timeout=30)
    fields = {"site_id": tenants.site_a, "goal_type": "page", "page_path": "/pricing/*"}
    made = owner.put("/api/v1/sites/goals", data=fields)
    assert made.status_code == 200, made.text
    assert made.json()["display_name"] == "Visit /pricing/*"
    entries = users.audit(connect(dashboard_settings), [tenants.site_a])
    assert any(e.action == "goal_added" and e.email == tenants.owner_a.email for e in entries)
    owner.close()


def test_a_script_that_picks_a_team_first_finds_the_installation_and_creates_under_it(
    tenants: Tenants,
) -> None:
    operator = PlausibleSitesClient(tenants.server.url, tenants.operator_key)
    [team] = operator.teams()
    assert set(team) == {"id", "name", "api_available"} and team["api_available"] is True
    viewer = PlausibleSitesClient(tenants.server.url, tenants.viewer_a.read_key)
    assert viewer.teams() == [team]  # every key belongs to it; the id does not change
    domain = f"team-{uuid.uuid4().hex[:8]}.example.com"
    created = operator.http.post("/api/v1/sites", data={"domain": domain, "team_id": team["id"]})
    assert created.status_code == 200, created.text
    listed = operator.http.get("/api/v1/sites", params={"team_id": team["id"], "limit": 1000}).json()
    assert domain in [site["domain"] for site in listed["sites"]]
    refused = operator.http.put("/api/v1/sites/teams")
    assert refused.status_code == 405 and refused.headers["Allow"] == "GET, HEAD, OPTIONS"
    for client in (operator, viewer):
        client.close()


def test_site_added_elsewhere_is_listed_with_its_zone(
    dashboard_server: DashboardServer, dashboard_settings: Settings
) -> None:
    domain = f"cli-{uuid.uuid4().hex[:8]}.example.com"
    add_site(connect(dashboard_settings), domain, "Asia/Tokyo")
    plausible = PlausibleSitesClient(dashboard_server.url, dashboard_server.api_key)
    assert {"domain": domain, "timezone": "Asia/Tokyo"} in plausible.all_sites(limit=1000)
    plausible.close()


def test_a_method_a_sites_path_does_not_take_is_405_with_allow(tenants: Tenants) -> None:
    api = httpx.Client(base_url=tenants.server.url, headers=bearer(tenants.operator_key), timeout=30)
    for method, path, allowed in [
        ("GET", "/api/v1/sites/shared-links", "OPTIONS, PUT"),
        ("DELETE", "/api/v1/sites/goals", "GET, HEAD, OPTIONS, PUT"),
        ("POST", f"/api/v1/sites/{tenants.site_a}", "DELETE, GET, HEAD, OPTIONS, PUT"),
        ("PATCH", "/api/v1/sites/goals/abc", "DELETE, OPTIONS"),
        # The API's catch-all GET route makes every path routable with GET: the Allow header
        # is the document's, so it names no GET that would itself be a 405.
        ("PUT", "/api/v1/annotations/abc", "DELETE, OPTIONS"),
        ("DELETE", "/api/v1/sites/custom-props", "GET, HEAD, OPTIONS, PUT"),
        ("PUT", "/api/v1/sites/custom-props/author", "DELETE, OPTIONS"),
    ]:
        answer = api.request(method, path)
        assert answer.status_code == 405, (method, path, answer.text)
        assert "error" in answer.json()
        if allowed is not None:
            assert answer.headers["Allow"] == allowed
    api.close()


def test_the_same_goal_and_link_asked_for_at_once_are_made_once(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    api = httpx.Client(base_url=tenants.server.url, headers=bearer(tenants.operator_key), timeout=60)
    event = f"Together-{uuid.uuid4().hex[:6]}"
    goal = {"site_id": tenants.site_b, "goal_type": "event", "event_name": event}
    link = {"site_id": tenants.site_b, "name": event}
    with ThreadPoolExecutor(max_workers=8) as pool:
        goal_answers = list(pool.map(lambda _: api.put("/api/v1/sites/goals", data=goal), range(8)))
        link_answers = list(pool.map(lambda _: api.put("/api/v1/sites/shared-links", data=link), range(8)))
    assert {answer.status_code for answer in goal_answers + link_answers} == {200}
    assert len({answer.json()["id"] for answer in goal_answers}) == 1
    assert len({answer.json()["url"] for answer in link_answers}) == 1
    client = connect(dashboard_settings)
    assert [g.name for g in goals.list_goals(client, tenants.site_b)].count(event) == 1
    assert [li.label for li in shared_links.list_links(client, tenants.site_b)].count(event) == 1
    api.close()


def test_one_link_when_two_dashboard_processes_find_none_at_once_and_a_revoked_one_stays_revoked(
    tenants: Tenants, dashboard_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two dashboards (each its own lock, as two processes behind a proxy) both read "no link
    # of that name" before either writes: the interleaving forced by a barrier after the read.
    name = f"Twice-{uuid.uuid4().hex[:6]}"
    both_read = threading.Barrier(2, timeout=60)
    read = shared_links.list_links

    def read_then_wait(client: Any, site: str) -> list[shared_links.SharedLink]:
        found = read(client, site)
        both_read.wait()
        return found

    monkeypatch.setattr(shared_links, "list_links", read_then_wait)
    apps = [build_app(dashboard_settings).server.test_client() for _ in range(2)]
    asked = {"site_id": tenants.site_b, "name": name}
    headers = bearer(tenants.operator_key)
    with ThreadPoolExecutor(max_workers=2) as pool:
        answers = list(
            pool.map(lambda app: app.put("/api/v1/sites/shared-links", data=asked, headers=headers), apps)
        )
    monkeypatch.setattr(shared_links, "list_links", read)
    assert [answer.status_code for answer in answers] == [200, 200]
    assert answers[0].json["url"] == answers[1].json["url"]
    client = connect(dashboard_settings)
    [made] = [link for link in shared_links.list_links(client, tenants.site_b) if link.label == name]

    # Revoked, then asked for again: a new link with a new URL; the old one stays revoked.
    shared_links.revoke_link(client, tenants.site_b, made.id)
    again = apps[0].put("/api/v1/sites/shared-links", data=asked, headers=headers)
    assert again.status_code == 200 and again.json["url"] != answers[0].json["url"]
    named = [link for link in shared_links.list_links(client, tenants.site_b) if link.label == name]
    assert sorted(link.revoked for link in named) == [False, True]
    assert next(link for link in named if link.id == made.id).revoked


# -- custom properties (the dashboard's Properties report's allow-list) -------------------------


def test_custom_properties_are_added_once_listed_and_deleted(
    dashboard_server: DashboardServer, dashboard_settings: Settings
) -> None:
    domain = f"props-{uuid.uuid4().hex[:8]}.example.com"
    plausible = PlausibleSitesClient(dashboard_server.url, dashboard_server.api_key)
    plausible.create_site(domain, "UTC")
    assert plausible.custom_props(domain) == []
    assert plausible.add_custom_prop(domain, "author") == {"created": True}
    assert plausible.add_custom_prop(domain, "author") == {"created": True}  # idempotent
    as_json = plausible.http.put(
        "/api/v1/sites/custom-props", json={"site_id": domain, "property": "logged_in"}
    )
    assert as_json.json() == {"created": True}
    # Any printable name, as sent: a slash and non-ASCII letters too (the path's one segment, encoded).
    assert plausible.add_custom_prop(domain, "section/ünïcode") == {"created": True}
    assert plausible.custom_props(domain) == ["author", "logged_in", "section/ünïcode"]
    assert plausible.http.get(f"/api/v1/sites/{domain}").json()["custom_properties"] == [
        "author", "logged_in", "section/ünïcode",
    ]  # fmt: skip

    assert plausible.delete_custom_prop(domain, "author") == {"deleted": True}
    assert plausible.delete_custom_prop(domain, "section/ünïcode") == {"deleted": True}
    assert plausible.delete_custom_prop(domain, "never-listed") == {"deleted": True}  # as Plausible
    assert plausible.custom_props(domain) == ["logged_in"]
    # The site_id in the query works too, as for goals.
    by_query = plausible.http.delete("/api/v1/sites/custom-props/logged_in", params={"site_id": domain})
    assert by_query.json() == {"deleted": True}
    assert plausible.custom_props(domain) == []

    # One audit row per change, none for the repeated PUT or the name never listed.
    actions = [
        (entry.action, entry.detail)
        for entry in users.audit(connect(dashboard_settings), [domain])
        if entry.action.startswith("custom_property")
    ]
    assert sorted(actions) == sorted(
        [
            ("custom_property_added", f"{domain} author"),
            ("custom_property_added", f"{domain} logged_in"),
            ("custom_property_added", f"{domain} section/ünïcode"),
            ("custom_property_removed", f"{domain} author"),
            ("custom_property_removed", f"{domain} section/ünïcode"),
            ("custom_property_removed", f"{domain} logged_in"),
        ]
    )
    plausible.close()


def test_custom_properties_refusals_name_their_field(tenants: Tenants, dashboard_settings: Settings) -> None:
    url, site = tenants.server.url, tenants.site_a
    fields = {"site_id": site, "property": "plan"}
    delete_path = "/api/v1/sites/custom-props/plan"
    operator = httpx.Client(base_url=url, headers=bearer(tenants.operator_key), timeout=30)

    # A viewer's key, even with scope manage, reads the list and changes nothing.
    viewer = httpx.Client(base_url=url, headers=bearer(tenants.viewer_a.manage_key), timeout=30)
    assert viewer.get("/api/v1/sites/custom-props", params={"site_id": site}).status_code == 200
    refused(viewer.put("/api/v1/sites/custom-props", data=fields), 403, "site_id")
    refused(viewer.request("DELETE", delete_path, data={"site_id": site}), 403, "site_id")
    # The owner's read-only key neither.
    read_only = httpx.Client(base_url=url, headers=bearer(tenants.owner_a.read_key), timeout=30)
    answer = read_only.put("/api/v1/sites/custom-props", data=fields)
    assert answer.status_code == 403 and "read-only" in answer.json()["error"]
    # Another site's admin: neither reads nor changes site A's list.
    other = httpx.Client(base_url=url, headers=bearer(tenants.admin_b.manage_key), timeout=30)
    refused(other.get("/api/v1/sites/custom-props", params={"site_id": site}), 403, "site_id")
    refused(other.put("/api/v1/sites/custom-props", data=fields), 403, "site_id")
    refused(other.request("DELETE", delete_path, data={"site_id": site}), 403, "site_id")
    assert custom_properties.list_properties(connect(dashboard_settings), site) == []
    # The owner's manage key may (an admin's role or above).
    owner = httpx.Client(base_url=url, headers=bearer(tenants.owner_a.manage_key), timeout=30)
    assert owner.put("/api/v1/sites/custom-props", data=fields).json() == {"created": True}
    assert owner.request("DELETE", delete_path, data={"site_id": site}).json() == {"deleted": True}

    # Unknown or missing site; missing, empty, too long or control-character names.
    unknown = "never-registered.example.com"
    refused(operator.get("/api/v1/sites/custom-props", params={"site_id": unknown}), 404, "site_id")
    refused(operator.put("/api/v1/sites/custom-props", data=fields | {"site_id": unknown}), 404, "site_id")
    refused(operator.request("DELETE", delete_path, data={"site_id": unknown}), 404, "site_id")
    refused(operator.get("/api/v1/sites/custom-props"), 400, "site_id")
    refused(operator.put("/api/v1/sites/custom-props", data={"site_id": site}), 400, "property")
    for bad in ["", "   ", "x" * 301, "tab\there", "line\nbreak", "nul\x00"]:
        refused(
            operator.put("/api/v1/sites/custom-props", json={"site_id": site, "property": bad}),
            400,
            "property",
        )
    refused(
        operator.put("/api/v1/sites/custom-props", json={"site_id": site, "property": 7}), 400, "property"
    )
    # In the path, percent-encoded: a control character, a newline (its own line or the end).
    for bad in ["a%01b", "a%0Ab", "%0A", "a%2F%0A"]:
        deleted = operator.request("DELETE", f"/api/v1/sites/custom-props/{bad}", data={"site_id": site})
        refused(deleted, 400, "property")
    refused(operator.put("/api/v1/sites/custom-props", data=fields | {"colour": "red"}), 400, "colour")
    assert (
        operator.put("/api/v1/sites/custom-props", json={"site_id": site, "property": "x" * 300}).status_code
        == 200
    )
    operator.request("DELETE", f"/api/v1/sites/custom-props/{'x' * 300}", data={"site_id": site})
    assert custom_properties.list_properties(connect(dashboard_settings), site) == []
    for client in (operator, viewer, read_only, other, owner):
        client.close()


def property_choices(browser: httpx.Client, origin: str, site: str, day: date) -> list[str]:
    """The Properties report's picker, as the Overview asks for it (its callback, signed in)."""
    days = period("custom", datetime.now(UTC), day, day + timedelta(days=1)).to_store()
    request = {
        "output": "..property-key.options...property-key.value..",
        "outputs": [
            {"id": "property-key", "property": "options"},
            {"id": "property-key", "property": "value"},
        ],
        "inputs": [
            {"id": "site", "property": "value", "value": site},
            {"id": "period", "property": "data", "value": days},
            {"id": "filters", "property": "data", "value": {}},
            {"id": "custom-props-version", "property": "data", "value": 0},
        ],
        "state": [{"id": "property-key", "property": "value", "value": None}],
        "changedPropIds": [],
    }
    answer = browser.post("/_dash-update-component", json=request, headers={"Origin": origin})
    assert answer.status_code == 200, answer.text[:500]
    return answer.json()["response"]["property-key"]["options"]


def test_with_custom_properties_set_the_dashboard_offers_exactly_those(
    dashboard_server: DashboardServer, dashboard_settings: Settings
) -> None:
    domain = f"picker-{uuid.uuid4().hex[:8]}.example.com"
    day = date(2026, 11, 20)
    t0 = datetime(2026, 11, 20, 10, tzinfo=UTC)
    # author on three events, logged_in on two, plan on one: the picker lists the most used first.
    sent = [
        {"author": "ann", "logged_in": "yes", "plan": "pro"},
        {"author": "bob", "logged_in": "no"},
        {"author": "ann"},
    ]
    events = [
        page_view(domain, f"v{i}", t0 + timedelta(minutes=i), "/post", name="Read", props=props)
        for i, props in enumerate(sent)
    ]
    plausible = PlausibleSitesClient(dashboard_server.url, dashboard_server.api_key)
    plausible.create_site(domain, "UTC")
    rows, columns = archive_rows(events)
    connect(dashboard_settings).insert("events", rows, column_names=columns)
    browser = signed_in(dashboard_server)

    # No list: every property the events carry.
    assert property_choices(browser, dashboard_server.url, domain, day) == ["author", "logged_in", "plan"]
    # A list: exactly its names.
    for name in ("plan", "logged_in"):
        plausible.add_custom_prop(domain, name)
    assert property_choices(browser, dashboard_server.url, domain, day) == ["logged_in", "plan"]
    # A listed name no event of the period carries has no values to show: not offered.
    plausible.add_custom_prop(domain, "tier")
    assert property_choices(browser, dashboard_server.url, domain, day) == ["logged_in", "plan"]
    # The stats API still answers a property the list leaves out, as Plausible's does.
    query = {
        "site_id": domain,
        "metrics": ["visitors"],
        "date_range": ["2026-11-20", "2026-11-20"],
        "dimensions": ["event:props:author"],
    }
    answer = plausible.http.post("/api/v2/query", json=query)
    assert answer.status_code == 200, answer.text[:300]
    assert {tuple(row["dimensions"]) for row in answer.json()["results"]} >= {("ann",), ("bob",)}
    # The list emptied: every property again.
    for name in ("plan", "logged_in", "tier"):
        plausible.delete_custom_prop(domain, name)
    assert property_choices(browser, dashboard_server.url, domain, day) == ["author", "logged_in", "plan"]
    browser.close()
    plausible.close()
