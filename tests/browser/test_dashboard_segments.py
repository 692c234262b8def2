"""Acquisition filters and saved segments as a site owner clicks them, in headless Chromium on
the real dashboard server and ClickHouse engine: a row of every acquisition tab (referrer, UTM
source, channel, medium, campaign, content, term) filters the page to the API's numbers for that
filter; the filters in force are saved as a segment, applied, renamed, replaced and deleted; a
viewer applies a segment but cannot save one (403 to the callback written by hand).
Screenshots (desktop 1280 wide, phone 390 wide) go to test-artifacts/screenshots/."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from playwright.async_api import Browser, Locator, Page, expect

from dashboard.app import build_app
from storage.client import connect
from storage.segments import Segment, add_segment, list_segments
from storage.sites import add_site
from storage.users import set_password, set_role
from tally.settings import Settings
from tests.browser.test_dashboard import DESKTOP, PHONE, SCREENSHOTS, archive, open_site
from tests.browser.test_dashboard_team import PASSWORD as VIEWER_PASSWORD
from tests.fixtures.browser import SIGN_IN_TIMEOUT_MS, open_overview, open_settings
from tests.fixtures.dashboard_server import DashboardServer
from tests.fixtures.events import page_view

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

SITE = "segments.dashboard.test"
CALLBACK = "/_dash-update-component"
VIEWER = "segment-viewer@example.com"
NEWSLETTER = {"utm_source": "newsletter", "utm_medium": "email", "utm_campaign": "launch",
              "utm_content": "header", "utm_term": "kafka"}  # fmt: skip
# visitor → (referrer, UTM fields, country); channels: Organic Search (2), Email, Organic Social, Direct
SESSIONS = {
    "g1": ("www.google.com", {}, "DE"),
    "g2": ("duckduckgo.com", {}, "FR"),
    "nl": ("", NEWSLETTER, "DE"),
    "fb": ("l.facebook.com", {}, "US"),
    "dx": ("", {}, "US"),
}
# (panel tabs, tab label, list, row shown, filter, value)
ACQUISITION_ROWS = [
    ("sources-by", "Referrers", "sources-list", "www.google.com", "referrer_domain", "www.google.com"),
    ("sources-by", "UTM sources", "sources-list", "newsletter", "utm_source", "newsletter"),
    ("sources-by", "Channels", "sources-list", "Organic Search", "channel", "Organic Search"),
    ("campaigns-by", "Medium", "campaigns-list", "email", "utm_medium", "email"),
    ("campaigns-by", "Campaign", "campaigns-list", "launch", "utm_campaign", "launch"),
    ("campaigns-by", "Content", "campaigns-list", "header", "utm_content", "header"),
    ("campaigns-by", "Term", "campaigns-list", "kafka", "utm_term", "kafka"),
]


@pytest.fixture(scope="module")
def site(dashboard_settings: Settings) -> str:
    now = datetime.now(UTC) - timedelta(minutes=20)
    archive(dashboard_settings, [
        page_view(SITE, visitor, now + timedelta(minutes=index), "/", referrer_domain=referrer,
                  country=country, **utm)
        for index, (visitor, (referrer, utm, country)) in enumerate(SESSIONS.items())
    ])  # fmt: skip
    client = connect(dashboard_settings)
    add_site(client, SITE)
    set_password(client, VIEWER, VIEWER_PASSWORD)
    set_role(client, VIEWER, SITE, "viewer")
    return SITE


def api_visitors(server: DashboardServer, page_period: tuple[str, str], filters: dict | list) -> int:
    response = httpx.get(
        f"{server.url}/api/v1/stats/aggregate",
        params={"site": SITE, "from": page_period[0], "to": page_period[1], "source": "raw",
                "filters": json.dumps(filters)},
        headers={"Authorization": f"Bearer {server.api_key}"},
        timeout=30,
    )  # fmt: skip
    assert response.status_code == 200, response.text
    return int(response.json()["visitors"])


def this_week_end() -> str:
    """Tomorrow (UTC, the site's zone): Plausible's "7d" is the 7 days before `date`, so up to today,
    the dashboard's last 7 days."""
    return (datetime.now(UTC).date() + timedelta(days=1)).isoformat()


def v2_visitors(server: DashboardServer, filters: list) -> int:
    response = httpx.post(
        f"{server.url}/api/v2/query?source=raw",
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
    return int(response.json()["results"][0]["metrics"][0])


async def period_of(page: Page) -> tuple[str, str]:
    label = page.locator("#period-range")
    start, end = await label.get_attribute("data-start"), await label.get_attribute("data-end")
    assert start and end
    return start, end


def saved_segment(settings: Settings, name: str) -> Segment:
    return next(s for s in list_segments(connect(settings), SITE) if s.name == name)


async def click_until(button: Locator, chips: Locator, count: int) -> None:
    """Click a breakdown row until the chips show `count` filters: a list re-rendering after the
    filters changed (the rename above) can swallow a click on the row it is replacing."""
    for _ in range(5):
        await button.first.click()
        try:
            await expect(chips).to_have_count(count, timeout=5_000)
            return
        except AssertionError:
            continue
    await expect(chips).to_have_count(count)


async def click_row(page: Page, tabs: str, tab: str, listing: str, shown: str) -> None:
    await page.locator(f"#{tabs} label", has_text=tab).click()
    await page.locator(f"#{listing} .breakdown-link", has_text=shown).first.click()


async def test_every_acquisition_row_filters_and_filters_save_as_a_segment(
    browser: Browser, dashboard_server: DashboardServer, dashboard_settings: Settings, site: str
) -> None:
    page = await browser.new_page(viewport=DESKTOP)
    await open_site(page, dashboard_server, site)
    await expect(page.locator("#metric-visitors")).to_have_text(str(len(SESSIONS)))
    period = await period_of(page)
    chips = page.locator("#filter-chips .chip")
    for tabs, tab, listing, shown, dimension, value in ACQUISITION_ROWS:
        await click_row(page, tabs, tab, listing, shown)
        await expect(chips).to_have_count(1)
        await expect(chips).to_contain_text(f"is {shown}")
        expected = api_visitors(dashboard_server, period, {dimension: value})
        assert expected > 0
        await expect(page.locator("#metric-visitors")).to_have_text(str(expected))
        await page.locator("#filter-chips .chip-remove").click()
        await expect(chips).to_have_count(0)

    # Save the filters in force (channel Organic Search) as a segment.
    await click_row(page, "sources-by", "Channels", "sources-list", "Organic Search")
    await expect(chips).to_contain_text("Channel is Organic Search")
    await open_settings(page)  # the filters in force stay above every view
    panel = page.locator("#segments-panel")
    await panel.scroll_into_view_if_needed()
    await page.fill("#segment-name", "Search visits")
    await page.click("#segment-save")
    await expect(page.locator("#segment-status")).to_contain_text("Saved the segment 'Search visits'")
    row = panel.locator(".segment-item", has_text="Search visits")
    await expect(row).to_have_count(1)
    saved = saved_segment(dashboard_settings, "Search visits")
    assert saved.filters == [["is", "visit:channel", ["Organic Search"]]]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / "segments-panel-desktop.png"))

    # Apply it from the picker: the chip names it, the numbers are the segment's on the v2 API.
    await page.locator("#filter-chips .chip-remove").click()
    await expect(page.locator("#metric-visitors")).to_have_text(str(len(SESSIONS)))
    await page.click("#segment")
    await page.get_by_role("option", name="Search visits", exact=True).click()
    await expect(chips).to_contain_text("Segment is Search visits")
    searched = v2_visitors(dashboard_server, [["is", "segment", [saved.id]]])
    assert searched == 2
    await expect(page.locator("#metric-visitors")).to_have_text(str(searched))
    await page.locator("#filter-chips").scroll_into_view_if_needed()
    await page.screenshot(path=str(SCREENSHOTS / "segment-applied-desktop.png"))

    # Rename it while applied: the chip follows.
    await row.locator("input").fill("Organic search")
    await row.get_by_role("button", name="Rename").click()
    await expect(page.locator("#segment-status")).to_contain_text(
        "Renamed 'Search visits' to 'Organic search'"
    )
    await expect(chips).to_contain_text("Segment is Organic search")
    row = panel.locator(f"#segment-{saved.id}")

    # Narrow it: add a country, replace the segment's filters with those in force.
    await open_overview(page)
    await click_until(page.locator("#countries-list .breakdown-link", has_text="Germany"), chips, 2)
    await expect(page.locator("#filter-chips")).to_contain_text("Country is Germany")
    await expect(page.locator("#filter-chips")).to_contain_text("Segment is Organic search")
    await open_settings(page)
    await row.get_by_role("button", name="Replace with the filters in force").click()
    await expect(page.locator("#segment-status")).to_contain_text("now holds the filters in force")
    await expect(chips).to_have_count(1)
    await expect(page.locator("#metric-visitors")).to_have_text("1")
    narrowed = saved_segment(dashboard_settings, "Organic search")
    assert narrowed.filters == [["is", "visit:channel", ["Organic Search"]], ["is", "visit:country", ["DE"]]]
    await page.set_viewport_size(PHONE)
    await page.screenshot(path=str(SCREENSHOTS / "segments-panel-phone.png"), full_page=True)
    await page.set_viewport_size(DESKTOP)

    # Delete it: the chip goes, the numbers are the site's again.
    await row.get_by_role("button", name="Delete").click()
    await expect(page.locator("#segment-status")).to_contain_text("Deleted the segment 'Organic search'")
    await expect(chips).to_have_count(0)
    await expect(page.locator("#metric-visitors")).to_have_text(str(len(SESSIONS)))
    await expect(row).to_have_count(0)
    assert "Organic search" not in [s.name for s in list_segments(connect(dashboard_settings), site)]
    await page.close()


def save_callback_body(settings: Settings) -> dict:
    """The Segments panel's save callback as the browser would send it, for SITE."""
    app = build_app(settings)
    output = next(name for name in app.callback_map if "segment-status.children" in name)
    declared = app.callback_map[output]
    values = {"site": SITE, "segment-save": 1, "segment-name": "Mine", "filters": {"country": "DE"}}

    def entry(item: dict) -> dict | list:
        item_id = item["id"]
        if item_id.startswith("{"):  # a pattern (ALL) input: as Dash sends it with no such rows
            return []
        return {"id": item_id, "property": item["property"], "value": values.get(item_id)}

    return {
        "output": output,
        "outputs": [
            {"id": o.split(".")[0], "property": o.split(".")[1]} for o in output.strip(".").split("...")
        ],
        "inputs": [entry(item) for item in declared["inputs"]],
        "state": [entry(item) for item in declared["state"]],
        "changedPropIds": ["segment-save.n_clicks"],
    }


async def test_viewer_applies_a_segment_and_cannot_save_one(
    browser: Browser, dashboard_server: DashboardServer, dashboard_settings: Settings, site: str
) -> None:
    client = connect(dashboard_settings)
    segment = add_segment(client, site, "Germany", [["is", "visit:country", ["DE"]]])
    page = await browser.new_page(viewport=DESKTOP)
    await page.goto(dashboard_server.url + "/login")
    await page.fill("#email", VIEWER)
    await page.fill("#password", VIEWER_PASSWORD)
    await page.click("button[type=submit]")
    await expect(page.locator("#site")).to_contain_text(site, timeout=SIGN_IN_TIMEOUT_MS)
    await expect(page.locator("#metric-visitors")).to_have_text(str(len(SESSIONS)))
    await expect(page.locator("#segments-panel")).to_have_count(0)  # saving is a setting

    await page.click("#segment")
    await page.get_by_role("option", name="Germany", exact=True).click()
    await expect(page.locator("#filter-chips .chip")).to_contain_text("Segment is Germany")
    await expect(page.locator("#metric-visitors")).to_have_text(
        str(v2_visitors(dashboard_server, [["is", "segment", [segment.id]]]))
    )
    await page.screenshot(path=str(SCREENSHOTS / "segment-viewer-desktop.png"))
    await page.set_viewport_size(PHONE)
    await page.screenshot(path=str(SCREENSHOTS / "segment-viewer-phone.png"), full_page=True)

    refused = await page.request.post(
        dashboard_server.url + CALLBACK, data=save_callback_body(dashboard_settings)
    )
    assert refused.status == 403 and "viewer" in await refused.text()
    assert "Mine" not in [s.name for s in list_segments(client, site)]
    await page.close()
