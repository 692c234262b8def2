"""tracker.js in a real browser, against the real collector: what a visit puts on the log.

Each test's website is its own *.test origin, served by a local server (a different origin
than the collector, as on a customer's site), with the snippet loaded from the collector.
Every test ends by visiting an end-marker page of the same site from the same browser: the
same visitor, so the same Kafka partition. Once the marker is on the log, whatever the test
page sent before it has had its chance to arrive, so "exactly these events" (and "none")
can be asserted without sleeping.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import pytest
from aiokafka import AIOKafkaConsumer
from playwright.async_api import Browser, Page, Route

import collector
from dashboard.app import build_app
from storage import queries
from storage.client import connect
from storage.queries import PageEngagement, StatsQuery
from tally.event import PageViewEvent
from tally.settings import PROJECT_ROOT, Settings
from tests.fixtures.browser import VIEWPORT, Websites
from tests.fixtures.collector_server import register_site
from tests.integration.test_archiver import archive_until

pytestmark = pytest.mark.browser

TRACKER_JS = Path(collector.__file__).with_name("tracker.js")

# What a site owner embeds: every opt-in on, and allowed here because the browser is automated.
EVERY_OPTION = "data-allow-local data-outbound data-downloads"
# The queue documented in README.md for calls made before the snippet has loaded.
QUEUE_SNIPPET = "window.tally=window.tally||function(){(tally.q=tally.q||[]).push(arguments)}"
END_HOST = "end.test"
DEADLINE_S = 60
# Playwright's Chromium reports itself automated; this makes it look like a visitor's browser.
FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0"
HIDE_WEBDRIVER = "Object.defineProperty(Navigator.prototype, 'webdriver', {get: () => false})"

# A client-side router as SPA frameworks do it: same-site links become history.pushState.
SPA_ROUTER = """
<script>
  document.addEventListener('click', (event) => {
    const link = event.target.closest('a[href^="/"]');
    if (!link || link.hasAttribute('download')) return;
    event.preventDefault();
    history.pushState({}, '', link.getAttribute('href'));
    document.querySelector('h1').textContent = link.textContent;
  });
</script>
"""


def tracked_page(snippet_url: str, site: str, *, options: str, head: str = "", body: str = "") -> str:
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{site}</title>{head}
<script defer data-site="{site}" {options} src="{snippet_url}"></script>
</head><body><h1>{site}</h1>{body}</body></html>"""


@dataclass
class TrackedSite:
    """The test's own website, tracked by the snippet, and what reached the log for it."""

    domain: str
    page: Page
    websites: Websites
    collector_url: str
    settings: Settings

    def publish(self, path: str = "/", *, options: str = EVERY_OPTION, head: str = "", body: str = "") -> str:
        html = tracked_page(self.snippet_url, self.domain, options=options, head=head, body=body)
        return self.websites.publish(self.domain, path, html)

    @property
    def snippet_url(self) -> str:
        return f"{self.collector_url}/tracker.js"

    async def logged_events(self, expected: int, engagement: bool = False) -> list[PageViewEvent]:
        """The site's events on the log, once the end marker and at least `expected` others are
        in; the engagement events a page sends when hidden or left only if asked for."""
        await self._visit_end_marker()
        return await events_before_end_marker(self.settings, self.domain, expected, engagement)

    async def _visit_end_marker(self) -> None:
        # Another origin, so nothing the test put in the page's storage (an opt-out) applies.
        html = tracked_page(self.snippet_url, self.domain, options="data-allow-local")
        url = self.websites.publish(END_HOST, f"/{self.domain}", html)
        marker = await self.page.context.new_page()
        await marker.goto(url)
        await marker.wait_for_function("typeof tally === 'function'")
        await marker.close()


async def events_before_end_marker(
    settings: Settings, site: str, expected: int, engagement: bool = False
) -> list[PageViewEvent]:
    consumer = AIOKafkaConsumer(
        settings.pageviews_topic, bootstrap_servers=settings.kafka_bootstrap, auto_offset_reset="earliest"
    )
    await consumer.start()
    events: list[PageViewEvent] = []
    ended = False
    deadline = time.monotonic() + DEADLINE_S
    try:
        while not (ended and len(events) >= expected) and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                # Only this site's messages are parsed: the shared log also holds other tests'
                # malformed ones (the archiver's dead-letter tests), which are no PageViewEvent.
                mine = (record.value for record in records if site.encode() in record.value)
                for event in map(PageViewEvent.from_json, mine):
                    if event.site != site or (event.name == "engagement" and not engagement):
                        continue
                    if event.hostname == END_HOST:
                        ended = True
                    else:
                        events.append(event)
    finally:
        await consumer.stop()
    assert ended, f"the end marker of {site} never reached the log within {DEADLINE_S}s"
    return events


def times_archived(settings: Settings, site: str, event_id: UUID) -> int:
    rows = connect(settings).query(
        "SELECT count() FROM events WHERE site = {site:String} AND event_id = {id:UUID}",
        parameters={"site": site, "id": event_id},
    )
    return int(rows.result_rows[0][0])


def archived_page_views(settings: Settings, site: str) -> tuple[int, int]:
    """The site's page views in the archive: (rows, distinct event ids)."""
    count, unique = (
        connect(settings)
        .query(
            "SELECT count(), uniqExact(event_id) FROM events "
            "WHERE site = {site:String} AND name = 'pageview'",
            parameters={"site": site},
        )
        .result_rows[0]
    )
    return int(count), int(unique)


def described(events: list[PageViewEvent]) -> list[tuple[str, str, dict[str, str]]]:
    """Events as (name, url, props), sorted: beacons may reach the collector in any order."""
    return sorted((event.name, event.url, event.props) for event in events)


@pytest.fixture
def site(
    request: pytest.FixtureRequest, page: Page, websites: Websites, collector_url: str, settings: Settings
) -> TrackedSite:
    name = re.sub(r"[^a-z0-9]+", "-", request.node.name.removeprefix("test_"))[:40].strip("-")
    domain = f"{name}.test"
    register_site(settings, collector_url, domain)
    return TrackedSite(domain, page, websites, collector_url, settings)


async def test_page_load_is_one_pageview_with_url_path_referrer_and_width(
    site: TrackedSite, page: Page, websites: Websites
) -> None:
    landing = site.publish("/welcome")
    referring = websites.publish("news.test", "/", f'<a href="{landing}?utm_source=news">Tally</a>')
    await page.goto(referring)
    await page.click("a")
    await page.wait_for_url(f"{landing}?utm_source=news")

    [pageview] = await site.logged_events(expected=1)
    assert (pageview.name, pageview.url, pageview.hostname, pageview.path) == (
        "pageview",
        f"{landing}?utm_source=news",
        site.domain,
        "/welcome",
    )
    assert (pageview.referrer_domain, pageview.utm_source) == ("news.test", "news")
    assert pageview.screen_width == VIEWPORT["width"]


async def test_spa_navigation_is_a_pageview_per_new_path(site: TrackedSite, page: Page) -> None:
    links = '<a href="#features">Features</a> <a href="/pricing">Pricing</a>'
    home = site.publish("/", head=SPA_ROUTER, body=links)
    await page.goto(home)
    await page.click("text=Features")  # same path: not a new page
    await page.click("text=Pricing")  # pushState
    await page.evaluate("history.replaceState({}, '', '/pricing?plan=pro')")  # same path again
    await page.evaluate("history.back()")  # popstate, back on /

    events = await site.logged_events(expected=3)
    assert described(events) == [
        ("pageview", home, {}),
        ("pageview", f"{home}#features", {}),
        ("pageview", site.websites.url(site.domain, "/pricing"), {}),
    ]


async def test_hash_routes_are_pageviews_with_data_hash(site: TrackedSite, page: Page) -> None:
    home = site.publish("/", options=f"{EVERY_OPTION} data-hash", body='<a href="#/docs">Docs</a>')
    await page.goto(home)
    await page.click("text=Docs")

    events = await site.logged_events(expected=2)
    assert described(events) == [("pageview", home, {}), ("pageview", f"{home}#/docs", {})]
    assert [event.path for event in events] == ["/", "/#/docs"]


async def test_outbound_link_click_is_an_event_with_the_link_url(
    site: TrackedSite, page: Page, websites: Websites
) -> None:
    elsewhere = websites.publish("elsewhere.test", "/away", "<h1>elsewhere</h1>")
    links = f'<a href="/about">About</a> <a href="{elsewhere}">Elsewhere</a>'
    home = site.publish("/", head=SPA_ROUTER, body=links)
    await page.goto(home)
    await page.click("text=About")  # a link on the site: a pageview, not an outbound click
    await page.click("text=Elsewhere")
    await page.wait_for_url(elsewhere)  # the beacon outlives the page it left

    events = await site.logged_events(expected=3)
    assert described(events) == [
        ("Outbound Link: Click", site.websites.url(site.domain, "/about"), {"url": elsewhere}),
        ("pageview", home, {}),
        ("pageview", site.websites.url(site.domain, "/about"), {}),
    ]


async def test_download_link_click_is_a_file_download_event(
    site: TrackedSite, page: Page, websites: Websites
) -> None:
    report = websites.publish(
        site.domain,
        "/files/report.pdf",
        b"%PDF-1.4\n%%EOF\n",
        "application/pdf",
        {"Content-Disposition": 'attachment; filename="report.pdf"'},
    )
    home = site.publish("/", body='<a href="/files/report.pdf">Annual report</a>')
    await page.goto(home)
    async with page.expect_download() as download:
        await page.click("text=Annual report")
    assert (await download.value).suggested_filename == "report.pdf"

    events = await site.logged_events(expected=2)
    assert described(events) == [("File Download", home, {"url": report}), ("pageview", home, {})]


async def test_link_clicks_are_not_reported_without_their_opt_in(
    site: TrackedSite, page: Page, websites: Websites
) -> None:
    websites.publish(site.domain, "/files/report.pdf", b"%PDF-1.4\n%%EOF\n", "application/pdf")
    elsewhere = websites.publish("elsewhere.test", "/away", "<h1>elsewhere</h1>")
    links = f'<a href="/files/report.pdf" download>Annual report</a> <a href="{elsewhere}">Elsewhere</a>'
    home = site.publish("/", options="data-allow-local", body=links)
    await page.goto(home)
    async with page.expect_download():
        await page.click("text=Annual report")
    await page.click("text=Elsewhere")
    await page.wait_for_url(elsewhere)

    assert described(await site.logged_events(expected=1)) == [("pageview", home, {})]


async def test_custom_event_carries_props_as_strings_and_calls_back(site: TrackedSite, page: Page) -> None:
    signup = (
        "<button onclick=\"tally('signup', {props: {plan: 'pro', seats: 3},"
        " callback: () => document.body.dataset.signedUp = 'yes'})\">Sign up</button>"
    )
    home = site.publish("/", body=signup)
    await page.goto(home)
    await page.click("text=Sign up")
    await page.wait_for_selector("body[data-signed-up=yes]")

    events = await site.logged_events(expected=2)
    assert described(events) == [("pageview", home, {}), ("signup", home, {"plan": "pro", "seats": "3"})]


async def test_call_queued_before_the_snippet_loads_is_sent(site: TrackedSite, page: Page) -> None:
    # The built tracker.js has no byte to spare for a comment: README (and its source) documents it.
    readme = (PROJECT_ROOT / "README.md").read_text()
    assert QUEUE_SNIPPET in readme, "the queue snippet tested here is the one documented"
    queued = f"<script>{QUEUE_SNIPPET}; tally('signup', {{props: {{plan: 'pro'}}}})</script>"
    home = site.publish("/", head=queued)
    await page.goto(home)

    events = await site.logged_events(expected=2)
    assert described(events) == [("pageview", home, {}), ("signup", home, {"plan": "pro"})]


async def test_events_are_sent_with_fetch_keepalive_and_an_id_of_their_own(
    site: TrackedSite, page: Page
) -> None:
    # fetch, not sendBeacon: the tracker must see the answer to retry a failed send; keepalive
    # lets the request outlive the page (an outbound click, above).
    sent: list[tuple[str, str]] = []
    page.on("request", lambda request: sent.append((request.resource_type, request.post_data or "")))
    home = site.publish("/", head=SPA_ROUTER, body='<a href="/pricing">Pricing</a>')
    await page.goto(home)
    await page.click("text=Pricing")

    events = await site.logged_events(expected=2)
    bodies = [json.loads(body) for kind, body in sent if kind == "fetch"]
    # Leaving "/" for /pricing also sends "/"'s engagement: not one of the events counted here.
    ids = [UUID(body["i"]) for body in bodies if body["n"] != "engagement"]
    assert len(ids) == 2 and all(event_id.version == 4 for event_id in ids)
    assert sorted(event.event_id for event in events) == sorted(ids)


# Short names: the test's site is named after it, within 40 characters.
@pytest.mark.parametrize("failure", ["503", "reset"])
async def test_retried_send_is_archived_once(
    site: TrackedSite, page: Page, settings: Settings, failure: str
) -> None:
    """The collector takes the event, and its answer never reaches the browser: a proxy in
    between answers 503 (a timeout), or the connection is reset. The tracker sends it again with
    the same id; the log holds it twice, the archive once."""
    answers: list[int] = []

    async def lose_the_first_answer(route: Route) -> None:
        if answers:
            await route.continue_()
            return
        answers.append((await route.fetch()).status)  # the real collector took it
        if failure == "503":
            await route.fulfill(status=503, headers={"Access-Control-Allow-Origin": "*"}, body="{}")
        else:
            await route.abort("connectionreset")

    await page.route(f"{site.collector_url}/api/event", lose_the_first_answer)
    home = site.publish("/")
    await page.goto(home)

    sent_twice = await site.logged_events(expected=2)
    assert answers == [202]
    assert len(sent_twice) == 2 and len({event.event_id for event in sent_twice}) == 1
    [event_id] = {event.event_id for event in sent_twice}
    # the page view and the end marker (the engagement of the end marker's page, sent as it
    # closes, may come too)
    await archive_until(settings, site.domain, expected=2, rows=lambda s, d: archived_page_views(s, d)[0])
    assert archived_page_views(settings, site.domain) == (2, 2)
    assert times_archived(settings, site.domain, event_id) == 1


async def test_self_hosted_snippet_sends_to_data_api(
    site: TrackedSite, page: Page, websites: Websites
) -> None:
    # A site may serve the snippet itself (say, from its CDN) and name the collector.
    snippet = websites.publish(site.domain, "/js/t.js", TRACKER_JS.read_bytes(), "text/javascript")
    options = f'data-allow-local data-api="{site.collector_url}/api/event"'
    home = websites.publish(site.domain, "/", tracked_page(snippet, site.domain, options=options))
    await page.goto(home)

    assert described(await site.logged_events(expected=1)) == [("pageview", home, {})]


async def test_automated_browser_is_not_counted_without_allow_local(site: TrackedSite, page: Page) -> None:
    home = site.publish("/", options="data-outbound data-downloads")
    await page.goto(home)
    assert await page.evaluate("navigator.webdriver") is True
    await page.wait_for_function("typeof tally === 'function'")  # the snippet ran, and chose not to send
    await page.evaluate("tally('signup')")

    assert await site.logged_events(expected=0) == []


async def test_localhost_page_is_not_counted_without_allow_local(
    site: TrackedSite, page: Page, websites: Websites
) -> None:
    await page.add_init_script(HIDE_WEBDRIVER)
    html = tracked_page(site.snippet_url, site.domain, options="data-outbound data-downloads")
    await page.goto(websites.publish("127.0.0.1", f"/{site.domain}", html))
    await page.wait_for_function("typeof tally === 'function'")
    await page.evaluate("tally('signup')")

    assert await site.logged_events(expected=0) == []


async def test_opted_out_browser_sends_nothing_but_callbacks_still_run(site: TrackedSite, page: Page) -> None:
    await page.add_init_script("localStorage.tally_ignore = 'true'")
    home = site.publish("/", head=SPA_ROUTER, body='<a href="/pricing">Pricing</a>')
    await page.goto(home)
    await page.click("text=Pricing")
    await page.evaluate("tally('signup', {callback: () => document.body.dataset.calledBack = 'yes'})")
    await page.wait_for_selector("body[data-called-back=yes]")

    assert await site.logged_events(expected=0) == []


async def test_snippet_sets_no_cookie_and_stores_nothing(site: TrackedSite, page: Page) -> None:
    await page.add_init_script("localStorage.setItem('theme', 'dark')")  # the site's own
    home = site.publish("/", head=SPA_ROUTER, body='<a href="/pricing">Pricing</a>')
    await page.goto(home)
    await page.click("text=Pricing")
    await page.evaluate("tally('signup', {props: {plan: 'pro'}})")

    assert len(await site.logged_events(expected=3)) == 3  # the snippet did its work
    assert await page.context.cookies() == []
    assert await page.evaluate("[document.cookie, Object.keys(localStorage), sessionStorage.length]") == [
        "",
        ["theme"],
        0,
    ]


# A page three viewports tall: scrolled to its middle, the deepest point seen is two thirds down.
TALL_PAGE = '<div style="height: 2400px">a long read</div>'
DEPTH_SEEN = "Math.min(100, (scrollY + innerHeight) * 100 / document.body.scrollHeight | 0)"


async def test_page_scrolled_and_left_sends_an_engagement_event_that_is_archived(
    site: TrackedSite, page: Page, settings: Settings
) -> None:
    # Left by a client-side navigation: the page is still alive to send it. (Left by loading
    # another document, Chromium sends it too, but without the test's user agent override:
    # headless Chromium's own, which the collector drops as a bot.)
    home = site.publish("/article", head=SPA_ROUTER, body=f'<a href="/next">Next</a>{TALL_PAGE}')
    opened = time.monotonic()
    await page.goto(home)
    await page.wait_for_function("typeof tally === 'function'")
    # Scroll events are dispatched on the next frame, not by scrollTo: wait until one has been
    # delivered. Listeners run in the order they were added, so the tracker's has run by then;
    # scrolling back up before that frame would hide the deep point from it.
    await page.evaluate(
        "() => { window.scrolled = new Promise("
        "seen => document.addEventListener('scroll', seen, {once: true})) }"
    )
    await page.evaluate("window.scrollTo(0, 900)")
    await page.evaluate("window.scrolled")
    depth = await page.evaluate(DEPTH_SEEN)
    await page.evaluate("window.scrollTo(0, 0)")  # back up: the deepest point counts
    await page.wait_for_timeout(1000)  # a second of reading, so that there is engaged time
    await page.click("text=Next")
    stayed_ms = (time.monotonic() - opened) * 1000

    events = await site.logged_events(expected=3, engagement=True)
    assert sorted((event.name, event.path) for event in events) == [
        ("engagement", "/article"),
        ("pageview", "/article"),
        ("pageview", "/next"),
    ]
    [engaged] = [event for event in events if event.name == "engagement"]
    assert engaged.url == home and len({event.visitor_id for event in events}) == 1
    assert 50 <= depth == engaged.scroll_depth < 100
    assert 1000 <= engaged.engagement_ms <= stayed_ms

    await archive_until(settings, site.domain, expected=4)  # and the end marker
    rows = connect(settings).query(
        "SELECT scroll_depth, engagement_ms FROM events WHERE site = {site:String} AND event_id = {id:UUID}",
        parameters={"site": site.domain, "id": engaged.event_id},
    )
    assert rows.result_rows == [(engaged.scroll_depth, engaged.engagement_ms)]


async def test_engagement_shaped_like_plausibles_reaches_the_dashboards_numbers(
    page: Page, browser: Browser, websites: Websites, collector_url: str, settings: Settings
) -> None:
    """What Plausible's tracker sends (its short keys and script version) for two visitors of
    /guide: one reads for 40 s in two engagement events down to 75 %, the other 20 s to 25 %.
    The stats API's page breakdown shows 30 s and 50 % for it, from both sources."""
    domain = "plausible-engagement.test"
    register_site(settings, collector_url, domain)
    # The site's own page, without Tally's snippet: the events below are all it sends.
    home = websites.publish(domain, "/", "<h1>a site tracked by Plausible's script</h1>")
    guide = websites.url(domain, "/guide")
    send = """async ([api, site, url, events]) => {
        for (const [n, extra] of events) {
            const body = JSON.stringify({n, u: url, d: site, r: null, p: {}, v: 27, ...extra});
            await fetch(api, {method: 'POST', body});
        }
    }"""
    visits = [
        [["pageview", {}], ["engagement", {"sd": 40, "e": 25_000}], ["engagement", {"sd": 75, "e": 15_000}]],
        [["pageview", {}], ["engagement", {"sd": 25, "e": 20_000}]],
    ]
    other = await browser.new_context(user_agent=FIREFOX)  # another browser: another visitor
    try:
        for tab, visit in zip((page, await other.new_page()), visits, strict=True):
            await tab.goto(home)
            await tab.evaluate(send, [f"{collector_url}/api/event", domain, guide, visit])
    finally:
        await other.close()

    await archive_until(settings, domain, expected=5)
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    span = {"from": today.isoformat(), "to": (today + timedelta(days=1)).isoformat()}
    response = (
        build_app(settings)
        .server.test_client()
        .get(
            "/api/v1/stats/breakdown",
            query_string={"site": domain, "by": "path", "source": "raw", **span},
            headers={"Authorization": f"Bearer {settings.resolved_api_key()}"},
        )
    )
    assert response.get_json() == [
        {"value": "/guide", "pageviews": 2, "visitors": 2, "time_on_page_s": 30.0, "scroll_depth": 50.0}
    ]
    # agg: no stream jobs run here to count the page views, but engagement_minute is the archive's
    q = StatsQuery(domain, today, today + timedelta(days=1))
    assert queries.engagement(connect(settings), q, ["/guide"], source="agg") == {
        "/guide": PageEngagement("/guide", 2, 30.0, 50.0)
    }


# A page whose content shifts without input (a banner pushed in above the text) and whose
# button takes 150 ms to answer a click: an interaction slow enough for the event timing API.
SHIFTING_PAGE = """
<div id="top"></div><p>text below the banner</p><button id="slow">Slow</button>
<script>
  setTimeout(() => { document.getElementById('top').style.height = '300px'; }, 300);
  document.getElementById('slow').addEventListener('click', () => {
    const until = performance.now() + 150; while (performance.now() < until);
  });
</script>
"""
NAVIGATION_TIMES = (
    "[performance.getEntriesByName('first-contentful-paint')[0].startTime,"
    " performance.getEntriesByType('navigation')[0].responseStart]"
)


async def vitals_of_a_visit(site: TrackedSite, page: Page, options: str) -> tuple[PageViewEvent, list[float]]:
    """The engagement event of a visit that shifts, clicks the slow button and leaves (by a
    client-side navigation), and the page's own FCP and TTFB as its performance timeline has them."""
    home = site.publish(
        "/shifting", options=options, head=SPA_ROUTER, body=f'<a href="/next">Next</a>{SHIFTING_PAGE}'
    )
    await page.goto(home)
    await page.wait_for_function("typeof tally === 'function'")
    await page.wait_for_function("document.getElementById('top').offsetHeight == 300")
    await page.wait_for_timeout(1200)  # the shift is seen, and more than 1 s before the click
    await page.click("#slow")
    await page.wait_for_timeout(500)  # the interaction's timing entry is delivered after its paint
    timeline = await page.evaluate(NAVIGATION_TIMES)
    await page.click("text=Next")
    events = await site.logged_events(expected=3, engagement=True)
    [engaged] = [event for event in events if event.name == "engagement"]
    return engaged, timeline


async def test_a_page_hidden_or_left_sends_its_web_vitals_with_the_engagement_event_and_they_are_archived(
    site: TrackedSite, page: Page, settings: Settings
) -> None:
    engaged, (fcp, ttfb) = await vitals_of_a_visit(site, page, EVERY_OPTION)
    assert engaged.path == "/shifting"
    assert (engaged.fcp_ms, engaged.ttfb_ms) == (round(fcp), round(ttfb))
    assert engaged.lcp_ms is not None and engaged.fcp_ms <= engaged.lcp_ms < 120_000
    assert engaged.inp_ms is not None and engaged.inp_ms >= 150  # the slow click
    assert engaged.cls_milli is not None and engaged.cls_milli > 0  # the banner's shift

    await archive_until(settings, site.domain, expected=4)  # and the end marker
    rows = connect(settings).query(
        "SELECT lcp_ms, cls_milli, inp_ms, fcp_ms, ttfb_ms FROM events "
        "WHERE site = {site:String} AND event_id = {id:UUID}",
        parameters={"site": site.domain, "id": engaged.event_id},
    )
    assert rows.result_rows == [
        (engaged.lcp_ms, engaged.cls_milli, engaged.inp_ms, engaged.fcp_ms, engaged.ttfb_ms)
    ]


async def test_data_vitals_false_sends_engagement_without_vitals(site: TrackedSite, page: Page) -> None:
    engaged, _ = await vitals_of_a_visit(site, page, f'{EVERY_OPTION} data-vitals="false"')
    assert engaged.engagement_ms > 0
    assert (engaged.lcp_ms, engaged.cls_milli, engaged.inp_ms, engaged.fcp_ms, engaged.ttfb_ms) == (None,) * 5
