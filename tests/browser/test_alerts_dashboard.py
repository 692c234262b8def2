"""The Alerts panel in a real browser (Debian's Chromium) against the real dashboard server and
the real ClickHouse engine: the operator adds a rule in the form (a bad webhook is refused with
the field named), sees it listed as the stats API lists it, sees the site's alerts with their
delivery's status, and removes the rule. A shared link's page has no Alerts panel.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from playwright.async_api import Page, expect

from storage import shared_links
from storage.alert_rules import record_outcome
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.browser.screenshots import SCREENSHOTS
from tests.browser.test_dashboard import api, archive, open_site, traffic
from tests.fixtures.browser import open_settings
from tests.fixtures.dashboard_server import DashboardServer
from tests.fixtures.events import page_view

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

SITE = "alerts-panel.example.com"
BACKTEST_SITE = "alerts-backtest-panel.example.com"
HOOK = "https://hooks.example.com/tally"


@pytest.fixture(scope="module")
def dashboard(dashboard_server: DashboardServer, dashboard_settings: Settings) -> DashboardServer:
    now = datetime.now(UTC) - timedelta(seconds=5)
    archive(dashboard_settings, traffic(SITE, now, visitors=20, seed=11))
    add_site(connect(dashboard_settings), SITE)
    return dashboard_server


async def add_rule_in_form(page: Page, threshold: str, webhook: str) -> None:
    await page.fill("#alert-minutes", "5")
    await page.fill("#alert-threshold", threshold)
    await page.fill("#alert-webhook", webhook)
    await page.click("#alert-add")


async def test_operator_adds_sees_and_removes_alert_rules_and_reads_alerts(
    page: Page, dashboard: DashboardServer, dashboard_settings: Settings
) -> None:
    await open_site(page, dashboard, SITE)
    await open_settings(page)
    await page.locator("#alerts-panel").scroll_into_view_if_needed()
    await expect(page.locator("#alert-rules")).to_have_text("No alert rules yet.")

    await add_rule_in_form(page, "100", "ftp://hooks.example.com/x")
    await expect(page.locator("#alert-status")).to_contain_text("webhook_url: a webhook URL starts with http")

    await add_rule_in_form(page, "100", HOOK)
    await expect(page.locator("#alert-status")).to_contain_text("page views in 5 min above 100")
    [rule] = api(dashboard, "/alerts", site=SITE)["rules"]
    assert rule["description"] == "page views in 5 min above 100"
    await expect(page.locator(".alert-rule")).to_have_count(1)
    await expect(page.locator(".alert-rule")).to_contain_text(rule["rule_id"])

    # An alert of that rule, as the delivery process records it once delivered.
    fired_at = datetime.now(UTC).replace(microsecond=0)
    alert = {
        "alert_id": "browser-alert-1",
        "rule_id": rule["rule_id"],
        "site": SITE,
        "kind": "pageviews_above",
        "window_start": fired_at.replace(minute=fired_at.minute // 5 * 5, second=0).isoformat(),
        "observed": 150,
        "threshold": 100,
        "fired_at": fired_at.isoformat(),
        "summary": "page views in 5 min above 100: 150",
    }
    record_outcome(connect(dashboard_settings), alert, "delivered", 2)
    table = page.locator("#alerts-table")
    await expect(table).to_contain_text("page views in 5 min above 100: 150")  # the panel refreshes
    await expect(table).to_contain_text("delivered after 2 attempts")
    await expect(table).to_contain_text(f"{fired_at:%Y-%m-%d %H:%M:%S}")

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / "alerts-panel-desktop.png"), full_page=True)

    await page.locator(".alert-rule button").click()
    await expect(page.locator("#alert-rules")).to_have_text("No alert rules yet.")
    assert api(dashboard, "/alerts", site=SITE)["rules"] == []


async def test_operator_tests_a_rule_against_history_before_saving_it(
    page: Page, dashboard: DashboardServer, dashboard_settings: Settings
) -> None:
    # Two bursts of 12 page views (5-minute windows starting at these moments) and a trickle.
    now = datetime.now(UTC)
    bursts = [(now - timedelta(hours=hours)).replace(minute=10, second=0, microsecond=0) for hours in (3, 30)]
    events = [
        page_view(BACKTEST_SITE, f"b{i}", at + timedelta(seconds=i), "/") for at in bursts for i in range(12)
    ]
    # One trickle view an hour at minute 40: never inside a burst's window, whatever the clock says.
    trickle = [(now - timedelta(hours=h)).replace(minute=40, second=0, microsecond=0) for h in range(1, 40)]
    events += [page_view(BACKTEST_SITE, f"t{i}", at, "/") for i, at in enumerate(trickle)]
    archive(dashboard_settings, events)
    add_site(connect(dashboard_settings), BACKTEST_SITE)

    await open_site(page, dashboard, BACKTEST_SITE)
    await open_settings(page)
    await page.locator("#alerts-panel").scroll_into_view_if_needed()
    await page.fill("#alert-minutes", "5")
    await page.fill("#alert-threshold", "10")
    await page.click("#alert-backtest")  # no webhook typed yet: a backtest sends nothing

    summary = page.locator("#alert-backtest-summary")
    await expect(summary).to_contain_text(
        "page views in 5 min above 10: would have fired 2 times in the last 7 days"
    )
    rows = page.locator("#alert-backtest-table tbody tr")
    await expect(rows).to_have_count(2)
    for row, at in zip(await rows.all(), sorted(bursts), strict=True):
        await expect(row).to_have_text(f"{at:%Y-%m-%d %H:%M}{at + timedelta(minutes=5):%Y-%m-%d %H:%M}1210")
    await expect(page.locator("#alert-rules")).to_have_text("No alert rules yet.")  # tested, not saved
    await page.locator("#alerts-panel").screenshot(path=str(SCREENSHOTS / "alerts-backtest-desktop.png"))

    await page.fill("#alert-threshold", "12")  # the bursts are 12: never above
    await page.click("#alert-backtest")
    await expect(summary).to_contain_text("would have fired 0 times")
    await page.fill("#alert-factor", "2")  # a threshold and a factor: the field at fault is named
    await page.click("#alert-backtest")
    await expect(page.locator("#alert-backtest-result")).to_contain_text("threshold: pageviews_above takes")


async def test_a_shared_view_has_no_alerts_panel(
    page: Page, dashboard: DashboardServer, dashboard_settings: Settings
) -> None:
    created = shared_links.create_link(connect(dashboard_settings), SITE, "", None)
    await page.goto(dashboard.url + created.path())
    await expect(page.locator("#site")).to_contain_text(SITE)
    await expect(page.locator("#alerts-panel")).to_have_count(0)
