"""The Performance tab: the Web Vitals' p75 trend by day and the table by page show the stats
API's numbers (/api/v1/stats/vitals), at desktop and phone sizes (screenshots in
test-artifacts/screenshots/; the desktop one is docs/screenshots/performance-desktop.png)."""

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

SITE = "performance-dashboard.example.com"


@pytest.fixture(scope="module")
def dashboard(dashboard_server: DashboardServer, dashboard_settings: Settings) -> DashboardServer:
    """Page loads over the last three days: /guide slow (LCP 3-5 s), / fast, /pricing with no
    INP measured (nobody interacted)."""
    now = datetime.now(UTC) - timedelta(minutes=5)
    events: list[PageViewEvent] = []
    for day in range(3):
        for n in range(6):
            at = now - timedelta(days=day, minutes=10 * n)
            for path, lcp, inp in (
                ("/guide", 3000 + 400 * n, 250),
                ("/", 900 + 50 * n, 80),
                ("/pricing", 1800, None),
            ):
                visitor = f"{path}-{day}-{n}"
                events.append(page_view(SITE, visitor, at, path))
                measured = {"lcp_ms": lcp, "inp_ms": inp, "cls_milli": 20 * n, "fcp_ms": lcp // 2}
                left = at + timedelta(seconds=30)
                events.append(
                    page_view(SITE, visitor, left, path, name="engagement", ttfb_ms=200 + day, **measured)
                )
    archive(dashboard_settings, events)
    return dashboard_server


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
async def test_performance_tab_shows_the_apis_web_vitals(
    dashboard: DashboardServer, browser: Browser, viewport: str
) -> None:
    size = DESKTOP if viewport == "desktop" else PHONE
    context = await browser.new_context(viewport=size, locale="en-GB", is_mobile=viewport == "phone")
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = await context.new_page()
        await open_site(page, dashboard, SITE)
        period = await period_shown(page)
        await page.get_by_text("Performance", exact=True).click()
        rows = api(dashboard, "/stats/vitals", site=SITE, property="event:page", **period)
        assert isinstance(rows, list)
        assert [row["value"] for row in rows] == ["/", "/guide", "/pricing"]  # as many each: by name
        for index, row in enumerate(rows):
            for vital in ("lcp", "cls", "fcp", "ttfb"):
                cell = page.locator(f"#performance-{vital}-{index}")
                await expect(cell).to_have_attribute("data-value", str(row[vital]["p75"]))
            if "inp" in row:
                await expect(page.locator(f"#performance-inp-{index}")).to_contain_text(
                    f"{row['inp']['p75']:,.0f} ms"
                )
        assert "inp" not in rows[2]  # /pricing: not measured, shown as a dash
        await expect(page.locator("#performance-row-2")).to_contain_text("\u2013")
        await expect(page.locator("#performance-row-1")).to_contain_text(f"{rows[1]['lcp']['good']:.1f}%")
        # The trend: a line per vital, over the three days.
        traces = page.locator("#performance-trend .scatterlayer .trace")
        await expect(traces).to_have_count(5)
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= size["width"], width
        await screenshot(page, f"{viewport}-performance")
    finally:
        await context.close()
