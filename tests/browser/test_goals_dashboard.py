"""Goals, custom events, properties and revenue from a visitor's browser to the dashboard
(issue 16), every part real: Chromium on a *.test website, the collector, Kafka, the archiver,
the dashboard server, the ClickHouse engine.

The website sends with Tally's tracker (a page view, `tally('Signup', {props})`, a purchase
with `revenue`, as the tracker's `$`) and, from the same page, as Plausible's tracker does
(`n`/`u`/`d`/`r`, `p` as a JSON string, `revenue: {amount, currency}`). The site owner adds the
goals in the dashboard's form, reads the Goals and Properties panels (checked against the
stats API), filters by a goal with a click, and removes a goal. Screenshots at desktop
(1280 wide) and phone (390 wide) sizes go to docs/screenshots/ (`make screenshots`).
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.async_api import Browser, Page, expect

from tally.settings import Settings
from tests.browser.screenshots import SCREENSHOTS
from tests.browser.test_dashboard import PHONE, api, open_site, period_shown
from tests.browser.test_tracker import EVERY_OPTION, tracked_page
from tests.fixtures.browser import Websites, open_overview, open_settings
from tests.fixtures.collector_server import register_site
from tests.fixtures.dashboard_server import DashboardServer
from tests.integration.test_archiver import archive_until

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

DOMAIN = "shop.goals.test"
# Plausible's tracker's request: short names, props as a JSON string, revenue as an object.
PLAUSIBLE_PURCHASE = """
async ([collector, domain]) => {
  const body = JSON.stringify({
    n: "Purchase", u: location.href, d: domain, r: null,
    p: JSON.stringify({plan: "team"}),
    revenue: {amount: "9.50", currency: "EUR"},
  });
  const headers = {"Content-Type": "text/plain"};
  return (await fetch(collector + "/api/event", {method: "POST", body, headers})).status;
}
"""


async def visit_and_convert(page: Page, websites: Websites, collector_url: str) -> None:
    """One visitor: a page view, a signup and a purchase with Tally's tracker, a purchase as
    Plausible's tracker sends it."""
    html = tracked_page(f"{collector_url}/tracker.js", DOMAIN, options=EVERY_OPTION)
    await page.goto(websites.publish(DOMAIN, "/checkout/thanks", html))
    await page.wait_for_function("typeof tally === 'function'")
    await page.evaluate("tally('Signup', {props: {plan: 'pro'}})")
    await page.evaluate("tally('Purchase', {revenue: {amount: 20.5, currency: 'EUR'}})")
    assert await page.evaluate(PLAUSIBLE_PURCHASE, [collector_url, DOMAIN]) == 202


async def add_goal(page: Page, event: str = "", page_pattern: str = "", currency: str = "") -> None:
    """In the Settings view's Goals section."""
    await page.fill("#goal-event", event)
    await page.fill("#goal-page", page_pattern)
    await page.fill("#goal-currency", currency)
    await page.click("#goal-add")
    name = event or f"Visit {page_pattern}"  # each add waits for its own answer
    await expect(page.locator("#goal-status")).to_have_text(f"Added the goal {name}.")


async def screenshot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.locator("#goals-panel").scroll_into_view_if_needed()
    await page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


async def test_goals_from_both_trackers_reach_the_dashboard(
    page: Page,
    browser: Browser,
    websites: Websites,
    collector_url: str,
    settings: Settings,
    dashboard_server: DashboardServer,
) -> None:
    register_site(settings, collector_url, DOMAIN)  # its probe comes from a bot: dropped
    await visit_and_convert(page, websites, collector_url)
    await archive_until(settings, DOMAIN, expected=4)

    dashboard = await browser.new_page(viewport={"width": 1280, "height": 900})
    await open_site(dashboard, dashboard_server, DOMAIN)
    period = await period_shown(dashboard)
    await expect(dashboard.locator("#goals-list")).to_contain_text("No goals yet")

    # The site owner adds goals in the dashboard: an event goal, a revenue goal, a page goal.
    await open_settings(dashboard)  # editing goals is a setting; the Overview reports them
    await add_goal(dashboard, "Signup")
    await add_goal(dashboard, "Purchase", currency="eur")
    await add_goal(dashboard, page_pattern="/checkout/*")
    await dashboard.fill("#goal-event", "Purchase")
    await dashboard.fill("#goal-page", "")
    await dashboard.click("#goal-add")
    await expect(dashboard.locator("#goal-status")).to_contain_text("already has a goal 'Purchase'")
    listed = dashboard.locator("#goals-settings-list .goal")
    await expect(listed).to_have_count(3)
    await expect(listed.first).to_contain_text("Purchase")
    await open_overview(dashboard)

    expected = api(dashboard_server, "/stats/goals", site=DOMAIN, **period)
    assert [(g["goal"], g["visitors"], g["events"], g["conversion_rate"]) for g in expected] == [
        ("Purchase", 1, 2, 1.0),
        ("Signup", 1, 1, 1.0),
        ("Visit /checkout/*", 1, 1, 1.0),
    ]
    assert expected[0]["revenue"] == {"currency": "EUR", "total": "30.00", "average": "15.00", "events": 2}
    rows = dashboard.locator("#goals-table .breakdown-row")
    await expect(rows).to_have_count(3)
    purchase = dashboard.locator('#goals-table [data-goal="Purchase"]')
    await expect(purchase.locator(".goal-visitors")).to_have_text("1")
    await expect(purchase.locator(".goal-events")).to_have_text("2")
    await expect(purchase.locator(".goal-rate")).to_have_text("100.0%")
    await expect(purchase.locator(".goal-revenue")).to_have_text("30.00 EUR")
    await expect(dashboard.locator('#goals-table [data-goal="Signup"] .goal-revenue')).to_have_text("")

    # Properties: the custom events' `plan`, from both trackers.
    await dashboard.click("#property-key")
    await dashboard.get_by_role("option", name="plan", exact=True).click()
    await dashboard.keyboard.press("Escape")
    values = dashboard.locator("#properties-list .property-row .col-value")
    await expect(values).to_have_text(["pro", "team"])
    assert api(dashboard_server, "/stats/breakdown", site=DOMAIN, by="prop:plan", **period) == [
        {"value": "pro", "events": 1, "visitors": 1},
        {"value": "team", "events": 1, "visitors": 1},
    ]
    await screenshot(dashboard, "goals-desktop")

    # Clicking a goal filters the dashboard by the visitors who converted on it.
    await dashboard.locator("#goals-table .breakdown-link", has_text=re.compile("^Signup$")).click()
    chip = dashboard.locator("#filter-chips .chip")
    await expect(chip).to_contain_text("Goal is Signup")
    filtered = api(
        dashboard_server, "/stats/aggregate", site=DOMAIN, filters=json.dumps({"goal": "Signup"}), **period
    )
    assert isinstance(filtered, dict) and filtered["visitors"] == 1
    await expect(dashboard.locator("#metric-visitors")).to_have_text("1")
    await chip.locator(".chip-remove").click()
    await expect(chip).to_have_count(0)

    # On a phone: the panels fit the screen.
    phone = await browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True)
    try:
        small = await phone.new_page()
        await open_site(small, dashboard_server, DOMAIN)
        await small.keyboard.press("Escape")
        await expect(small.locator("#goals-table .breakdown-row")).to_have_count(3)
        width = await small.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], width
        await screenshot(small, "goals-phone")
    finally:
        await phone.close()

    # Removing a goal: its row goes, its events stay in the archive.
    await open_settings(dashboard)
    await listed.filter(has_text="Visit /checkout/*").get_by_role("button", name="Remove").click()
    await expect(dashboard.locator("#goal-status")).to_have_text("Removed the goal Visit /checkout/*.")
    await expect(listed).to_have_count(2)
    await open_overview(dashboard)
    await expect(rows).to_have_count(2)
    await dashboard.close()
