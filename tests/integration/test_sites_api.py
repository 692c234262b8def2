"""Plausible's Sites API on Tally (issue 37; dashboard/http_api/sites_api.py), over HTTP to the
real dashboard server (`python -m dashboard.app` under waitress) and the real ClickHouse engine.

The provisioning client below is written from Plausible's documentation
(https://plausible.io/docs/sites-api: paths, form fields as its `curl -F` examples send them,
answers, cursor pagination), with plain httpx and no knowledge of Tally's code: what an agency's
script would do. The refusals are asked by the tenants of the adversarial suite (a viewer's
keys, an owner's read-only key, another site's admin)."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from storage import goals, shared_links, users
from storage.client import connect
from storage.sites import add_site, list_sites, site_timezone
from tally.settings import Settings
from tests.fixtures.dashboard_server import DashboardServer
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

    def goals(self, site_id: str) -> list[dict]:
        return self.http.get("/api/v1/sites/goals", params={"site_id": site_id}).json()["goals"]

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

    assert plausible.http.delete(f"/api/v1/sites/{domain}").json() == {"deleted": True}
    client = connect(dashboard_settings)
    assert domain not in list_sites(client)
    assert goals.list_goals(client, domain) == []
    assert all(link.revoked for link in shared_links.list_links(client, domain))
    assert httpx.get(url, timeout=30).status_code != 200
    gone = plausible.http.get(f"/api/v1/sites/{domain}")
    assert gone.status_code == 404 and gone.json()["error"].startswith("site_id:")
    audit = users.audit(client, [domain])
    assert any(entry.action == "site_removed" for entry in audit)
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
