"""Team accounts in a real browser (Debian's Chromium) against the real dashboard server and the
real ClickHouse engine: the operator invites a viewer from the Team section of Settings; the
invitee opens the link, sets a password, signs in with email and password and sees only their
site, no Settings tab and no settings panel; a goal change written by hand is refused by the
server (403); the owner sees the sign-in in the audit log.

Screenshots (desktop 1280, phone 390) go to docs/screenshots/team-*.png (`make screenshots`).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import APIResponse, Browser, BrowserContext, Page, expect

from storage import exclusions, goals, users
from storage.client import connect
from storage.sites import add_site, set_timezone, site_timezone
from tally.settings import Settings
from tests.browser.screenshots import SCREENSHOTS
from tests.browser.test_dashboard import DESKTOP, PHONE, archive, open_site, pick_site, traffic
from tests.fixtures.browser import SIGN_IN_TIMEOUT_MS, TIMEOUT_MS, expect_no_settings, open_settings
from tests.fixtures.callbacks import goal_add_request
from tests.fixtures.dashboard_server import DashboardServer

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

TEAM_SITE = "team-site.example.com"
OTHER_SITE = "not-the-teams.example.com"
CALLBACK = "/_dash-update-component"
PASSWORD = "a long viewer password"


@pytest.fixture(scope="module")
def dashboard(dashboard_server: DashboardServer, dashboard_settings: Settings) -> DashboardServer:
    now = datetime.now(UTC) - timedelta(seconds=5)
    archive(dashboard_settings, traffic(OTHER_SITE, now, visitors=30, seed=11))
    archive(dashboard_settings, traffic(TEAM_SITE, now, visitors=20, seed=12))
    client = connect(dashboard_settings)
    add_site(client, TEAM_SITE)
    add_site(client, OTHER_SITE)
    return dashboard_server


async def new_context(browser: Browser) -> BrowserContext:
    context = await browser.new_context(viewport=DESKTOP, locale="en-GB")
    context.set_default_timeout(TIMEOUT_MS)
    return context


@pytest_asyncio.fixture(loop_scope="session")
async def owner(browser: Browser, dashboard: DashboardServer) -> AsyncIterator[Page]:
    """The operator, signed in with the operator's password: the first owner of every site."""
    context = await new_context(browser)
    try:
        page = await context.new_page()
        await open_site(page, dashboard, TEAM_SITE)
        yield page
    finally:
        await context.close()


@pytest_asyncio.fixture(loop_scope="session")
async def invitee(browser: Browser) -> AsyncIterator[Page]:
    context = await new_context(browser)
    try:
        yield await context.new_page()
    finally:
        await context.close()


async def invite_from_the_team_panel(owner: Page, email: str) -> str:
    # The operator's key is TALLY_API_KEY: their keys' panel says so and offers no form for keys.
    await expect(owner.locator("#team-keys")).to_contain_text("the operator's key is TALLY_API_KEY")
    await expect(owner.locator("#key-create")).to_have_count(0)
    await open_settings(owner)
    await owner.locator("#team-panel").scroll_into_view_if_needed()
    await owner.fill("#invite-email", email)
    await owner.click("#invite-create")
    link = owner.locator("#invite-link")
    await expect(link).to_contain_text("/invite/")
    return (await link.text_content() or "").strip()


async def test_invited_viewer_sees_only_their_site_and_cannot_change_it(
    dashboard: DashboardServer, dashboard_settings: Settings, owner: Page, invitee: Page
) -> None:
    email = f"viewer-{uuid.uuid4().hex[:6]}@example.com"
    link = await invite_from_the_team_panel(owner, email)

    # The invitee sets a password on the invitation page and lands on the dashboard.
    await invitee.goto(link)
    await expect(invitee.locator("h1")).to_have_text(f"Join {TEAM_SITE}")
    await invitee.fill("#password", PASSWORD)
    await invitee.fill("#confirm", PASSWORD)
    await invitee.click("button[type=submit]")
    await expect(invitee.locator("#site")).to_contain_text(TEAM_SITE, timeout=SIGN_IN_TIMEOUT_MS)

    # Signed out, they sign in again with email and password.
    await invitee.click("#logout")
    await expect(invitee).to_have_url(re.compile(r"/login"))
    await invitee.fill("#email", email)
    await invitee.fill("#password", PASSWORD)
    await invitee.click("button[type=submit]")
    await expect(invitee.locator("#site")).to_contain_text(TEAM_SITE, timeout=SIGN_IN_TIMEOUT_MS)

    # The site list callback, written by hand, names their site only, though the archive holds
    # others; asked with another site as the current one, it is refused.
    async def site_list(current: str) -> APIResponse:
        return await invitee.request.post(
            dashboard.url + CALLBACK,
            data={
                "output": "..site.options...site.value..",
                "outputs": [{"id": "site", "property": "options"}, {"id": "site", "property": "value"}],
                "inputs": [{"id": "clock", "property": "n_intervals", "value": 1}],
                "state": [{"id": "site", "property": "value", "value": current}],
            },
        )

    own = await site_list(TEAM_SITE)
    # (its own site stays shown: the answer names no value, dashboard/overview.py site_options)
    assert (await own.json())["response"]["site"] == {"options": [TEAM_SITE]}
    assert (await site_list(OTHER_SITE)).status == 403
    await expect(invitee.locator("#metric-pageviews")).not_to_have_attribute("data-value", "0")

    # A viewer's page has no Settings tab and no settings panel (goals are edited there); the
    # goal callback, written by hand, is refused (403), also for another site, and adds nothing.
    await expect_no_settings(invitee)
    body = goal_add_request(TEAM_SITE, "Signup")
    by_hand = await invitee.request.post(dashboard.url + CALLBACK, data=body)
    assert by_hand.status == 403 and "viewer" in await by_hand.text()
    other = await invitee.request.post(dashboard.url + CALLBACK, data=goal_add_request(OTHER_SITE, "Signup"))
    assert other.status == 403
    assert goals.list_goals(connect(dashboard_settings), TEAM_SITE) == []

    await expect(invitee.locator("#exclusions-panel")).to_have_count(0)  # a setting: not for viewers
    await expect(invitee.locator("#timezone-panel")).to_have_count(0)
    await expect(invitee.locator("#funnel-saving")).to_have_count(0)  # saving funnels: admins' too
    await expect(invitee.locator("#funnel-saved")).to_have_count(1)  # picking a saved funnel: theirs too

    # Their own API keys, below the views (not a setting): a key made there reads their site on
    # the stats API; the site's members and audit log are not in their page.
    await expect(invitee.locator("#team-owner")).to_have_count(0)
    await invitee.locator("#account-panel").scroll_into_view_if_needed()
    await invitee.click("#key-create")
    token = (await invitee.locator("#key-token").text_content() or "").strip()
    assert token.startswith("tk_")
    for site, status in ((TEAM_SITE, 200), (OTHER_SITE, 403)):
        answer = httpx.get(
            f"{dashboard.url}/api/v1/stats/aggregate",
            params={"site": site, "from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert answer.status_code == status
    # A manage key: listed with its scope; it still changes only what a viewer may (nothing).
    await invitee.check("#key-manage input")
    await invitee.click("#key-create")
    await expect(invitee.locator("#key-created")).to_contain_text("scope manage")
    managing = (await invitee.locator("#key-token").text_content() or "").strip()
    await expect(invitee.locator("#team-keys")).to_contain_text("manage")
    excluded = httpx.post(
        f"{dashboard.url}/api/v1/exclusions",
        params={"site": TEAM_SITE},
        json={"kind": "country", "value": "NZ"},
        headers={"Authorization": f"Bearer {managing}"},
        timeout=30,
    )
    assert excluded.status_code == 403 and "admin" in excluded.json()["error"]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await invitee.wait_for_timeout(600)  # let charts finish their transition
    await invitee.screenshot(path=str(SCREENSHOTS / "team-viewer-desktop.png"), full_page=True)
    await invitee.set_viewport_size(PHONE)
    await invitee.wait_for_timeout(600)
    await invitee.screenshot(path=str(SCREENSHOTS / "team-viewer-phone.png"), full_page=True)

    # The owner sees the member and their sign-ins in the audit log.
    await owner.reload()
    await pick_site(owner, TEAM_SITE)
    await open_settings(owner)
    members = owner.locator("#team-members")
    await expect(members).to_contain_text(f"{email} · viewer")
    audit = owner.locator("#audit-table")
    await expect(audit).to_contain_text(email)
    await expect(audit.locator("tr", has_text=email).filter(has_text="sign_in")).not_to_have_count(0)
    panel = owner.locator("#team-panel")
    await panel.scroll_into_view_if_needed()
    await panel.screenshot(path=str(SCREENSHOTS / "team-panel-desktop.png"))
    await owner.set_viewport_size(PHONE)
    await panel.scroll_into_view_if_needed()
    await panel.screenshot(path=str(SCREENSHOTS / "team-panel-phone.png"))
    await owner.set_viewport_size(DESKTOP)

    # The owner removes the viewer: the viewer's open page is signed out on its next request.
    await owner.locator(f'#team-members li[data-email="{email}"] button', has_text="Remove").click()
    await expect(owner.locator("#member-status")).to_have_text(f"Removed {email} from {TEAM_SITE}.")
    await expect(members).not_to_contain_text(email)
    after = await invitee.request.post(dashboard.url + CALLBACK, data=body)
    assert after.status == 401


async def test_owner_excludes_and_includes_a_path_in_the_exclusions_panel(
    dashboard: DashboardServer, dashboard_settings: Settings, owner: Page
) -> None:
    await open_settings(owner)
    panel = owner.locator("#exclusions-panel")
    await panel.scroll_into_view_if_needed()
    await owner.click("#exclusion-kind")
    await owner.get_by_role("option", name="Path", exact=True).click()
    await owner.fill("#exclusion-value", "admin")
    await owner.click("#exclusion-add")
    await expect(owner.locator("#exclusion-status")).to_contain_text("a page pattern starts with /")
    await owner.fill("#exclusion-value", "/admin/*")
    await owner.click("#exclusion-add")
    await expect(owner.locator("#exclusion-status")).to_have_text("Excluded /admin/*.")
    await expect(owner.locator("#exclusions-items")).to_contain_text("Path: /admin/*")
    listed = exclusions.list_exclusions(connect(dashboard_settings), TEAM_SITE)
    assert [(e.kind, e.value) for e in listed] == [("path", "/admin/*")]
    await panel.screenshot(path=str(SCREENSHOTS / "exclusions-panel-desktop.png"))
    await owner.set_viewport_size(PHONE)
    await panel.scroll_into_view_if_needed()
    await panel.screenshot(path=str(SCREENSHOTS / "exclusions-panel-phone.png"))

    await owner.locator("#exclusions-items button", has_text="Remove").click()
    await expect(owner.locator("#exclusion-status")).to_have_text("Counting /admin/* again.")
    assert exclusions.list_exclusions(connect(dashboard_settings), TEAM_SITE) == []


async def test_owner_changes_a_members_role_in_the_team_panel(
    dashboard: DashboardServer, dashboard_settings: Settings, owner: Page
) -> None:
    """The operator makes a viewer an admin from the Team panel: the store holds the new role,
    the member's manage key may now change the site's exclusions over the API, and the change
    is in the audit log."""
    client = connect(dashboard_settings)
    email = f"promoted-{uuid.uuid4().hex[:6]}@example.com"
    token = users.create_invite(client, email, TEAM_SITE, "viewer")
    invite = users.find_invite(client, token)
    assert invite is not None
    users.accept_invite(client, token, invite, PASSWORD)
    _key, secret = users.create_key(client, email, [TEAM_SITE], scope="manage")

    def exclude_over_the_api() -> int:
        return httpx.post(
            f"{dashboard.url}/api/v1/exclusions",
            params={"site": TEAM_SITE},
            json={"kind": "country", "value": "NZ"},
            headers={"Authorization": f"Bearer {secret}"},
            timeout=30,
        ).status_code

    assert exclude_over_the_api() == 403  # a viewer's key changes nothing

    await owner.set_viewport_size(DESKTOP)
    await owner.reload()
    await pick_site(owner, TEAM_SITE)
    await open_settings(owner)
    row = owner.locator(f'#team-members li[data-email="{email}"]')
    await row.scroll_into_view_if_needed()
    await expect(row).to_have_attribute("data-role", "viewer")
    await row.locator(".member-role").click()
    await owner.get_by_role("option", name="admin", exact=True).click()
    await expect(owner.locator("#member-status")).to_have_text(f"{email} is now admin of {TEAM_SITE}.")
    await expect(row).to_have_attribute("data-role", "admin")

    user = users.get_user(connect(dashboard_settings), email)
    assert user is not None and user.role_on(TEAM_SITE) == "admin"
    assert exclude_over_the_api() == 201
    audit = owner.locator("#audit-table")
    await expect(audit.locator("tr", has_text="role_changed")).not_to_have_count(0)
    panel = owner.locator("#team-panel")
    await panel.screenshot(path=str(SCREENSHOTS / "team-role-change-desktop.png"))
    await owner.set_viewport_size(PHONE)
    await panel.scroll_into_view_if_needed()
    await panel.screenshot(path=str(SCREENSHOTS / "team-role-change-phone.png"))
    await owner.set_viewport_size(DESKTOP)
    exclusions.remove_exclusions(client, [exclusions.Exclusion(TEAM_SITE, "country", "NZ")])


async def test_owner_sets_the_sites_time_zone_in_its_panel(
    dashboard: DashboardServer, dashboard_settings: Settings, owner: Page
) -> None:
    await owner.set_viewport_size(DESKTOP)
    await owner.reload()
    await pick_site(owner, TEAM_SITE)
    await open_settings(owner)
    panel = owner.locator("#timezone-panel")
    await panel.scroll_into_view_if_needed()
    await expect(owner.locator("#timezone-name")).to_have_value("UTC")
    await owner.fill("#timezone-name", "Mars/Olympus")
    await owner.click("#timezone-save")
    await expect(owner.locator("#timezone-status")).to_contain_text("is not an IANA time zone")
    assert site_timezone(connect(dashboard_settings), TEAM_SITE) == "UTC"

    await owner.fill("#timezone-name", "Asia/Kolkata")
    await owner.click("#timezone-save")
    await expect(owner.locator("#timezone-status")).to_have_text(
        f"Days of {TEAM_SITE} now start at midnight Asia/Kolkata."
    )
    assert site_timezone(connect(dashboard_settings), TEAM_SITE) == "Asia/Kolkata"
    # The API reads the same zone.
    answer = httpx.get(
        f"{dashboard.url}/api/v1/timezone",
        params={"site": TEAM_SITE},
        headers={"Authorization": f"Bearer {dashboard.api_key}"},
        timeout=30,
    )
    assert answer.json() == {"site": TEAM_SITE, "timezone": "Asia/Kolkata"}
    await panel.screenshot(path=str(SCREENSHOTS / "timezone-panel-desktop.png"))
    await owner.set_viewport_size(PHONE)
    await panel.scroll_into_view_if_needed()
    await panel.screenshot(path=str(SCREENSHOTS / "timezone-panel-phone.png"))
    await owner.set_viewport_size(DESKTOP)
    set_timezone(connect(dashboard_settings), TEAM_SITE, "UTC")
