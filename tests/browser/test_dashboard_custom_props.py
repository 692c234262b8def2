"""A site's custom properties (issue 37) in a real browser (Debian's Chromium) against the real
dashboard server and the real ClickHouse engine: the operator lists one in the Settings view's
Custom properties section, and the Overview's Properties report then offers only it, at once,
without a reload; removed, the report offers every property again. (Who may see the section: the
settings tests, which walk every settings panel for a viewer and an admin of another site.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from playwright.async_api import Page, expect

from storage import custom_properties
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.browser.test_dashboard import archive, open_site
from tests.fixtures.browser import open_overview, open_settings
from tests.fixtures.dashboard_server import DashboardServer
from tests.fixtures.events import page_view

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

SITE = "custom-props.example.com"


@pytest.fixture(scope="module")
def dashboard(dashboard_server: DashboardServer, dashboard_settings: Settings) -> DashboardServer:
    now = datetime.now(UTC) - timedelta(minutes=5)
    events = []
    for index in range(4):
        visitor = f"props-v{index}"
        events.append(page_view(SITE, visitor, now, "/pricing"))
        props = {"plan": "pro" if index % 2 else "team", "author": f"writer-{index % 2}"}
        events.append(page_view(SITE, visitor, now, "/pricing", name="Signup", props=props))
    archive(dashboard_settings, events)
    add_site(connect(dashboard_settings), SITE)
    return dashboard_server


async def expect_offered(page: Page, keys: list[str]) -> None:
    """The Properties report's picker offers exactly `keys` (of the events' `author` and `plan`)."""
    await page.click("#property-key")
    await expect(page.locator(".dash-dropdown-content").get_by_role("option")).to_have_text(keys)
    await page.keyboard.press("Escape")


async def test_a_listed_property_is_the_only_one_the_report_offers(
    dashboard: DashboardServer, dashboard_settings: Settings, page: Page
) -> None:
    await open_site(page, dashboard, SITE)
    await expect_offered(page, ["author", "plan"])

    await open_settings(page)
    section = page.locator("#custom-props-panel")
    await expect(section.locator("h2")).to_have_text("Custom properties")
    await expect(section.locator("#custom-props-list")).to_contain_text("None listed")
    await section.locator("#custom-prop-name").fill("plan")
    await section.locator("#custom-prop-add").click()
    await expect(section.locator("#custom-prop-status")).to_contain_text("Offering plan")
    await expect(section.locator("#custom-props-items")).to_contain_text("plan")
    assert custom_properties.list_properties(connect(dashboard_settings), SITE) == ["plan"]

    # Back to the Overview without a reload: the picker follows the list at once.
    await open_overview(page)
    await expect_offered(page, ["plan"])

    await open_settings(page)
    await section.get_by_role("button", name="Remove").click()
    await expect(section.locator("#custom-prop-status")).to_contain_text("No longer offering plan")
    await expect(section.locator("#custom-props-list")).to_contain_text("None listed")
    assert custom_properties.list_properties(connect(dashboard_settings), SITE) == []
    await open_overview(page)
    await expect_offered(page, ["author", "plan"])
