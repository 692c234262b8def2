"""The dashboard's first load in a real browser (Debian's Chromium, the real dashboard server and
store): a site's numbers start loading with the page, and sections nobody has opened wait.

The page comes with the site picker filled (no round trip for it before the Overview's
callbacks), and the Explore tab writes its starting query only once it is opened.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from playwright.async_api import Page, Request, expect

from dashboard.chunk_preload import FIRST_SCREEN_CHUNKS
from storage.client import connect
from tally.settings import Settings
from tests.fixtures.browser import SIGN_IN_TIMEOUT_MS
from tests.fixtures.dashboard_server import DashboardServer
from tests.fixtures.events import archive_rows, page_view

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

SITE_OPTIONS = "..site.options...site.value.."


@pytest.fixture(scope="module")
def site(dashboard_settings: Settings) -> str:
    site = f"first-load-{uuid.uuid4().hex[:8]}.example.com"
    now = datetime.now(UTC) - timedelta(minutes=5)
    rows, columns = archive_rows([page_view(site, f"v{n}", now, "/pricing") for n in range(4)])
    connect(dashboard_settings).insert("events", rows, column_names=columns)
    return site


async def sign_in_and_read(page: Page, server: DashboardServer, site: str) -> None:
    """Sign in as the operator, pick the module's site and wait for its numbers."""
    await page.goto(server.url + "/")
    await page.fill("#password", server.password)
    await page.click("button[type=submit]")
    # The picker is filled as the page arrives (its lazily loaded chunk: see sign_in); the chosen
    # site's numbers follow.
    await expect(page.locator("#site")).not_to_contain_text("Pick a site", timeout=SIGN_IN_TIMEOUT_MS)
    await page.click("#site")
    await page.locator("input.dash-dropdown-search").fill(site)
    await page.get_by_role("option", name=site, exact=True).click()
    await expect(page.locator("#metric-visitors")).to_have_attribute("data-value", "4")


async def test_numbers_load_with_the_page_and_explore_waits_until_opened(
    dashboard_server: DashboardServer, page: Page, site: str
) -> None:
    outputs: list[str] = []

    def callback(request: Request) -> None:
        if "/_dash-update-component" in request.url:
            outputs.append(json.loads(request.post_data or "{}").get("output", ""))

    page.on("request", callback)
    await sign_in_and_read(page, dashboard_server, site)
    assert SITE_OPTIONS not in outputs  # no round trip for the sites before the numbers

    # Explore, never opened: no starting query written, no totals counted.
    await expect(page.locator("#explore-sql")).to_have_value("")
    await expect(page.locator("#explore-raw-totals")).to_have_text("")
    await page.get_by_role("option", name="Explore").click()
    await expect(page.locator("#explore-sql")).to_contain_text(f"site = '{site}'")
    await expect(page.locator("#explore-raw-totals")).to_contain_text(re.compile(r"\b4 page views"))


async def test_the_pickers_and_charts_code_loads_with_the_page_not_behind_its_callbacks(
    dashboard_server: DashboardServer, page: Page, site: str
) -> None:
    """dcc's dropdown, date picker and graph chunks are preloaded (dashboard/chunk_preload.py):
    each is asked for once, with the page, before the renderer asks for the layout (otherwise only
    once the layout has come and is rendered: on a loaded server the layout takes seconds, and the
    header's site picker waited for both in turn)."""
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    await page.goto(dashboard_server.url + "/")
    await page.fill("#password", dashboard_server.password)
    await page.click("button[type=submit]")
    await expect(page.locator("#site")).not_to_contain_text("Pick a site", timeout=SIGN_IN_TIMEOUT_MS)
    await page.wait_for_load_state("networkidle")
    layout = next(n for n, url in enumerate(requests) if url.endswith("/_dash-layout"))
    for chunk in FIRST_SCREEN_CHUNKS:
        asked = [n for n, url in enumerate(requests) if url.endswith(f"/dash/dcc/{chunk}.js")]
        assert len(asked) == 1, (chunk, asked)
        assert asked[0] < layout, (chunk, asked, layout)


async def test_settings_panels_read_the_store_only_once_the_settings_view_opens(
    dashboard_server: DashboardServer, page: Page, site: str
) -> None:
    """The Settings view's lists (goals, exclusions, team, alerts, what-if, ...) are asked for
    when the operator opens it, not with the Overview nor on a change of site elsewhere: a hidden
    view costs the server no request (17 of the first load's 61 before)."""
    asked: list[dict] = []

    def callback(request: Request) -> None:
        if "/_dash-update-component" in request.url:
            asked.append(json.loads(request.post_data or "{}"))

    def settings_reads() -> list[str]:
        return [
            body.get("output", "")
            for body in asked
            if any(
                isinstance(item, dict) and item.get("id") == "settings-site"
                for item in body.get("inputs", [])
            )
        ]

    page.on("request", callback)
    await sign_in_and_read(page, dashboard_server, site)
    await page.wait_for_load_state("networkidle")
    assert asked and settings_reads() == []  # the Overview's callbacks went; none of the Settings view's
    assert not await page.locator("#exclusions-list").text_content()  # hidden, and never filled

    await page.locator("#tabs").get_by_text("Settings", exact=True).click()
    await expect(page.locator("#exclusions-list")).to_contain_text("Nothing excluded")
    assert any("exclusions-list" in output for output in settings_reads())
