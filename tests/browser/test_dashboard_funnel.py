"""The Funnel tab in a real browser (Debian's Chromium) against the real dashboard server and
ClickHouse engine: a site owner writes the steps of a checkout, reads the visitors and the
drop-off per step — the stats API's numbers for the same period — filters by a page, saves
the steps under a name, picks the saved funnel after a reload and removes it, and does the same
on a phone.

Screenshots (desktop 1280 wide, phone 390 wide) go to test-artifacts/screenshots/; copies of
them are kept in docs/screenshots/ (`make screenshots`).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from playwright.async_api import Browser, Page, expect

from storage.client import connect
from storage.sites import add_site
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.browser.test_dashboard import (
    DESKTOP,
    PHONE,
    TIMEOUT_MS,
    api,
    open_site,
    period_shown,
    screenshot,
)
from tests.fixtures.dashboard_server import DashboardServer
from tests.fixtures.events import archive_rows, page_view

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

SITE = "browser-funnel.example.com"
STEPS_TEXT = "/product/*\nSignup\n/thanks"
STEPS = [{"page": "/product/*"}, {"event": "Signup"}, {"page": "/thanks"}]


def checkout_traffic(now: datetime) -> list[PageViewEvent]:
    """40 visitors on product pages in the last hours; every second signs up, every fourth
    then reaches /thanks; a few sign up before looking at a product (out of order)."""
    events = []
    for index in range(40):
        visitor = f"{SITE}-v{index}"
        at = now - timedelta(hours=3) + timedelta(minutes=4 * index)
        if index % 10 == 9:
            events.append(page_view(SITE, visitor, at - timedelta(minutes=1), "/", name="Signup"))
        events.append(page_view(SITE, visitor, at, f"/product/{index % 3}"))
        if index % 2 == 0:
            events.append(page_view(SITE, visitor, at + timedelta(minutes=2), "/signup", name="Signup"))
        if index % 4 == 0:
            events.append(page_view(SITE, visitor, at + timedelta(minutes=3), "/thanks"))
    return events


@pytest.fixture(scope="module")
def dashboard(dashboard_server: DashboardServer, dashboard_settings: Settings) -> DashboardServer:
    rows, columns = archive_rows(checkout_traffic(datetime.now(UTC) - timedelta(seconds=5)))
    store = connect(dashboard_settings)
    store.insert("events", rows, column_names=columns)
    add_site(store, SITE)  # funnels are saved for registered sites
    return dashboard_server


async def open_funnel(page: Page, server: DashboardServer) -> dict[str, str]:
    await open_site(page, server, SITE)
    period = await period_shown(page)
    await page.get_by_role("option", name="Funnel", exact=True).click()
    await page.fill("#funnel-steps", STEPS_TEXT)
    await page.click("#funnel-run")
    return period


async def expect_steps(page: Page, expected: dict) -> None:
    """Each step's visitors and drop-off on the page are the API's."""
    for index, row in enumerate(expected["steps"], start=1):
        await expect(page.locator(f"#funnel-visitors-{index}")).to_have_attribute(
            "data-value", str(row["visitors"])
        )
        if index > 1:
            await expect(page.locator(f"#funnel-dropoff-{index}")).to_have_attribute(
                "data-value", str(row["dropoff"])
            )


async def test_site_owner_reads_a_checkout_funnel(dashboard: DashboardServer, browser: Browser) -> None:
    context = await browser.new_context(viewport=DESKTOP, locale="en-GB")
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = await context.new_page()
        period = await open_funnel(page, dashboard)
        expected = api(dashboard, "/stats/funnel", site=SITE, steps=json.dumps(STEPS), **period)
        assert isinstance(expected, dict)
        assert [row["visitors"] for row in expected["steps"]] == [40, 20, 10]
        await expect_steps(page, expected)
        await expect(page.locator(".funnel-label")).to_have_text(["/product/*", "Event: Signup", "/thanks"])
        await expect(page.locator("#funnel-dropoff-2")).to_contain_text("20 dropped off (50.0%)")
        await screenshot(page, "funnel-desktop")

        # A step Tally cannot use is said in a sentence, naming the step.
        await page.fill("#funnel-steps", "/product/*")
        await page.click("#funnel-run")
        await expect(page.locator("#funnel-result .notice-error")).to_contain_text("2 to 8 steps")

        # A filter set on the Overview (a page clicked) applies to the funnel: only visits
        # that saw /thanks are left, and all of them went through every step.
        await page.fill("#funnel-steps", STEPS_TEXT)
        await page.click("#funnel-run")
        await expect_steps(page, expected)
        await page.get_by_role("option", name="Overview", exact=True).click()
        await page.locator("#pages-list .breakdown-link", has_text=re.compile(r"^/thanks$")).click()
        await expect(page.locator("#filter-chips .chip")).to_contain_text("Page is /thanks")
        await page.get_by_role("option", name="Funnel", exact=True).click()
        filtered = api(
            dashboard,
            "/stats/funnel",
            site=SITE,
            steps=json.dumps(STEPS),
            filters=json.dumps({"path": "/thanks"}),
            **period,
        )
        assert isinstance(filtered, dict)
        assert [row["visitors"] for row in filtered["steps"]] == [10, 10, 10]
        await expect_steps(page, filtered)
    finally:
        await context.close()


async def test_funnel_reads_on_a_phone(dashboard: DashboardServer, browser: Browser) -> None:
    context = await browser.new_context(
        viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True, locale="en-GB"
    )
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = await context.new_page()
        period = await open_funnel(page, dashboard)
        expected = api(dashboard, "/stats/funnel", site=SITE, steps=json.dumps(STEPS), **period)
        await expect_steps(page, expected)  # type: ignore[arg-type]
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], width
        await screenshot(page, "funnel-phone")
    finally:
        await context.close()


async def test_site_owner_saves_a_funnel_picks_it_after_a_reload_and_removes_it(
    dashboard: DashboardServer, browser: Browser
) -> None:
    context = await browser.new_context(viewport=DESKTOP, locale="en-GB")
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = await context.new_page()
        period = await open_funnel(page, dashboard)
        # The chart renders above the Save button and moves it down: a user clicks once it is
        # shown (a click while it renders can land on the chart instead: CI, stop 42).
        await expect(page.locator("#funnel-visitors-3")).to_have_attribute("data-value", "10")
        await page.click("#funnel-save")  # no name yet: said, nothing saved
        await expect(page.locator("#funnel-save-status .notice-error")).to_contain_text("a funnel's name")
        await page.fill("#funnel-name", "Checkout")
        await page.click("#funnel-save")
        await expect(page.locator("#funnel-save-status")).to_contain_text("Saved the funnel Checkout")

        # A new visit: the Steps box emptied, the saved funnel picked from the list.
        await page.evaluate("localStorage.clear()")
        await page.reload()
        # The address keeps the site (dashboard/bookmark.py), so a user does not pick it again;
        # the test did, and the Funnel tab clicked right after never showed (CI, stops 51 and 52).
        await expect(page.locator("#site")).to_contain_text(SITE)
        await page.get_by_role("option", name="Funnel", exact=True).click()
        await page.click("#funnel-saved")
        await page.get_by_role("option", name="Checkout", exact=True).click()
        await expect(page.locator("#funnel-steps")).to_have_value(STEPS_TEXT)
        saved = api(dashboard, "/stats/funnel", site=SITE, funnel="Checkout", **period)
        assert isinstance(saved, dict)
        assert [row["visitors"] for row in saved["steps"]] == [40, 20, 10]
        await expect_steps(page, saved)
        await expect(page.locator(".funnel-label")).to_have_text(["/product/*", "Event: Signup", "/thanks"])

        await page.click("#funnel-remove")
        await expect(page.locator("#funnel-save-status")).to_contain_text("Removed the funnel Checkout")
        await page.click("#funnel-saved")
        await expect(page.get_by_role("option", name="Checkout", exact=True)).to_have_count(0)
        gone = httpx.get(
            f"{dashboard.url}/api/v1/stats/funnel",
            params={"site": SITE, "funnel": "Checkout", **period},
            headers={"Authorization": f"Bearer {dashboard.api_key}"},
            timeout=30,
        )
        assert gone.status_code == 400 and "Checkout" in gone.json()["error"], gone.text
    finally:
        await context.close()
