"""A site's own channel rules in the Sources panel's Channels tab, as a site owner sees them: the
rule's channel is a row with its sessions' visitors, and clicking it filters the Overview to them
(the numbers checked against the stats API)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from playwright.async_api import Browser, expect

from storage.channel_rules import add_rule, make_rule
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.browser.test_dashboard import DESKTOP, SCREENSHOTS, archive, open_site
from tests.browser.test_dashboard_channels_segments import channels_shown_and_answered
from tests.browser.test_dashboard_segments import click_row
from tests.fixtures.dashboard_server import DashboardServer
from tests.fixtures.events import page_view

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

SITE = "channel-rules.dashboard.test"
# visitor, referrer, utm_source, utm_medium: three sessions from the partner's domains
SESSIONS = [
    ("p1", "partner.io", "", ""),
    ("p2", "www.partner.io", "", ""),
    ("p3", "", "partner", "affiliate"),
    ("g1", "www.google.com", "", ""),
    ("dx", "", "", ""),
]


async def test_a_rules_channel_is_a_row_and_a_filter(
    browser: Browser, dashboard_server: DashboardServer, dashboard_settings: Settings
) -> None:
    now = datetime.now(UTC) - timedelta(minutes=20)
    archive(dashboard_settings, [
        page_view(SITE, visitor, now + timedelta(minutes=index), "/", referrer_domain=referrer,
                  utm_source=source, utm_medium=medium)
        for index, (visitor, referrer, source, medium) in enumerate(SESSIONS)
    ])  # fmt: skip
    client = connect(dashboard_settings)
    add_site(client, SITE)
    add_rule(client, SITE, make_rule("partner", 'Partner\'s "deals"'))  # quotes shown as written

    page = await browser.new_page(viewport=DESKTOP)
    await open_site(page, dashboard_server, SITE)
    await page.locator("#sources-by label", has_text="Channels").click()
    rows = page.locator("#sources-list .breakdown-row")
    await expect(rows.first.locator(".col-value")).to_have_text('Partner\'s "deals"')
    await expect(rows.first.locator(".col-number").first).to_have_text("3")
    shown, answered = await channels_shown_and_answered(page, dashboard_server, SITE)
    assert shown == answered
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.locator("#sources-list").scroll_into_view_if_needed()
    await page.screenshot(path=str(SCREENSHOTS / "channel-rules-desktop.png"))

    await click_row(page, "sources-by", "Channels", "sources-list", 'Partner\'s "deals"')
    await expect(page.locator("#filter-chips .chip")).to_contain_text('Partner\'s "deals"')
    await expect(page.locator("#metric-visitors")).to_have_text("3")
    await page.close()
