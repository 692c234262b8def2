"""Imported history in the dashboard: a site owner who imported a Plausible export with
`tally import` sees the imported days of the period in a card marked "Imported", next to the
log's numbers (which stay the log's), with the numbers the stats API adds with include.imports;
removing the file in the Import history panel takes its days out again.
Screenshots (desktop 1280 wide, phone 390 wide) go to test-artifacts/screenshots/."""

from __future__ import annotations

import os
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, expect

from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.browser.test_dashboard import DESKTOP, PHONE, SCREENSHOTS, archive, open_site
from tests.fixtures.browser import open_overview, open_settings
from tests.fixtures.cli import run_tally
from tests.fixtures.dashboard_server import DashboardServer
from tests.fixtures.events import page_view

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

SITE = "imported.dashboard.test"


def plausible_export(folder: Path, days: list[str]) -> Path:
    path = folder / "plausible-export.zip"
    compact = [day.replace("-", "") for day in days]
    with zipfile.ZipFile(path, "w") as export:
        export.writestr(
            f"imported_visitors_{compact[0]}_{compact[-1]}.csv",
            "date,visitors,pageviews,bounces,visits,visit_duration\n"
            f"{days[0]},1200,3400,500,1500,90000\n{days[1]},800,1600,300,900,45000\n",
        )
    return path


async def test_imported_history_is_marked_beside_the_logs_numbers(
    browser: Browser, dashboard_server: DashboardServer, dashboard_settings: Settings, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    archive(dashboard_settings, [page_view(SITE, "v1", now - timedelta(minutes=30), "/")])
    add_site(connect(dashboard_settings), SITE)
    days = [(now - timedelta(days=back)).date().isoformat() for back in (3, 2)]
    env = os.environ | dashboard_settings.environment()
    answer = run_tally(env, "import", SITE, str(plausible_export(tmp_path, days)), "--from", "plausible")
    assert answer.returncode == 0, answer.stderr

    page = await browser.new_page(viewport=DESKTOP)
    await open_site(page, dashboard_server, SITE)  # the default period: the last 7 days
    card = page.locator("#imported-history")
    await expect(card.locator(".imported-marker")).to_have_text("Imported")
    await expect(card).to_contain_text(f"history from Plausible, {days[0]} to {days[1]}")
    await expect(page.locator("#imported-numbers")).to_have_text(
        "2,000 visitors · 5,000 page views · 2,400 visits · 33% bounce rate"
    )
    await expect(page.locator("#metric-visitors")).to_have_text("1")  # the log's own, unchanged

    first, last = days[0], (now - timedelta(days=1)).date().isoformat()
    response = httpx.post(
        f"{dashboard_server.url}/api/v2/query",
        json={"site_id": SITE, "metrics": ["visitors", "pageviews"], "date_range": [first, last],
              "include": {"imports": True}},
        headers={"Authorization": f"Bearer {dashboard_server.api_key}"},
        timeout=30,
    )  # fmt: skip
    assert response.json()["results"][0]["metrics"] == [2000, 5000]

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.locator("#imported-history").click()  # closes the site menu before the picture
    await page.screenshot(path=str(SCREENSHOTS / "imports-desktop.png"))
    await page.set_viewport_size(PHONE)
    await expect(page.locator(".imported-marker")).to_be_visible()
    await page.screenshot(path=str(SCREENSHOTS / "imports-phone.png"), full_page=True)

    # The Import history panel lists the file; removing it takes the days out of every report.
    await page.set_viewport_size(DESKTOP)
    await open_settings(page)
    listed = page.locator("#import-files .imported-file")
    await expect(listed).to_have_count(1)
    await expect(listed).to_contain_text(f"imported_visitors_{days[0].replace('-', '')}")
    await listed.get_by_role("button", name="Remove").click()
    await expect(page.locator("#import-files")).to_have_text("Nothing imported yet.")
    await open_overview(page)
    await expect(card.locator(".imported-marker")).to_have_count(0)
    await expect(page.locator("#metric-visitors")).to_have_text("1")
    response = httpx.post(
        f"{dashboard_server.url}/api/v2/query",
        json={
            "site_id": SITE,
            "metrics": ["visitors"],
            "date_range": [first, last],
            "include": {"imports": True},
        },
        headers={"Authorization": f"Bearer {dashboard_server.api_key}"},
        timeout=30,
    )
    assert response.json()["results"][0]["metrics"] == [0]  # the range ends yesterday: no event of its own
    assert response.json()["meta"]["imports_skip_reason"] == "no_imported_data"
    await page.close()
