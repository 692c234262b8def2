"""The Settings view (dashboard/settings_view.py) in a real browser (Debian's Chromium) against
the real dashboard server and the real ClickHouse engine: the site's settings panels are in the
Settings tab, one section per kind, and not on the Overview, which shows reports only; a viewer
gets no Settings tab and none of the settings panels in the page; a member who is admin of one
site and viewer of another gets the Settings tab for the first only; the operator gets every
panel, the Definitions (what-if) panel included, and keeps rate limiting (a report) on the
Overview. Screenshots (desktop, phone) go to test-artifacts/screenshots/settings-*.png.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Locator, Page, expect

from storage.client import connect
from storage.sites import add_site
from storage.users import set_password, set_role
from tally.settings import Settings
from tests.browser.test_dashboard import DESKTOP, PHONE, SCREENSHOTS, archive, open_site, pick_site, traffic
from tests.browser.test_dashboard_team import PASSWORD  # the members' password, as the segments test
from tests.fixtures.browser import (
    SIGN_IN_TIMEOUT_MS,
    TIMEOUT_MS,
    expect_no_settings,
    open_overview,
    open_settings,
    settings_panel_ids,
)
from tests.fixtures.dashboard_server import DashboardServer

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

SITE_A = "settings-a.example.com"
SITE_B = "settings-b.example.com"
VIEWER = "settings-viewer@example.com"
ADMIN_OF_A = "settings-admin-a@example.com"  # and viewer of B
OPERATORS_ONLY = {"whatif-panel"}  # Definitions change every site's numbers


@pytest.fixture(scope="module")
def dashboard(dashboard_server: DashboardServer, dashboard_settings: Settings) -> DashboardServer:
    now = datetime.now(UTC) - timedelta(seconds=5)
    # B the busier: the admin of A's page opens on B (the busiest of their sites).
    archive(dashboard_settings, traffic(SITE_A, now, visitors=8, seed=31))
    archive(dashboard_settings, traffic(SITE_B, now, visitors=12, seed=32))
    client = connect(dashboard_settings)
    add_site(client, SITE_A)
    add_site(client, SITE_B)
    for email in (VIEWER, ADMIN_OF_A):
        set_password(client, email, PASSWORD)
    set_role(client, VIEWER, SITE_A, "viewer")
    set_role(client, ADMIN_OF_A, SITE_A, "admin")
    set_role(client, ADMIN_OF_A, SITE_B, "viewer")
    return dashboard_server


@pytest_asyncio.fixture(loop_scope="session")
async def page(browser: Browser) -> AsyncIterator[Page]:
    """Desktop-sized, with the dashboard's patience (the machine is shared)."""
    context = await browser.new_context(viewport=DESKTOP, locale="en-GB")
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield await context.new_page()
    finally:
        await context.close()


async def sign_in_as(page: Page, server: DashboardServer, email: str) -> None:
    await page.goto(server.url + "/login")
    await page.fill("#email", email)
    await page.fill("#password", PASSWORD)
    await page.click("button[type=submit]")
    await expect(page.locator("#site")).to_be_visible(timeout=SIGN_IN_TIMEOUT_MS)


def settings_tab(page: Page) -> Locator:
    return page.locator("#tabs").get_by_text("Settings", exact=True)


async def expect_overview_reports_only(page: Page) -> None:
    """The Overview holds none of the settings panels (the Goals report, not its editing)."""
    overview = page.locator("#overview-section")
    await expect(overview.locator("#goals-panel")).to_have_count(1)
    for panel_id in settings_panel_ids():
        await expect(overview.locator(f"#{panel_id}")).to_have_count(0)


async def test_a_viewer_sees_no_settings_tab_and_no_settings_panel(
    dashboard: DashboardServer, page: Page
) -> None:
    await sign_in_as(page, dashboard, VIEWER)
    await expect(page.locator("#site")).to_contain_text(SITE_A)
    await expect_no_settings(page)
    await expect_overview_reports_only(page)
    # Their own API keys stay theirs, below the views.
    await expect(page.locator("#account-panel #key-create")).to_be_visible()


async def test_an_admin_of_one_site_sees_its_settings_and_none_for_the_other(
    dashboard: DashboardServer, page: Page
) -> None:
    await sign_in_as(page, dashboard, ADMIN_OF_A)
    # The page opens on B, where they are a viewer: no Settings tab from the first answer on.
    await expect(page.locator("#site")).to_contain_text(SITE_B)
    await expect(page.locator("#tabs").get_by_text("Overview", exact=True)).to_be_visible()
    await expect(settings_tab(page)).to_have_count(0)

    # A, which they administer: the tab, with every settings panel but the operator's.
    await pick_site(page, SITE_A)
    await expect_overview_reports_only(page)
    await open_settings(page)
    settings = page.locator("#settings-section")
    await expect(page.locator("#overview-section")).to_be_hidden()
    for panel_id in settings_panel_ids():
        await expect(settings.locator(f"#{panel_id}")).to_have_count(0 if panel_id in OPERATORS_ONLY else 1)
    # One section per kind, each with its heading.
    await expect(settings.locator("#share-panel h2")).to_have_text("Share")
    await expect(settings.locator("#goals-settings h2")).to_have_text("Goals")
    await expect(settings.locator("#exclusions-panel h2")).to_have_text("Exclusions")

    # Back to B with Settings open: the tab goes, and the Overview is shown.
    await pick_site(page, SITE_B)
    await expect(settings_tab(page)).to_have_count(0)
    await expect(page.locator("#overview-section")).to_be_visible()
    await expect(settings).to_be_hidden()

    # A again: the tab is back.
    await pick_site(page, SITE_A)
    await expect(settings_tab(page)).to_have_count(1)
    await open_settings(page)
    await open_overview(page)


async def test_the_operator_sees_every_settings_panel_and_rate_limiting_stays_a_report(
    dashboard: DashboardServer, page: Page
) -> None:
    await open_site(page, dashboard, SITE_B)
    await expect_overview_reports_only(page)
    await expect(page.locator("#overview-section #rate-limits")).to_have_count(1)
    await open_settings(page)
    settings = page.locator("#settings-section")
    for panel_id in settings_panel_ids():
        await expect(settings.locator(f"#{panel_id}")).to_have_count(1)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / "settings-desktop.png"))
    # On a phone the five view tabs fit the screen (they wrap rather than widen the page).
    await page.set_viewport_size(PHONE)
    await expect(settings_tab(page)).to_be_visible()
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], width
    await page.screenshot(path=str(SCREENSHOTS / "settings-phone.png"))
