"""The Pages panel shows each page's time on page and scroll depth, the stats API's numbers,
at desktop and phone sizes (screenshots in test-artifacts/screenshots/)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from playwright.async_api import Browser, expect

from tally.event import PageViewEvent
from tally.settings import Settings
from tests.browser.test_dashboard import (
    DESKTOP,
    PHONE,
    TIMEOUT_MS,
    api,
    archive,
    open_site,
    period_shown,
    screenshot,
)
from tests.fixtures.dashboard_server import DashboardServer
from tests.fixtures.events import page_view

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

SITE = "engaged-dashboard.example.com"


@pytest.fixture(scope="module")
def dashboard(dashboard_server: DashboardServer, dashboard_settings: Settings) -> DashboardServer:
    """Two readers of /guide (40 s to 75 %, 20 s to 25 %), one of / who left at once."""
    now = datetime.now(UTC) - timedelta(seconds=5)
    t = now - timedelta(minutes=30)

    def engaged(visitor: str, at: datetime, path: str, sd: int, e: int) -> PageViewEvent:
        return page_view(SITE, visitor, at, path, name="engagement", scroll_depth=sd, engagement_ms=e)

    archive(
        dashboard_settings,
        [
            page_view(SITE, "a", t, "/guide"),
            engaged("a", t + timedelta(seconds=40), "/guide", 75, 40_000),
            page_view(SITE, "b", t, "/guide"),
            engaged("b", t + timedelta(seconds=20), "/guide", 25, 20_000),
            page_view(SITE, "c", t, "/"),
        ],
    )
    return dashboard_server


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
async def test_pages_panel_shows_time_on_page_and_scroll_depth(
    dashboard: DashboardServer, browser: Browser, viewport: str
) -> None:
    size = DESKTOP if viewport == "desktop" else PHONE
    context = await browser.new_context(viewport=size, locale="en-GB", is_mobile=viewport == "phone")
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = await context.new_page()
        await open_site(page, dashboard, SITE)
        period = await period_shown(page)
        rows = api(dashboard, "/stats/breakdown", site=SITE, by="path", **period)
        assert isinstance(rows, list)
        assert [(r["value"], r["time_on_page_s"], r["scroll_depth"]) for r in rows] == [
            ("/guide", 30.0, 50.0),
            ("/", 0.0, 0.0),
        ]
        panel = page.locator("#pages-list")
        await expect(panel.locator(".breakdown-header")).to_contain_text("Time")
        await expect(panel.locator(".breakdown-row").nth(0)).to_contain_text("30s")
        await expect(panel.locator(".breakdown-row").nth(0)).to_contain_text("50%")
        await expect(panel.locator(".breakdown-row").nth(1)).to_contain_text("-")
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= size["width"], width
        await screenshot(page, f"{viewport}-pages-engagement")
    finally:
        await context.close()
