"""The Realtime tab as a site owner opens it: the last 30 minutes by page, source and country,
the numbers the stats API's realtime breakdowns answer. Screenshots (desktop 1280 wide, phone
390 wide) go to test-artifacts/screenshots/."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest
from playwright.async_api import Browser, expect

from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.browser.test_dashboard import DESKTOP, PHONE, SCREENSHOTS, archive, open_site
from tests.fixtures.dashboard_server import DashboardServer
from tests.fixtures.events import page_view

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

SITE = "realtime.dashboard.test"


async def test_realtime_tab_shows_the_last_30_minutes(
    browser: Browser, dashboard_server: DashboardServer, dashboard_settings: Settings
) -> None:
    now = datetime.now(UTC)
    archive(dashboard_settings, [
        page_view(SITE, "a", now - timedelta(minutes=3), "/", referrer_domain="google.com", country="DE"),
        page_view(SITE, "a", now - timedelta(minutes=2), "/pricing", country="DE"),
        page_view(SITE, "b", now - timedelta(minutes=12), "/blog", referrer_domain="t.co", country="FR"),
        page_view(SITE, "c", now - timedelta(minutes=45), "/old", country="US"),  # before the window
    ])  # fmt: skip
    add_site(connect(dashboard_settings), SITE)

    page = await browser.new_page(viewport=DESKTOP)
    await open_site(page, dashboard_server, SITE)
    await page.locator("#tabs").get_by_text("Realtime", exact=True).click()
    await expect(page.locator("#realtime-visitors")).to_have_text("2")
    await expect(page.locator("#realtime-pageviews")).to_have_text("3")
    for name in ("pages", "sources", "countries"):
        expected = httpx.get(
            f"{dashboard_server.url}/api/v1/stats/realtime",
            params={"site": SITE, "breakdown": name},
            headers={"Authorization": f"Bearer {dashboard_server.api_key}"},
            timeout=30,
        ).json()["results"]
        values = page.locator(f"#realtime-{name} .breakdown-row .col-value")
        await expect(values).to_have_count(len(expected))
        visitors = page.locator(f"#realtime-{name} .breakdown-row .col-number:not(.muted)")
        await expect(visitors).to_have_text([str(row["visitors"]) for row in expected])
    await expect(page.locator("#realtime-pages .breakdown-row .col-value")).to_have_text(
        ["/", "/blog", "/pricing"]
    )
    await expect(page.locator("#realtime-countries")).to_contain_text("Germany")
    await expect(page.locator("#realtime-sources")).to_contain_text("google.com")

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / "realtime-desktop.png"))
    await page.set_viewport_size(PHONE)
    await page.screenshot(path=str(SCREENSHOTS / "realtime-phone.png"), full_page=True)
    await page.close()
