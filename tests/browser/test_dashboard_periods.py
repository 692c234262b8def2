"""The period picker and the comparison in a real browser (Debian's Chromium) against the real
dashboard server and ClickHouse engine: a site in Europe/Berlin, its owner picks "Last 30 days"
against "same period last year" and reads the numbers, the change in % and the dashed line.
Every number is checked against the stats API asked the same (period=30d,
compare=year_over_year).

Screenshots (desktop 1280 x 800, phone 390 x 844) go to test-artifacts/screenshots/.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Browser, BrowserContext, Page, expect
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from dashboard import display
from storage.calendar import local_midnight
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.browser.test_dashboard import DESKTOP, PHONE, pick_site, screenshot, sign_in
from tests.fixtures.browser import TIMEOUT_MS
from tests.fixtures.dashboard_server import DashboardServer
from tests.fixtures.events import PATHS, archive_rows, page_view

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

SITE = "browser-periods.example.com"
ZONE = "Europe/Berlin"


def traffic(now: datetime) -> list:
    """Page views over the last 40 days, and fewer over the same days a year before."""
    rng = random.Random(20)
    events = []
    for days_ago in range(40):
        for year_ago, count in ((0, rng.randrange(5, 15)), (1, rng.randrange(2, 8))):
            day = now - timedelta(days=days_ago + 365 * year_ago)
            for number in range(count):
                at = day - timedelta(minutes=rng.randrange(60, 600))
                visitor = f"{year_ago}-{days_ago}-{number}"
                events.append(page_view(SITE, visitor, at, rng.choice(PATHS)))
    return events


@pytest.fixture(scope="module")
def dashboard(dashboard_server: DashboardServer, dashboard_settings: Settings) -> DashboardServer:
    client = connect(dashboard_settings)
    add_site(client, SITE, ZONE)
    rows, columns = archive_rows(traffic(datetime.now(UTC)))
    client.insert("events", rows, column_names=columns)
    return dashboard_server


def api(server: DashboardServer, path: str, **params: str) -> dict:
    response = httpx.get(
        f"{server.url}/api/v1{path}",
        params={"site": SITE, "source": "raw", **params},
        headers={"Authorization": f"Bearer {server.api_key}"},
        timeout=30,
    )
    response.raise_for_status()
    return response.json()


async def choose(page: Page, picker: str, option: str) -> None:
    # A click that lands while a re-render (the site just picked) replaces the picker opens
    # nothing: open it again, as a user would, until its option is shown.
    for attempt in range(3):
        await page.click(f"#{picker}")
        try:
            await page.get_by_role("option", name=option, exact=True).click(timeout=TIMEOUT_MS // 3)
            break
        except PlaywrightTimeoutError:
            if attempt == 2:
                raise
            await page.keyboard.press("Escape")
    await expect(page.locator(f"#{picker}")).to_contain_text(option)


async def pick_period_and_comparison(page: Page) -> None:
    await pick_site(page, SITE)
    await choose(page, "preset", "Last 30 days")
    await choose(page, "compare", "vs same period last year")


async def expect_compared_numbers(page: Page, server: DashboardServer) -> None:
    label = page.locator("#period-range")
    await expect(label).to_have_attribute("data-timezone", ZONE)
    start = datetime.fromisoformat(await label.get_attribute("data-start") or "")
    assert start.astimezone(ZoneInfo(ZONE)).time() == datetime.min.time(), "a Berlin midnight"
    # compared with the same local dates a year before (the attribute follows the pickers)
    year_before = start.astimezone(ZoneInfo(ZONE)).date()
    year_before = year_before.replace(year=year_before.year - 1)
    await expect(label).to_have_attribute(
        "data-previous-start", local_midnight(year_before, ZoneInfo(ZONE)).isoformat()
    )
    answer = api(server, "/stats/aggregate", period="30d", compare="year_over_year")
    assert answer["comparison"]["pageviews"] > 0 and answer["pageviews"] > answer["comparison"]["pageviews"]
    for metric in display.METRICS:
        await expect(page.locator(f"#metric-{metric.key}")).to_have_attribute(
            "data-value", str(answer[metric.key])
        )
        change = display.change(metric, answer[metric.key], answer["comparison"][metric.key])
        await expect(page.locator(f"#change-{metric.key}")).to_have_text(change.text)
    pageviews = next(metric for metric in display.METRICS if metric.key == "pageviews")
    compared = display.metric_value(pageviews, answer["comparison"]["pageviews"])
    await expect(page.locator("#change-pageviews")).to_have_attribute(
        "title", f"same period last year: {compared}"
    )
    await expect(page.locator("#comparison-range")).to_contain_text(f"{start.year - 1}")
    # The chart: the compared period as a dashed line behind the period's, one point per local day.
    traces = await page.evaluate(
        "() => document.querySelector('#main-chart .js-plotly-plot').data"
        ".map(t => ({name: t.name, dash: t.line.dash, n: t.y.length}))"
    )
    assert traces[0] == {"name": "same period last year", "dash": "dash", "n": 30}, traces
    assert traces[1]["n"] == 30


@pytest_asyncio.fixture(loop_scope="session")
async def desktop(browser: Browser) -> AsyncIterator[BrowserContext]:
    context = await browser.new_context(viewport=DESKTOP, locale="en-GB")
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield context
    finally:
        await context.close()


async def test_owner_compares_the_last_30_days_with_last_year(
    dashboard: DashboardServer, desktop: BrowserContext
) -> None:
    page = await desktop.new_page()
    await sign_in(page, dashboard)
    await page.click("#preset")
    options = await page.get_by_role("option").all_inner_texts()
    for preset in (
        "Today",
        "Yesterday",
        "Month to date",
        "Last month",
        "Year to date",
        "Last 12 months",
        "All time",
    ):
        assert preset in options
    await page.keyboard.press("Escape")
    await pick_period_and_comparison(page)
    await expect_compared_numbers(page, dashboard)
    await screenshot(page, "desktop-period-comparison")
    # Month to date against the previous period: the label names the month before.
    await choose(page, "preset", "Month to date")
    await choose(page, "compare", "vs previous period")
    answer = api(dashboard, "/stats/aggregate", period="month", compare="previous_period")
    await expect(page.locator("#metric-pageviews")).to_have_attribute("data-value", str(answer["pageviews"]))


async def test_period_comparison_reads_on_a_phone(dashboard: DashboardServer, browser: Browser) -> None:
    context = await browser.new_context(
        viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True, locale="en-GB"
    )
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = await context.new_page()
        await sign_in(page, dashboard)
        await pick_period_and_comparison(page)
        await expect_compared_numbers(page, dashboard)
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], width
        await screenshot(page, "phone-period-comparison")
    finally:
        await context.close()
