"""The Retention tab in a real browser (Debian's Chromium) against the real dashboard server and
ClickHouse engine: a site owner whose site has monthly visitor ids opens the tab and sees the
weekly cohorts the stats API gives — a row per week with its visitors — and the identity the
numbers rest on.

Screenshot (desktop 1280 wide) to test-artifacts/screenshots/ (`make screenshots` copies them to
docs/screenshots/).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest
from playwright.async_api import Browser, expect

from storage.client import connect
from storage.sites import add_site
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.browser.test_dashboard import DESKTOP, TIMEOUT_MS, api, open_site, screenshot
from tests.fixtures.dashboard_server import DashboardServer
from tests.fixtures.events import archive_rows, page_view

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

SITE = "browser-retention.example.com"


def returning_traffic(now: datetime) -> list[PageViewEvent]:
    """Six visitors first seen two weeks ago (UTC weeks: the site's zone), four of them back last
    week, two of those this week; three new last week."""
    monday = datetime.combine(now.date() - timedelta(days=now.weekday()), datetime.min.time(), UTC)
    two_weeks_ago, last_week = monday - timedelta(days=13, hours=-10), monday - timedelta(days=6, hours=-10)
    this_week = now - timedelta(minutes=1)
    events = []
    for index in range(6):
        visitor = f"{SITE}-v{index}"
        events.append(page_view(SITE, visitor, two_weeks_ago + timedelta(minutes=index), "/"))
        if index < 4:
            events.append(page_view(SITE, visitor, last_week + timedelta(minutes=index), "/pricing"))
        if index < 2:
            events.append(page_view(SITE, visitor, this_week, "/signup"))
    events += [
        page_view(SITE, f"{SITE}-new{index}", last_week + timedelta(hours=2), "/") for index in range(3)
    ]
    return events


@pytest.fixture(scope="module")
def dashboard(dashboard_server: DashboardServer, dashboard_settings: Settings) -> DashboardServer:
    client = connect(dashboard_settings)
    add_site(client, SITE)
    rows, columns = archive_rows(returning_traffic(datetime.now(UTC)))
    client.insert("events", rows, column_names=columns)
    chosen = httpx.put(
        f"{dashboard_server.url}/api/v1/identity",
        params={"site": SITE},
        json={"rotation": "monthly"},
        headers={"Authorization": f"Bearer {dashboard_server.api_key}"},
        timeout=30,
    )
    assert chosen.status_code == 200, chosen.text
    return dashboard_server


async def test_site_owner_reads_weekly_cohorts_and_the_identity_they_rest_on(
    dashboard: DashboardServer, browser: Browser
) -> None:
    answer = api(dashboard, "/stats/retention", site_id=SITE, weeks="12")
    assert isinstance(answer, dict)
    cohorts = [c for c in answer["cohorts"] if c["visitors"]]
    assert [(c["visitors"], c["returning"][:2]) for c in cohorts[:2]] == [(6, [4, 2]), (3, [0])]
    context = await browser.new_context(viewport=DESKTOP, locale="en-GB")
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = await context.new_page()
        await open_site(page, dashboard, SITE)
        await page.get_by_role("option", name="Retention", exact=True).click()
        await expect(page.locator("#retention-identity-lines")).to_have_attribute("data-rotation", "monthly")
        await expect(page.locator("#retention-identity-lines")).to_contain_text("Visitor ids rotate daily")
        for cohort in cohorts:  # a row per cohort, labelled with its week and its visitors
            label = f"{cohort['week']} · {cohort['visitors']}"
            await expect(page.locator("#retention-heatmap .ytick text", has_text=label)).to_have_count(1)
        await screenshot(page, "retention-desktop")
    finally:
        await context.close()
