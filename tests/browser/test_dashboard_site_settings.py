"""The operator's Import history and Email reports panels, as a site owner clicks them: an upload
of a Plausible export (twice: once counted; a malformed one refused naming its row and column;
one of a day the site's own events cover, said not to be used),
and a subscription added and removed. Screenshots (desktop 1280 wide, phone 390 wide) go to
test-artifacts/screenshots/."""

from __future__ import annotations

import io
import zipfile
from datetime import UTC, datetime, timedelta

import pytest
from playwright.async_api import Browser, expect

from storage.client import connect
from storage.report_subscriptions import list_subscriptions
from storage.sites import add_site
from tally.settings import Settings
from tests.browser.test_dashboard import DESKTOP, PHONE, SCREENSHOTS, archive, open_site
from tests.fixtures.browser import open_settings
from tests.fixtures.dashboard_server import DashboardServer
from tests.fixtures.events import page_view

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

SITE = "settings.dashboard.test"
HEADER = "date,visitors,pageviews,bounces,visits,visit_duration\n"


def export(day: str, visitors: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive_file:
        compact = day.replace("-", "")
        archive_file.writestr(
            f"imported_visitors_{compact}_{compact}.csv", f"{HEADER}{day},{visitors},90,10,40,3600\n"
        )
    return buffer.getvalue()


async def test_upload_an_export_and_manage_email_reports(
    browser: Browser, dashboard_server: DashboardServer, dashboard_settings: Settings
) -> None:
    now = datetime.now(UTC)
    archive(dashboard_settings, [page_view(SITE, "v", now - timedelta(minutes=10), "/")])
    add_site(connect(dashboard_settings), SITE)
    day = (now - timedelta(days=2)).date().isoformat()

    page = await browser.new_page(viewport=DESKTOP)
    await open_site(page, dashboard_server, SITE)
    await open_settings(page)
    upload = page.locator("#import-upload input[type=file]")
    good = {"name": "plausible-export.zip", "mimeType": "application/zip", "buffer": export(day, "60")}
    await upload.set_input_files(good)
    await expect(page.locator("#import-result")).to_have_text(f"Imported 1 file(s): {day} to {day}.")
    await expect(page.locator("#imported-numbers")).to_contain_text("60 visitors · 90 page views · 40 visits")
    await upload.set_input_files({**good, "name": "again.zip"})
    await expect(page.locator("#import-result")).to_contain_text("Already imported, unchanged")
    bad = {"name": "bad.zip", "mimeType": "application/zip", "buffer": export(day, "sixty")}
    await upload.set_input_files(bad)
    await expect(page.locator("#import-status")).to_contain_text(
        "row 2, column 'visitors': 'sixty' is not a number"
    )
    await expect(page.locator("#imported-numbers")).to_contain_text("60 visitors")  # nothing changed
    # A day the site's own events already cover is imported but never counted twice: both say so.
    native_from, today = (now - timedelta(minutes=10)).date().isoformat(), now.date().isoformat()
    await upload.set_input_files({**good, "name": "today.zip", "buffer": export(today, "500")})
    await expect(page.locator("#import-result")).to_contain_text(
        f"are not used: the site's own events start on {native_from}"
    )
    await expect(page.locator(".imported-overlap")).to_have_text(
        f"; from {native_from} on, the site's own events are counted instead"
    )
    await expect(page.locator("#imported-numbers")).to_contain_text("60 visitors")

    await page.fill("#report-email", "owner@example.com")
    await page.locator("#report-frequency label", has_text="Monthly").click()
    await page.click("#report-subscribe")
    await expect(page.locator("#report-status")).to_have_text(
        "owner@example.com receives the monthly report."
    )
    await expect(page.locator(".report-subscription")).to_contain_text("owner@example.com · monthly")
    assert [(s.email, s.frequency) for s in list_subscriptions(connect(dashboard_settings), SITE)] == [
        ("owner@example.com", "monthly")
    ]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.locator("#reports-panel").scroll_into_view_if_needed()
    await page.screenshot(path=str(SCREENSHOTS / "site-settings-desktop.png"))
    await page.set_viewport_size(PHONE)
    await page.locator("#import-panel").scroll_into_view_if_needed()
    await page.screenshot(path=str(SCREENSHOTS / "site-settings-phone.png"))
    await page.locator(".report-subscription button", has_text="Unsubscribe").click()
    await expect(page.locator("#report-list")).to_have_text("No subscribers yet.")
    await page.close()
