"""Issue 29, finding 10a: nothing bounded how many settings one tenant keeps.

Goals, saved funnels, segments, shared links, alert rules, report subscriptions, invitations and
API keys had no cap, so one site's owner could grow the lists every tenant's pages, queries and
alert loops read. Each kind now has a cap (storage/site_caps.py); each test fills a fresh site
to its cap through the store, then asks for one more through a door a tenant uses — the real
server's API (a 400 naming the field), the dashboard's callback (a notice) or the CLI (one line) —
and finds it refused with nothing written.
"""

from __future__ import annotations

import os
import uuid

import httpx
import pytest

from storage import (
    alert_rules,
    goals,
    report_subscriptions,
    saved_funnels,
    segments,
    shared_links,
    site_caps,
    users,
)
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.callbacks import goal_add_request
from tests.fixtures.cli import run_tally
from tests.security.conftest import Tenants, bearer, signed_in

pytestmark = pytest.mark.integration


def fresh_site(settings: Settings) -> str:
    site = f"caps-{uuid.uuid4().hex[:8]}.example.com"
    add_site(connect(settings), site)
    return site


def refused_field(answer: httpx.Response, field: str, cap: site_caps.Cap) -> None:
    assert answer.status_code == 400, answer.text[:300]
    error = answer.json()["error"]
    assert error.startswith(f"{field}: ") and f"at most {cap.limit} {cap.things}" in error, error


def tally(settings: Settings, *args: str) -> tuple[int, str]:
    done = run_tally(os.environ | settings.environment(), *args)
    return done.returncode, done.stderr


def api(tenants: Tenants, method: str, path: str, key: str, **kwargs: object) -> httpx.Response:
    return httpx.request(method, f"{tenants.server.url}{path}", headers=bearer(key), timeout=30, **kwargs)


def test_an_owner_cannot_add_goals_past_the_cap_from_the_dashboard_or_the_cli(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    site, client = fresh_site(dashboard_settings), connect(dashboard_settings)
    goals.apply_goals(
        client, site, [goals.make_goal(site, f"Event{n}") for n in range(site_caps.GOALS.limit)], []
    )
    add_goal = goal_add_request(site, "OneTooMany")
    operator = signed_in(tenants.server)
    try:
        # The session cookie is Secure (TALLY_DASHBOARD_COOKIE_SECURE defaults on), which httpx
        # keeps but does not send over the fixture's plain http: send it as a browser behind TLS would.
        cookie = f"tally_session={operator.cookies['tally_session']}"
        headers = {"Origin": tenants.server.url, "Cookie": cookie}
        answer = operator.post("/_dash-update-component", json=add_goal, headers=headers)
    finally:
        operator.close()
    assert answer.status_code == 200, answer.text[:300]
    assert "site: at most 100 goals per site" in answer.text

    code, stderr = tally(dashboard_settings, "goals", "add", site, "AlsoTooMany")
    assert code != 0 and stderr.strip() == "tally: site: at most 100 goals per site"
    assert len(goals.list_goals(client, site)) == site_caps.GOALS.limit


def test_funnels_links_and_alert_rules_stop_at_their_caps_in_the_cli(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    site, client = fresh_site(dashboard_settings), connect(dashboard_settings)
    steps = [saved_funnels.parse_step("/a"), saved_funnels.parse_step("/b")]
    for n in range(site_caps.FUNNELS.limit):
        saved_funnels.add_funnel(client, site, f"funnel {n}", steps)
    for n in range(site_caps.SHARED_LINKS.limit):
        shared_links.create_link(client, site, label=f"link {n}")
    for n in range(site_caps.ALERT_RULES.limit):
        rule = alert_rules.make_rule(
            site=site, kind="pageviews_above", threshold=5, webhook_url=f"https://hooks.example.com/{n}"
        )
        alert_rules.add_rule(client, rule)

    for args, line in [
        (["funnels", "add", site, "one too many", "/a", "/b"], "site: at most 50 saved funnels per site"),
        (["share", "create", site], "site: at most 50 shared links per site"),
        (
            [
                "alerts",
                "add",
                site,
                "pageviews_above",
                "--above",
                "5",
                "--webhook",
                "https://hooks.example.com/x",
            ],
            "site: at most 50 alert rules per site",
        ),
    ]:
        code, stderr = tally(dashboard_settings, *args)
        assert code != 0 and stderr.strip() == f"tally: {line}", (args, stderr)
    assert len(saved_funnels.list_funnels(client, site)) == site_caps.FUNNELS.limit
    assert len(shared_links.list_links(client, site)) == site_caps.SHARED_LINKS.limit
    assert len(alert_rules.list_rules(client, site)) == site_caps.ALERT_RULES.limit


def test_a_revoked_link_frees_its_place(tenants: Tenants, dashboard_settings: Settings) -> None:
    site, client = fresh_site(dashboard_settings), connect(dashboard_settings)
    created = [shared_links.create_link(client, site) for _ in range(site_caps.SHARED_LINKS.limit)]
    with pytest.raises(shared_links.SharedLinkError, match="site: at most 50 shared links"):
        shared_links.create_link(client, site)
    shared_links.revoke_link(client, site, created[0].link.id)
    shared_links.create_link(client, site)  # the revoked one no longer counts


def test_segments_subscriptions_and_invitations_stop_at_their_caps_in_the_api(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    site, client = fresh_site(dashboard_settings), connect(dashboard_settings)
    for n in range(site_caps.SEGMENTS.limit):
        segments.add_segment(client, site, f"segment {n}", [["is", "visit:country", ["DE"]]])
    for n in range(site_caps.REPORT_SUBSCRIPTIONS.limit):
        report_subscriptions.subscribe(client, site, f"reader{n}@example.com", "weekly")
    for n in range(site_caps.PENDING_INVITES.limit):
        users.create_invite(client, f"invitee{n}@example.com", site, "viewer")
    key = tenants.operator_key

    segment = {"name": "one too many", "filters": [["is", "visit:country", ["FR"]]]}
    refused_field(
        api(tenants, "POST", f"/api/v1/segments?site={site}", key, json=segment), "site", site_caps.SEGMENTS
    )
    subscriber = {"email": "late@example.com", "frequency": "weekly"}
    refused_field(
        api(tenants, "POST", f"/api/v1/reports?site={site}", key, json=subscriber),
        "site",
        site_caps.REPORT_SUBSCRIPTIONS,
    )
    invitee = {"email": "late@example.com", "role": "viewer"}
    refused_field(
        api(tenants, "POST", f"/api/v1/invites?site={site}", key, json=invitee),
        "site",
        site_caps.PENDING_INVITES,
    )
    assert len(segments.list_segments(client, site)) == site_caps.SEGMENTS.limit
    assert len(report_subscriptions.list_subscriptions(client, site)) == site_caps.REPORT_SUBSCRIPTIONS.limit
    # Subscribing an address again takes no new place, so it still works at the cap.
    again = {"email": "reader0@example.com", "frequency": "weekly"}
    assert api(tenants, "POST", f"/api/v1/reports?site={site}", key, json=again).status_code == 200


def test_a_member_cannot_hold_more_api_keys_than_the_cap(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    client, owner = connect(dashboard_settings), tenants.owner_a
    held = [key for key in users.list_keys(client, owner.email) if not key.revoked]
    for _ in range(site_caps.API_KEYS.limit - len(held)):
        users.create_key(client, owner.email, [owner.site])

    answer = api(tenants, "POST", "/api/v1/keys", owner.manage_key, json={"sites": [owner.site]})
    refused_field(answer, "email", site_caps.API_KEYS)
    live = [key for key in users.list_keys(client, owner.email) if not key.revoked]
    assert len(live) == site_caps.API_KEYS.limit
