"""Annotations (issue 35) in a real browser (Debian's Chromium) against the real dashboard server
and the real ClickHouse engine: an admin adds a note in the Settings view's Annotations section
and the Overview's "Over time" chart shows its marker, its text on hover as written (not as
markup), and the live per-minute chart marks the notes of its hour the same way; a click on a
point of the "Over time" chart opens the admin's Annotations form with that date filled in; a
viewer sees the markers, no Annotations section and nothing to click. The chart with a hover label is
kept as docs/screenshots/annotations.png (`make screenshots`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, expect

from storage import annotations
from storage.client import connect
from storage.sites import add_site
from storage.users import set_password, set_role
from tally.settings import Settings
from tests.browser.screenshots import SCREENSHOTS
from tests.browser.test_dashboard import DESKTOP, archive, traffic
from tests.browser.test_dashboard_settings import sign_in_as
from tests.browser.test_dashboard_team import PASSWORD
from tests.fixtures.browser import TIMEOUT_MS, expect_no_settings, open_overview, open_settings
from tests.fixtures.dashboard_server import DashboardServer

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

SITE = "annotations.example.com"
ADMIN = "annotations-admin@example.com"
VIEWER = "annotations-viewer@example.com"
DEPLOY = "Deployed v2.4 (checkout rewrite)"
NOTE = "Launched <b>pricing</b> page"  # markup typed as text stays text
HOTFIX = "Hotfix 2.4.1 rolled out"  # in the live chart's hour
SCREENSHOT = SCREENSHOTS / "annotations.png"


def markers(chart: str) -> str:
    """A chart's layout annotations (the markers), as Plotly holds them in the page."""
    return f"(document.querySelector('#{chart} .js-plotly-plot')?.layout?.annotations || [])"


MARKERS = markers("main-chart")


@pytest.fixture(scope="module")
def dashboard(dashboard_server: DashboardServer, dashboard_settings: Settings) -> DashboardServer:
    now = datetime.now(UTC)
    archive(dashboard_settings, traffic(SITE, now - timedelta(seconds=5), visitors=10, seed=35))
    client = connect(dashboard_settings)
    add_site(client, SITE)
    for email, role in ((ADMIN, "admin"), (VIEWER, "viewer")):
        set_password(client, email, PASSWORD)
        set_role(client, email, SITE, role)
    annotations.add(client, SITE, now - timedelta(days=2), DEPLOY, "ci@example.com", "deploy")
    annotations.add(client, SITE, now - timedelta(minutes=10), HOTFIX, "ci@example.com", "deploy")
    return dashboard_server


@pytest_asyncio.fixture(loop_scope="session")
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport=DESKTOP, locale="en-GB")
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield await context.new_page()
    finally:
        await context.close()


async def marker_texts(page: Page, wanted: str, chart: str = "main-chart") -> list[str]:
    """The hover texts of a chart's markers, once one holds `wanted`."""
    found = markers(chart)
    check = f"() => {found}.some(a => (a.hovertext || '').includes({json.dumps(wanted)}))"
    await page.wait_for_function(check, timeout=TIMEOUT_MS)
    return await page.evaluate(f"() => {found}.map(a => a.hovertext)")


async def test_an_admin_adds_a_note_in_settings_and_the_chart_marks_it(
    dashboard: DashboardServer, page: Page
) -> None:
    await sign_in_as(page, dashboard, ADMIN)
    await expect(page.locator("#site")).to_contain_text(SITE)
    await open_settings(page)
    section = page.locator("#annotations-panel")
    await expect(section.locator("h2")).to_have_text("Annotations")
    day = (datetime.now(UTC) - timedelta(days=4)).date()
    await section.locator("#annotation-date").fill(day.isoformat())
    await section.locator("#annotation-text").fill(NOTE)
    await section.locator("#annotation-add").click()
    await expect(section.locator("#annotation-status")).to_contain_text(f"Added a note on {day}")
    await expect(section.locator("#annotations-items")).to_contain_text(NOTE)  # as typed

    await open_overview(page)
    texts = await marker_texts(page, "Launched &lt;b&gt;pricing")  # escaped for Plotly: shown as typed
    assert any(DEPLOY in text for text in texts), texts
    marker = page.locator("#main-chart .annotation").first
    await expect(marker).to_be_visible()
    # Hovering the note's marker shows its text as written.
    note_marker = page.locator("#main-chart .annotation").nth(
        next(i for i, text in enumerate(texts) if "pricing" in text)
    )
    await note_marker.hover()
    await expect(page.locator("#main-chart .hoverlayer")).to_contain_text(NOTE)
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    await page.locator("#main-chart").screenshot(path=str(SCREENSHOT))


async def click_a_point(page: Page) -> str:
    """Click the middle point of the "Over time" chart's line, as a user does; its date."""
    chart = "document.querySelector('#main-chart .js-plotly-plot')"
    await page.wait_for_function(f"() => ({chart}?.data?.[1]?.x || []).length > 2", timeout=TIMEOUT_MS)
    x, left, top = await page.evaluate(
        f"""() => {{
            const gd = {chart}, line = gd.data[1], i = Math.floor(line.x.length / 2);
            const size = gd._fullLayout._size;
            return [String(line.x[i]), size.l + gd._fullLayout.xaxis.d2p(line.x[i]),
                    size.t + gd._fullLayout.yaxis.d2p(line.y[i])];
        }}"""
    )
    box = await page.locator("#main-chart .js-plotly-plot").bounding_box()
    assert box is not None
    await page.mouse.move(box["x"] + left, box["y"] + top)
    await page.mouse.click(box["x"] + left, box["y"] + top)
    return x[:10]


async def test_an_admin_clicks_a_point_of_the_chart_and_the_form_has_its_date(
    dashboard: DashboardServer, page: Page
) -> None:
    await sign_in_as(page, dashboard, ADMIN)
    await expect(page.locator("#site")).to_contain_text(SITE)
    await expect(page.locator("#chart-annotate-hint")).to_have_text(
        "Click a point of the chart to add a note on its date."
    )
    await marker_texts(page, DEPLOY)  # the chart is drawn
    day = await click_a_point(page)
    await expect(page.locator("#settings-section")).to_be_visible()
    section = page.locator("#annotations-panel")
    await expect(section.locator("#annotation-date")).to_have_value(day)
    await expect(section.locator("#annotation-status")).to_contain_text(f"Write what happened on {day}")
    await expect(section.locator("#annotation-text")).to_be_focused()
    await section.locator("#annotation-text").fill("Clicked from the chart")
    await section.locator("#annotation-add").click()
    await expect(section.locator("#annotation-status")).to_contain_text(f"Added a note on {day}")


async def test_a_viewer_sees_the_markers_and_no_annotations_section(
    dashboard: DashboardServer, page: Page
) -> None:
    await sign_in_as(page, dashboard, VIEWER)
    await expect(page.locator("#site")).to_contain_text(SITE)
    await marker_texts(page, DEPLOY)
    await expect_no_settings(page)  # the Annotations section with every other settings panel
    await expect(page.locator("#annotations-panel")).to_have_count(0)
    # Nothing to click: no hint under the chart, and a click leaves the Overview as it was.
    await expect(page.locator("#chart-annotate-hint")).to_have_text("")
    await click_a_point(page)
    await expect(page.locator("#overview-section")).to_be_visible()
    await expect(page.locator("#annotation-date")).to_have_count(0)


async def test_the_live_chart_marks_the_notes_of_its_hour(dashboard: DashboardServer, page: Page) -> None:
    await sign_in_as(page, dashboard, VIEWER)
    await expect(page.locator("#site")).to_contain_text(SITE)
    # The per-minute bars of the last hour: the hotfix of 10 minutes ago, not the older notes.
    texts = await marker_texts(page, HOTFIX, "pageviews-per-minute")
    assert not any(DEPLOY in text for text in texts), texts
    marker = page.locator("#pageviews-per-minute .annotation").first
    await expect(marker).to_be_visible()
    await marker.hover()
    await expect(page.locator("#pageviews-per-minute .hoverlayer")).to_contain_text(HOTFIX)
