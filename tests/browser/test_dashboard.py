"""The dashboard in a real browser (Debian's Chromium) against the real dashboard server
(`python -m dashboard.app`) and the real ClickHouse engine: what a site owner does every
morning — sign in, pick a site, read the numbers, filter by a page, explore the raw
archive, download it, sign out. Numbers on the page are checked against the stats API.

Screenshots (desktop 1280 x 800, phone 390 x 844) go to test-artifacts/screenshots/.
"""

from __future__ import annotations

import csv
import io
import json
import random
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Browser, BrowserContext, Page, Route, expect

from storage.client import connect
from storage.rate_limits import rate_limit_status
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.browser.screenshots import SCREENSHOTS
from tests.fixtures.browser import SIGN_IN_TIMEOUT_MS, TIMEOUT_MS
from tests.fixtures.dashboard_server import DashboardServer
from tests.fixtures.events import (
    CLIENTS,
    COUNTRIES,
    LANGUAGES,
    PATHS,
    REFERRER_DOMAINS,
    SCREEN_WIDTHS,
    UTM_CAMPAIGNS,
    UTM_CONTENTS,
    UTM_MEDIUMS,
    UTM_SOURCES,
    UTM_TERMS,
    archive_rows,
    page_view,
)

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

SITE = "browser-dashboard.example.com"
BUSIER_SITE = "busier-dashboard.example.com"  # listed first, so picking SITE is a real choice
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
METRICS = ["visitors", "pageviews", "sessions", "bounce_rate", "avg_session_duration_s"]


def traffic(site: str, now: datetime, visitors: int, seed: int) -> list[PageViewEvent]:
    """Sessions of 1-5 page views spread over the last 6 hours, a few of them live now."""
    rng = random.Random(seed)
    events = []
    for index in range(visitors):
        visitor = f"{site}-v{index}"
        start = now - timedelta(minutes=2) if index < 3 else now - timedelta(minutes=rng.uniform(10, 360))
        device, browser, os_name = rng.choice(CLIENTS)
        country = rng.choice(COUNTRIES)
        referrer = rng.choice(REFERRER_DOMAINS)
        utm = rng.choice(UTM_SOURCES)
        # The issue-16 dimensions, from a generator of their own (the draws above stay as they were).
        more = random.Random(seed * 1000 + index)
        campaign = {
            "utm_medium": more.choice(UTM_MEDIUMS),
            "utm_campaign": more.choice(UTM_CAMPAIGNS),
            "utm_content": more.choice(UTM_CONTENTS),
            "utm_term": more.choice(UTM_TERMS),
        }
        client = {"language": more.choice(LANGUAGES), "screen_width": more.choice(SCREEN_WIDTHS)}
        at = start
        for step in range(1 if index < 3 else rng.choice([1, 1, 2, 3, 5])):
            path = PATHS[min(int(rng.paretovariate(1.2)) - 1, len(PATHS) - 1)]
            events.append(
                page_view(
                    site,
                    visitor,
                    at,
                    path,
                    referrer_domain=referrer if step == 0 else "",
                    utm_source=utm if step == 0 else "",
                    **(campaign if step == 0 else {}),
                    **client,
                    country=country,
                    device=device,
                    browser=browser,
                    os=os_name,
                )
            )
            at += timedelta(minutes=rng.uniform(0.5, 8))
    return [event for event in events if event.ts <= now]


def archive(settings: Settings, events: list[PageViewEvent]) -> None:
    rows, columns = archive_rows(events)
    connect(settings).insert("events", rows, column_names=columns)


@pytest.fixture(scope="module")
def dashboard(dashboard_server: DashboardServer, dashboard_settings: Settings) -> DashboardServer:
    now = datetime.now(UTC) - timedelta(seconds=5)
    archive(dashboard_settings, traffic(BUSIER_SITE, now, visitors=120, seed=1))
    archive(dashboard_settings, traffic(SITE, now, visitors=60, seed=2))
    rate_limit_windows(dashboard_settings, now)
    return dashboard_server


def rate_limit_windows(settings: Settings, now: datetime) -> None:
    """What the stream jobs write for one client over the limit and one under it. The blocked
    client's count is far above anything the other tests on the shared store send, so it leads
    the busiest clients whatever ran before."""
    start = now.replace(second=0, microsecond=0) - timedelta(minutes=50)
    end = start + timedelta(hours=1)
    client = connect(settings)
    # Counters are per client and minute of event time (the stream jobs' panes).
    pane_end = start + timedelta(minutes=1)
    client.insert(
        "rate_limit_counters",
        [["f00dfeed" * 8, start, pane_end, 150_000, 1], ["c0ffee00" * 8, start, pane_end, 12, 1]],
        column_names=["ip_hash", "window_start", "window_end", "pageviews", "batch_id"],
    )
    client.insert(
        "rate_limit_blocks",
        [["f00dfeed" * 8, start, end, 150_000, 1]],
        column_names=["ip_hash", "window_start", "window_end", "pageviews", "batch_id"],
    )


def api(server: DashboardServer, path: str, **params: str) -> object:
    """The stats API's answer, from the source the dashboard server reads (the archive)."""
    response = httpx.get(
        f"{server.url}/api/v1{path}",
        params={"source": "raw", **params},
        headers={"Authorization": f"Bearer {server.api_key}"},
        timeout=30,
    )
    response.raise_for_status()
    return response.json()


@pytest_asyncio.fixture(loop_scope="session")
async def desktop(browser: Browser) -> AsyncIterator[BrowserContext]:
    context = await browser.new_context(viewport=DESKTOP, accept_downloads=True, locale="en-GB")
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield context
    finally:
        await context.close()


async def sign_in(page: Page, server: DashboardServer) -> None:
    """Sign in with the operator's password, as far as the header's site picker."""
    errors = await sign_in_to_views(page, server)
    # The picker is a lazily loaded chunk, fetched behind the page's first callbacks over the
    # browser's six connections: on a loaded machine that queue takes longer than an expectation.
    try:
        await expect(page.locator("#site")).to_be_visible(timeout=SIGN_IN_TIMEOUT_MS)
    except AssertionError as missing:
        header = (await page.locator("header").inner_html())[:2000]
        raise AssertionError(
            f"no site picker; the page's errors: {errors[:20]}; header: {header}"
        ) from missing


async def sign_in_to_views(page: Page, server: DashboardServer) -> list[str]:
    """Sign in with the operator's password, as far as the view tabs (the page is rendered); what
    the page's scripts throw and the requests that fail from then on, for a failure message."""
    errors = page_errors(page)
    await page.goto(server.url + "/")
    await expect(page).to_have_url(re.compile(r"/login"))
    await page.fill("#password", server.password)
    await page.click("button[type=submit]")
    await expect(page.locator("#tabs")).to_be_visible(timeout=SIGN_IN_TIMEOUT_MS)
    return errors


def page_errors(page: Page) -> list[str]:
    """A list the page's script errors, failed requests and error answers are appended to."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(f"script: {str(error)[:300]}"))
    page.on("requestfailed", lambda request: errors.append(f"failed: {request.url[:200]} {request.failure}"))
    page.on(
        "response",
        lambda answer: errors.append(f"{answer.status}: {answer.url[:200]}") if answer.ok is False else None,
    )
    return errors


async def open_site(page: Page, server: DashboardServer, site: str) -> None:
    """Sign in with the operator's password through a bookmark, `/?site=site` (dashboard/bookmark.py):
    the sign-in sends the browser back to it, and the page opens on `site`, without rendering the
    busiest site first as `sign_in` then `pick_site` does."""
    errors = page_errors(page)
    await page.goto(f"{server.url}/?{urlencode({'site': site})}")
    await expect(page).to_have_url(re.compile(r"/login"))
    await page.fill("#password", server.password)
    await page.click("button[type=submit]")
    # The picker is a lazily loaded chunk (see sign_in).
    try:
        await expect(page.locator("#site")).to_contain_text(site, timeout=SIGN_IN_TIMEOUT_MS)
    except AssertionError as missing:
        header = (await page.locator("header").inner_html())[:2000]
        raise AssertionError(
            f"{site} not in the picker; the page's errors: {errors[:20]}; header: {header}"
        ) from missing


async def pick_site(page: Page, site: str) -> None:
    # The options come with the page (the viewer's sites, the busiest chosen: the placeholder is
    # gone once the page is rendered); a user opens the list once it is filled.
    await expect(page.locator("#site")).not_to_contain_text("Pick a site")
    await page.click("#site")
    # The list renders only the options in view: among the many sites of the suite's shared store
    # the one wanted may be out of it, so narrow it down by searching, as a user would. `fill` waits
    # for the list's search box (keys typed before it has focus are lost, and the list stays whole).
    await page.locator("input.dash-dropdown-search").fill(site)
    await page.get_by_role("option", name=site, exact=True).click()
    await expect(page.locator("#site")).to_contain_text(site)


async def period_shown(page: Page) -> dict[str, str]:
    label = page.locator("#period-range")
    await expect(label).to_be_visible()
    start = await label.get_attribute("data-start")
    end = await label.get_attribute("data-end")
    assert start and end
    return {"from": start, "to": end}


async def expect_metrics(page: Page, expected: dict[str, float]) -> None:
    """Every top-line number on the page is the API's (waits while callbacks catch up)."""
    for metric in METRICS:
        await expect(page.locator(f"#metric-{metric}")).to_have_attribute(
            "data-value", _as_data_value(expected[metric])
        )
    await expect(page.locator("#metric-visitors")).to_have_text(f"{int(expected['visitors']):,}")
    await expect(page.locator("#metric-pageviews")).to_have_text(f"{int(expected['pageviews']):,}")


def _as_data_value(value: float) -> str:
    return str(value)


async def screenshot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.wait_for_timeout(600)  # let charts finish their transition
    await page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


async def test_site_owner_reads_filters_explores_and_signs_out(
    dashboard: DashboardServer, dashboard_settings: Settings, desktop: BrowserContext, tmp_path: Path
) -> None:
    page = await desktop.new_page()

    # A wrong password is refused with a message; the right one opens the dashboard.
    await page.goto(dashboard.url + "/")
    await page.fill("#password", "not-the-password")
    await page.click("button[type=submit]")
    await expect(page.locator(".error")).to_have_text("Wrong password.")
    await sign_in(page, dashboard)

    await pick_site(page, SITE)
    period = await period_shown(page)
    expected = api(dashboard, "/stats/aggregate", site=SITE, **period)
    assert isinstance(expected, dict) and expected["pageviews"] > 0
    await expect_metrics(page, expected)
    await expect(page.locator("#live-visitors")).to_have_text(
        str(api(dashboard, "/stats/realtime", site=SITE)["visitors"])  # type: ignore[index]
    )

    # The top pages list is the breakdown API's, in its order.
    top_pages = api(dashboard, "/stats/breakdown", site=SITE, by="path", **period)
    assert isinstance(top_pages, list)
    await expect(page.locator("#pages-list .breakdown-link")).to_have_text(
        [row["value"] for row in top_pages]
    )
    await expect(page.locator("#country-map .choroplethlocation").first).to_be_attached()
    # The panel counts every client blocked in the store (other tests on it block some too).
    blocked_now = rate_limit_status(connect(dashboard_settings), datetime.now(UTC)).blocked_now
    assert blocked_now >= 1
    await expect(page.locator("#blocked-now")).to_have_text(f"{blocked_now:,}")
    await expect(page.locator("#rate-limits .breakdown-row").first).to_contain_text("f00dfeedf0 blocked")
    await screenshot(page, "desktop-overview")

    # Clicking a page filters the whole dashboard; the chip says so, and removing it restores.
    await page.locator("#pages-list .breakdown-link", has_text=re.compile(r"^/pricing$")).click()
    chip = page.locator("#filter-chips .chip")
    await expect(chip).to_have_count(1)
    await expect(chip).to_contain_text("Page is /pricing")
    filtered = api(
        dashboard, "/stats/aggregate", site=SITE, filters=json.dumps({"path": "/pricing"}), **period
    )
    assert isinstance(filtered, dict) and 0 < filtered["pageviews"] < expected["pageviews"]
    await expect_metrics(page, filtered)
    await expect(page.locator("#pages-list .breakdown-link")).to_have_text(["/pricing"])
    await screenshot(page, "desktop-filtered")
    await chip.locator(".chip-remove").click()
    await expect(chip).to_have_count(0)
    await expect_metrics(page, expected)

    # Explore: the starting query for the site and period, run read-only, shown and downloaded.
    await page.get_by_role("option", name="Explore").click()
    await expect(page.locator("#explore-sql")).to_contain_text(f"site = '{SITE}'")
    await page.locator("#explore-limit").click()
    await page.get_by_role("option", name="1,000").click()
    await expect(page.locator("#explore-sql")).to_contain_text("LIMIT 1000")
    await page.click("#explore-run")
    rows = page.locator("#explore-table tbody tr")
    await expect(rows).to_have_count(int(expected["pageviews"]))
    await expect(page.locator("#explore-status")).to_contain_text(f"{int(expected['pageviews']):,} rows")
    await expect(page.locator("#explore-raw-totals")).to_contain_text(
        f"{int(expected['pageviews']):,} page views"
    )
    await screenshot(page, "desktop-explore")
    async with page.expect_download() as download_info:
        await page.click("#explore-download-button")
    download = await download_info.value
    assert download.suggested_filename == "tally-explore.csv"
    saved = tmp_path / "explore.csv"
    await download.save_as(saved)
    table = list(csv.reader(io.StringIO(saved.read_text())))
    assert table[0] == [
        "ts",
        "path",
        "referrer_domain",
        "utm_source",
        "country",
        "device",
        "browser",
        "os",
        "visitor_id",
    ]
    assert len(table) - 1 == expected["pageviews"]
    assert {row[-1] for row in table[1:]} <= {f"{SITE}-v{i}" for i in range(60)}
    assert sorted(row[1] for row in table[1:]) == sorted(
        value
        for row in api(dashboard, "/stats/breakdown", site=SITE, by="path", limit="100", **period)  # type: ignore[union-attr]
        for value in [row["value"]] * row["pageviews"]
    )

    # A query that writes is refused with ClickHouse's reason, not a traceback.
    await page.fill("#explore-sql", "DROP TABLE events")
    await page.click("#explore-run")
    await expect(page.locator("#explore-status .notice-error")).to_contain_text("refused")

    # Signing out ends the session: the dashboard asks for the password again.
    await page.click("#logout")
    await expect(page).to_have_url(re.compile(r"/login"))
    await page.goto(dashboard.url + "/")
    await expect(page).to_have_url(re.compile(r"/login"))
    assert (await page.request.post(dashboard.url + "/_dash-update-component", data="{}")).status == 401


async def test_dashboard_reads_on_a_phone(dashboard: DashboardServer, browser: Browser) -> None:
    context = await browser.new_context(
        viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True, locale="en-GB"
    )
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = await context.new_page()
        await open_site(page, dashboard, SITE)
        period = await period_shown(page)
        await expect_metrics(page, api(dashboard, "/stats/aggregate", site=SITE, **period))  # type: ignore[arg-type]
        # Nothing wider than the screen: no sideways scrolling on a phone.
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], width
        await screenshot(page, "phone-overview")
        await page.get_by_role("option", name="Explore").click()
        await screenshot(page, "phone-explore")
    finally:
        await context.close()


# What an empty value reads as in each new panel (dashboard/display.py says so for the user).
EMPTY_AS = {
    "utm_medium": "(no UTM medium)",
    "utm_campaign": "(no UTM campaign)",
    "utm_content": "(no UTM content)",
    "utm_term": "(no UTM term)",
    "language": "(unknown)",
    "screen_size": "(unknown)",
}


def shown(server: DashboardServer, by: str, period: dict[str, str]) -> list[str]:
    """The breakdown API's values, in its order, as the panel writes them."""
    rows = api(server, "/stats/breakdown", site=SITE, by=by, **period)
    assert isinstance(rows, list) and rows, by
    return [row["value"] or EMPTY_AS[by] for row in rows]


async def expect_campaigns_languages_and_sizes(page: Page, server: DashboardServer) -> None:
    """Every tab of the Campaigns panel, the Languages panel and the Devices panel's Sizes tab
    list the breakdown API's values in its order, each a button that filters (session
    dimensions such as utm_* too: tests/browser/test_dashboard_segments.py clicks them)."""
    period = await period_shown(page)
    for label, by in (("Medium", "utm_medium"), ("Campaign", "utm_campaign"), ("Content", "utm_content"),
                      ("Term", "utm_term")):  # fmt: skip
        await page.locator("#campaigns-by label", has_text=label).click()
        await expect(page.locator("#campaigns-list .breakdown-header")).to_contain_text(
            by.replace("utm_", "UTM ")
        )
        await expect(page.locator("#campaigns-list .breakdown-link")).to_have_text(shown(server, by, period))
    await expect(page.locator("#languages-list .breakdown-link")).to_have_text(
        shown(server, "language", period)
    )
    await page.locator("#devices-by label", has_text="Sizes").click()
    await expect(page.locator("#devices-list .breakdown-link")).to_have_text(
        shown(server, "screen_size", period)
    )


async def test_campaigns_languages_and_screen_sizes_show_the_api_breakdowns(
    dashboard: DashboardServer, desktop: BrowserContext, browser: Browser
) -> None:
    page = await desktop.new_page()
    await open_site(page, dashboard, SITE)
    await expect_campaigns_languages_and_sizes(page, dashboard)
    await page.locator("#campaigns-list").scroll_into_view_if_needed()
    await screenshot(page, "desktop-campaigns-languages-sizes")

    # A screen size filters the dashboard like any event dimension.
    period = await period_shown(page)
    await page.locator("#devices-list .breakdown-link", has_text=re.compile(r"^Mobile$")).click()
    await expect(page.locator("#filter-chips .chip")).to_contain_text("Screen size is Mobile")
    await expect_metrics(
        page,
        api(
            dashboard, "/stats/aggregate", site=SITE, filters=json.dumps({"screen_size": "Mobile"}), **period
        ),  # type: ignore[arg-type]
    )

    phone = await browser.new_context(
        viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True, locale="en-GB"
    )
    phone.set_default_timeout(TIMEOUT_MS)
    try:
        page = await phone.new_page()
        await open_site(page, dashboard, SITE)
        await expect_campaigns_languages_and_sizes(page, dashboard)
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], width
        await screenshot(page, "phone-campaigns-languages-sizes")
    finally:
        await phone.close()


def site_in_address(page: Page) -> list[str]:
    return parse_qs(urlsplit(page.url).query).get("site", [])


async def test_a_bookmarked_site_opens_on_it_and_picking_a_site_puts_it_in_the_address(
    dashboard: DashboardServer, desktop: BrowserContext
) -> None:
    # Not the busiest site (the store's, whatever other tests left there): the bookmark chooses it.
    page = await desktop.new_page()
    await open_site(page, dashboard, SITE)
    assert site_in_address(page) == [SITE]
    period = await period_shown(page)
    await expect_metrics(page, api(dashboard, "/stats/aggregate", site=SITE, **period))  # type: ignore[arg-type]

    # Picking another site writes it into the address (no reload: the page keeps its state).
    await page.evaluate("window.tallyNotReloaded = true")
    await pick_site(page, BUSIER_SITE)
    await expect(page).to_have_url(re.compile(r"[?&]site=" + re.escape(BUSIER_SITE) + r"(&|$)"))
    assert site_in_address(page) == [BUSIER_SITE]
    await expect_metrics(page, api(dashboard, "/stats/aggregate", site=BUSIER_SITE, **period))  # type: ignore[arg-type]
    assert await page.evaluate("window.tallyNotReloaded") is True

    # Back goes to the site before, in the address and in the picker.
    await page.go_back()
    await expect(page.locator("#site")).to_contain_text(SITE)
    assert site_in_address(page) == [SITE]
    await expect_metrics(page, api(dashboard, "/stats/aggregate", site=SITE, **period))  # type: ignore[arg-type]

    # The address is the bookmark: opened anew, it shows the site picked.
    await page.goto(f"{dashboard.url}/?{urlencode({'site': BUSIER_SITE})}")
    await expect(page.locator("#site")).to_contain_text(BUSIER_SITE)
    await expect_metrics(page, api(dashboard, "/stats/aggregate", site=BUSIER_SITE, **period))  # type: ignore[arg-type]

    # A browser that sends no Referer (the layout cannot see the address): the page chooses the
    # bookmarked site once it is there.
    async def without_referer(route: Route) -> None:
        headers = {name: value for name, value in route.request.headers.items() if name.lower() != "referer"}
        await route.continue_(headers=headers)

    await page.route("**/_dash-layout", without_referer)
    await page.goto(f"{dashboard.url}/?{urlencode({'site': SITE})}")
    await expect(page.locator("#site")).to_contain_text(SITE)
    await expect_metrics(page, api(dashboard, "/stats/aggregate", site=SITE, **period))  # type: ignore[arg-type]
    await page.unroute("**/_dash-layout")

    # A site nobody has is ignored: the page opens as without it, and the address names the site
    # shown instead (a bookmark taken now opens on it).
    await page.goto(f"{dashboard.url}/?site=nowhere.example")
    await expect(page.locator("#site")).not_to_contain_text("Pick a site")
    await expect(page.locator("#site")).not_to_contain_text("nowhere.example")
    await expect(page).not_to_have_url(re.compile("nowhere"))
    [shown] = site_in_address(page)
    await expect(page.locator("#site")).to_contain_text(shown)
