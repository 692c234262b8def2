"""The Journeys tab in a real browser (Debian's Chromium) against the real dashboard server and
ClickHouse engine: a site owner follows the visits from the home page — the visits and paths the
stats API gives for the same period — as a Sankey diagram, clicks the /pricing node and the
diagram re-centres on /pricing.

Screenshot (desktop 1280 wide) to test-artifacts/screenshots/ (`make screenshots` copies them to
docs/screenshots/).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from playwright.async_api import Browser, Page, expect

from storage.client import connect
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.browser.test_dashboard import DESKTOP, TIMEOUT_MS, api, open_site, period_shown, screenshot
from tests.fixtures.dashboard_server import DashboardServer
from tests.fixtures.events import archive_rows, page_view

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

SITE = "browser-journeys.example.com"


def home_traffic(now: datetime) -> list[PageViewEvent]:
    """24 visits from /: every second goes on to /pricing (a third of those then to /signup),
    the others to a blog post; each visit 5 minutes after the one before."""
    events = []
    for index in range(24):
        visitor = f"{SITE}-v{index}"
        at = now - timedelta(hours=3) + timedelta(minutes=5 * index)
        events.append(page_view(SITE, visitor, at, "/"))
        second = "/pricing" if index % 2 == 0 else f"/blog/{index % 3}"
        events.append(page_view(SITE, visitor, at + timedelta(minutes=1), second))
        if index % 6 == 0:
            events.append(page_view(SITE, visitor, at + timedelta(minutes=2), "/signup"))
    return events


@pytest.fixture(scope="module")
def dashboard(dashboard_server: DashboardServer, dashboard_settings: Settings) -> DashboardServer:
    rows, columns = archive_rows(home_traffic(datetime.now(UTC) - timedelta(seconds=5)))
    connect(dashboard_settings).insert("events", rows, column_names=columns)
    return dashboard_server


async def expect_totals(page: Page, rows: list[dict]) -> None:
    total = page.locator("#journeys-total")
    await expect(total).to_have_attribute("data-visits", str(sum(row["visits"] for row in rows)))
    await expect(total).to_have_attribute("data-paths", str(len(rows)))


async def test_site_owner_follows_journeys_and_recentres_on_a_node(
    dashboard: DashboardServer, browser: Browser
) -> None:
    context = await browser.new_context(viewport=DESKTOP, locale="en-GB")
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = await context.new_page()
        await open_site(page, dashboard, SITE)
        period = await period_shown(page)
        await page.get_by_role("option", name="Journeys", exact=True).click()
        await page.fill("#journeys-page", "/")
        await page.press("#journeys-page", "Enter")
        from_home = api(dashboard, "/stats/journeys", site=SITE, page="/", steps="3", **period)
        assert isinstance(from_home, list)
        assert {tuple(row["steps"]): row["visits"] for row in from_home}[("/", "/pricing", "/signup")] == 4
        await expect_totals(page, from_home)
        await expect(page.locator("#journeys-sankey .sankey-node")).to_have_count(
            len({(i, step) for row in from_home for i, step in enumerate(row["steps"])})
        )
        await screenshot(page, "journeys-desktop")

        # A click on the /pricing node follows /pricing: the page box and the paths are its.
        await (
            page.locator("#journeys-sankey .sankey-node", has_text="/pricing")
            .locator(".node-rect")
            .first.click()
        )
        await expect(page.locator("#journeys-page")).to_have_value("/pricing")
        from_pricing = api(dashboard, "/stats/journeys", site=SITE, page="/pricing", steps="3", **period)
        assert isinstance(from_pricing, list)
        assert sorted(row["visits"] for row in from_pricing) == [4, 8]
        await expect_totals(page, from_pricing)
    finally:
        await context.close()
