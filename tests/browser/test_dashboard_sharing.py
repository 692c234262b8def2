"""Shared links in a real browser (Debian's Chromium) against the real dashboard server and the
real ClickHouse engine: a visitor without an account opens `/share/<token>` and reads one site's
Overview; Explore, the site switcher and every other site stay out of reach, also for Dash
callback requests written by hand; a password-protected link asks first; a revoked link stops
working for a page that is already open, on its next request.

Screenshots of the shared view (desktop 1280, phone 390) go to docs/screenshots/ (`make screenshots`).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Browser, BrowserContext, Page, Response, expect

from storage import shared_links
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.browser.screenshots import SCREENSHOTS
from tests.browser.test_dashboard import DESKTOP, PHONE, api, archive, open_site, period_shown, traffic
from tests.fixtures.browser import TIMEOUT_MS, expect_no_settings, open_settings
from tests.fixtures.dashboard_server import DashboardServer

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

SHARED_SITE = "shared-view.example.com"
OTHER_SITE = "not-shared.example.com"
TOP_METRICS = "top-metrics.children"


@pytest.fixture(scope="module")
def dashboard(dashboard_server: DashboardServer, dashboard_settings: Settings) -> DashboardServer:
    now = datetime.now(UTC) - timedelta(seconds=5)
    archive(dashboard_settings, traffic(OTHER_SITE, now, visitors=90, seed=7))
    archive(dashboard_settings, traffic(SHARED_SITE, now, visitors=40, seed=8))
    client = connect(dashboard_settings)
    add_site(client, SHARED_SITE)
    add_site(client, OTHER_SITE)
    return dashboard_server


def new_link(settings: Settings, label: str = "", password: str | None = None) -> shared_links.CreatedLink:
    return shared_links.create_link(connect(settings), SHARED_SITE, label, password)


@pytest_asyncio.fixture(loop_scope="session")
async def visitor(browser: Browser) -> AsyncIterator[BrowserContext]:
    """Someone without an account: a context of their own, no cookies."""
    context = await browser.new_context(viewport=DESKTOP, locale="en-GB")
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield context
    finally:
        await context.close()


def period_changed(response: Response) -> bool:
    """The answer to the callback a new period triggers: sent after the test's click, unlike a
    live-visitor refresh that may have left before it."""
    body = response.request.post_data_json if "/_dash-update-component" in response.url else None
    return isinstance(body, dict) and "period.data" in body.get("output", "")


async def expect_site_numbers(page: Page, server: DashboardServer) -> None:
    period = await period_shown(page)
    expected = api(server, "/stats/aggregate", site=SHARED_SITE, **period)
    assert isinstance(expected, dict) and expected["pageviews"] > 0
    await expect(page.locator("#metric-pageviews")).to_have_attribute(
        "data-value", str(expected["pageviews"])
    )
    await expect(page.locator("#metric-visitors")).to_have_attribute("data-value", str(expected["visitors"]))


async def test_shared_link_shows_one_sites_overview_and_nothing_else(
    dashboard: DashboardServer, dashboard_settings: Settings, visitor: BrowserContext
) -> None:
    created = new_link(dashboard_settings, label="board meeting")
    page = await visitor.new_page()
    answer = await page.goto(dashboard.url + created.path())
    assert answer is not None and answer.status == 200
    assert answer.headers["referrer-policy"] == "no-referrer"

    await expect(page.locator("#shared-banner")).to_contain_text(SHARED_SITE)
    await expect(page.locator("#site")).to_contain_text(SHARED_SITE)
    await expect_site_numbers(page, dashboard)
    # The date range picker works: another period, the API's numbers for it.
    before = await period_shown(page)
    await page.click("#preset")
    await page.get_by_role("option", name="Last 24 hours").click()
    await expect(page.locator("#period-range")).not_to_have_attribute("data-start", before["from"])
    await expect_site_numbers(page, dashboard)

    # No Explore or Funnel tab, no log-out button, no rate-limiting panel.
    await expect(page.get_by_role("radio", name="Explore")).to_have_count(0)
    await expect(page.get_by_role("radio", name="Funnel")).to_have_count(0)
    await expect(page.locator("#explore-sql")).to_have_count(0)
    await expect(page.locator("#logout")).to_have_count(0)
    await expect(page.locator("#rate-limits")).to_have_count(0)
    await expect_no_settings(page)  # no Settings tab, no settings panel, no API keys
    await expect(page.locator("#account-panel")).to_have_count(0)
    # The site list offers the shared site only.
    await expect(page.locator("#site")).to_be_disabled()

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.wait_for_timeout(600)  # let charts finish their transition
    await page.screenshot(path=str(SCREENSHOTS / "shared-view-desktop.png"), full_page=True)
    await page.set_viewport_size(PHONE)
    await expect_site_numbers(page, dashboard)
    await page.wait_for_timeout(600)
    await page.screenshot(path=str(SCREENSHOTS / "shared-view-phone.png"), full_page=True)

    # The operator's pages are not reachable with the shared session: / asks to sign in.
    await page.goto(dashboard.url + "/")
    await expect(page).to_have_url(re.compile(r"/login"))


async def test_callbacks_written_by_hand_cannot_reach_another_site_or_explore(
    dashboard: DashboardServer, dashboard_settings: Settings, visitor: BrowserContext
) -> None:
    created = new_link(dashboard_settings)
    page = await visitor.new_page()
    sent: list[dict] = []
    page.on(
        "request",
        lambda request: (
            sent.append(request.post_data_json) if "/_dash-update-component" in request.url else None
        ),
    )
    await page.goto(dashboard.url + created.path())
    await expect_site_numbers(page, dashboard)
    body = next(request for request in sent if TOP_METRICS in request["output"])

    # The page's own request, replayed with the session's cookie: answered.
    own = await page.request.post(dashboard.url + "/_dash-update-component", data=body)
    assert own.status == 200

    # The same request for another site: refused, whatever else it says.
    for entry in body["inputs"]:
        if entry["id"] == "site":
            entry["value"] = OTHER_SITE
    other = await page.request.post(dashboard.url + "/_dash-update-component", data=body)
    assert other.status == 403
    assert OTHER_SITE not in await other.text()

    # Explore's callbacks (raw SQL over the archive) are refused outright.
    explore = {
        "output": "..explore-table.children...explore-status.children...explore-last-sql.data..",
        "outputs": [  # well-formed (a malformed body is answered 400 before any role check)
            {"id": "explore-table", "property": "children"},
            {"id": "explore-status", "property": "children"},
            {"id": "explore-last-sql", "property": "data"},
        ],
        "inputs": [{"id": "explore-run", "property": "n_clicks", "value": 1}],
        "state": [{"id": "explore-sql", "property": "value", "value": "SELECT * FROM events"}],
    }
    refused = await page.request.post(dashboard.url + "/_dash-update-component", data=explore)
    assert refused.status == 403

    # The site list callback names the shared site only, though the archive holds others.
    options = await page.request.post(
        dashboard.url + "/_dash-update-component",
        data={
            "output": "..site.options...site.value..",
            "outputs": [{"id": "site", "property": "options"}, {"id": "site", "property": "value"}],
            "inputs": [{"id": "clock", "property": "n_intervals", "value": 1}],
            "state": [{"id": "site", "property": "value", "value": SHARED_SITE}],
        },
    )
    assert options.status == 200
    assert (await options.json())["response"]["site"]["options"] == [SHARED_SITE]

    # Without the session's cookie, nothing at all.
    assert httpx.post(dashboard.url + "/_dash-update-component", json=body, timeout=10).status_code == 401


async def test_password_protected_link_asks_first(
    dashboard: DashboardServer, dashboard_settings: Settings, visitor: BrowserContext
) -> None:
    created = new_link(dashboard_settings, password="correct horse battery")
    page = await visitor.new_page()
    await page.goto(dashboard.url + created.path())
    await expect(page.locator("#site")).to_have_count(0)
    await page.fill("#password", "wrong")
    await page.click("button[type=submit]")
    await expect(page.locator(".error")).to_have_text("Wrong password.")
    await page.fill("#password", "correct horse battery")
    await page.click("button[type=submit]")
    await expect(page.locator("#shared-banner")).to_contain_text(SHARED_SITE)
    await expect_site_numbers(page, dashboard)

    # Guessing is throttled as at /login: after 10 wrong answers even the right one waits. The
    # guesser comes from an address of its own (through the trusted loopback proxy): the limit is
    # per client network for 15 minutes, and later tests on this dashboard post from loopback.
    another = new_link(dashboard_settings, password="another secret")
    url = dashboard.url + another.path()
    with httpx.Client(timeout=30, headers={"X-Forwarded-For": "198.51.100.77"}) as guesser:
        answers = [guesser.post(url, data={"password": f"guess {n}"}).status_code for n in range(10)]
        assert answers == [401] * 10
        assert guesser.post(url, data={"password": "another secret"}).status_code == 429


async def test_revoked_link_stops_working_for_an_open_page(
    dashboard: DashboardServer, dashboard_settings: Settings, visitor: BrowserContext
) -> None:
    created = new_link(dashboard_settings, label="to be revoked")
    page = await visitor.new_page()
    await page.goto(dashboard.url + created.path())
    await expect_site_numbers(page, dashboard)

    shared_links.revoke_link(connect(dashboard_settings), SHARED_SITE, created.link.id)

    # The open page's next request (a new period) is answered 410 Gone.
    async with page.expect_response(period_changed) as next_answer:
        await page.click("#preset")
        await page.get_by_role("option", name="Last 30 days").click()
    assert (await next_answer.value).status == 410

    # Opening it again: gone for good.
    answer = await page.goto(dashboard.url + created.path())
    assert answer is not None and answer.status == 404
    await expect(page.get_by_role("alert")).to_contain_text("revoked")


async def test_operator_creates_and_revokes_a_link_from_the_share_panel(
    dashboard: DashboardServer, browser: Browser, visitor: BrowserContext
) -> None:
    operator_context = await browser.new_context(viewport=DESKTOP, locale="en-GB")
    operator_context.set_default_timeout(TIMEOUT_MS)
    try:
        operator = await operator_context.new_page()
        await open_site(operator, dashboard, SHARED_SITE)
        await open_settings(operator)
        await operator.fill("#share-label", "from the panel")
        await operator.click("#share-create")
        url = (await operator.locator("#share-new-url").text_content()) or ""
        assert re.fullmatch(re.escape(dashboard.url) + r"/share/[A-Za-z0-9_-]{43}", url), url
        row = operator.locator(".share-link", has_text="from the panel")
        await expect(row).to_have_count(1)

        viewer = await visitor.new_page()
        await viewer.goto(url)
        await expect_site_numbers(viewer, dashboard)

        await row.get_by_role("button", name="Revoke").click()
        await expect(row).to_contain_text("revoked")
        async with viewer.expect_response(period_changed) as answer:
            await viewer.click("#preset")
            await viewer.get_by_role("option", name="Last 30 days").click()
        assert (await answer.value).status == 410
    finally:
        await operator_context.close()
