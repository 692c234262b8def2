"""The Sources panel's Channels tab and the segment picker, as a site owner clicks them, with
the numbers checked against the stats API. Screenshots (desktop 1280 wide, phone 390 wide) go
to test-artifacts/screenshots/."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest
from playwright.async_api import Browser, Page, expect

from dashboard.segments import checked
from storage.client import connect
from storage.segments import add_segment
from storage.sites import add_site
from tally.settings import Settings
from tests.browser.test_dashboard import DESKTOP, PHONE, SCREENSHOTS, archive, open_site
from tests.fixtures.dashboard_server import DashboardServer
from tests.fixtures.events import page_view

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

SITE = "channels.dashboard.test"
GERMANY = [["is", "visit:country", ["DE"]]]


def this_week_end() -> str:
    """Tomorrow (UTC, the site's zone): Plausible's "7d" is the 7 days before `date`, so up to today,
    the dashboard's last 7 days."""
    return (datetime.now(UTC).date() + timedelta(days=1)).isoformat()


def v2(server: DashboardServer, filters: list) -> list:
    response = httpx.post(
        f"{server.url}/api/v2/query?source=raw",  # no stream jobs run here
        json={
            "site_id": SITE,
            "metrics": ["visitors"],
            "date_range": "7d",
            "filters": filters,
            "date": this_week_end(),
        },
        headers={"Authorization": f"Bearer {server.api_key}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response.json()["results"][0]["metrics"]


async def channels_shown_and_answered(
    page: Page, server: DashboardServer, site: str
) -> tuple[dict[str, str], dict[str, str]]:
    """The Channels tab's rows (channel -> visitors as shown, once every row is there) and the
    stats API's for the period shown."""
    start = await page.locator("#period-range").get_attribute("data-start")
    end = await page.locator("#period-range").get_attribute("data-end")
    answer = httpx.get(
        f"{server.url}/api/v1/stats/breakdown",
        params={"site": site, "from": start, "to": end, "by": "channel", "source": "raw"},
        headers={"Authorization": f"Bearer {server.api_key}"},
        timeout=30,
    ).json()
    rows = page.locator("#sources-list .breakdown-row")
    await expect(rows).to_have_count(len(answer))
    shown = {
        await row.locator(".col-value").inner_text(): await row.locator(".col-number").first.inner_text()
        for row in await rows.all()
    }
    return shown, {row["value"]: str(row["visitors"]) for row in answer}


async def test_channels_tab_and_segment_picker(
    browser: Browser, dashboard_server: DashboardServer, dashboard_settings: Settings
) -> None:
    now = datetime.now(UTC) - timedelta(minutes=20)
    sessions = [
        ("g1", "www.google.com", "", "", "DE"),
        ("g2", "duckduckgo.com", "", "", "FR"),
        ("ad", "www.google.com", "google", "cpc", "DE"),
        ("fb", "l.facebook.com", "", "", "US"),
        ("nl", "", "newsletter", "email", "DE"),
        ("dx", "", "", "", "US"),
    ]
    archive(dashboard_settings, [
        page_view(SITE, visitor, now + timedelta(minutes=index), "/", referrer_domain=referrer,
                  utm_source=source, utm_medium=medium, country=country)
        for index, (visitor, referrer, source, medium, country) in enumerate(sessions)
    ])  # fmt: skip
    client = connect(dashboard_settings)
    add_site(client, SITE)
    checked(GERMANY)
    segment = add_segment(client, SITE, "Germany", GERMANY)

    page = await browser.new_page(viewport=DESKTOP)
    await open_site(page, dashboard_server, SITE)
    await page.locator("#sources-by label", has_text="Channels").click()
    rows = page.locator("#sources-list .breakdown-row")
    await expect(rows.first.locator(".col-value")).to_have_text("Organic Search")
    await expect(rows).to_have_count(5)
    shown, answered = await channels_shown_and_answered(page, dashboard_server, SITE)
    assert shown == answered
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.locator("#sources-list").scroll_into_view_if_needed()
    await page.screenshot(path=str(SCREENSHOTS / "channels-desktop.png"))

    # The segment picker: the chip shows the segment, the numbers are the segment's.
    await expect(page.locator("#metric-visitors")).to_have_text(str(v2(dashboard_server, [])[0]))
    await page.click("#segment")
    await page.get_by_role("option", name="Germany", exact=True).click()
    await expect(page.locator("#filter-chips .chip")).to_contain_text("Segment is Germany")
    germany = v2(dashboard_server, [["is", "segment", [segment.id]]])[0]
    assert germany == 3
    await expect(page.locator("#metric-visitors")).to_have_text(str(germany))
    await page.screenshot(path=str(SCREENSHOTS / "segment-desktop.png"))
    await page.set_viewport_size(PHONE)
    await page.screenshot(path=str(SCREENSHOTS / "segment-phone.png"), full_page=True)
    await page.locator("#filter-chips .chip-remove").click()
    await expect(page.locator("#metric-visitors")).to_have_text("6")
    await page.locator("#sources-list").scroll_into_view_if_needed()
    await page.screenshot(path=str(SCREENSHOTS / "channels-phone.png"))
    await page.close()
