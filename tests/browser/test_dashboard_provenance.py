"""Under the top metrics, the Overview says what they are made of (issue 21): the source read,
the events and log partitions covered with the stream jobs' watermark, late events and whether
agg and raw agree; hovering shows the offsets. A disagreement is a visible warning naming the
day. Real dashboard server, real ClickHouse engine, headless Chromium; the stream jobs'
progress and rollups are written here as the sink and the backfill write them (the Spark run
itself is tests/integration/test_provenance.py's)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from playwright.async_api import Browser, expect

from storage.client import connect
from storage.rollup_backfill import backfill_rollups
from tally.settings import Settings
from tests.browser.test_dashboard import DESKTOP, PHONE, TIMEOUT_MS, open_site, pick_site, screenshot
from tests.fixtures.dashboard_server import DashboardServer
from tests.fixtures.events import archive_rows, page_view

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

AGREEING = "provenance-agrees.example.com"
BROKEN = "provenance-broken.example.com"
PARTITIONS = {AGREEING: 0, BROKEN: 1}
LATE = 2


@pytest.fixture(scope="module")
def dashboard(dashboard_server: DashboardServer, dashboard_settings: Settings) -> Iterator[DashboardServer]:
    """Both sites' page views archived from partitions 0 and 1 and processed by the stream jobs;
    BROKEN's rollup row of today lost; AGREEING with two late events. The session's Kafka and
    store are shared: made-up offsets of partitions 0 and 1 left in `events` would make every
    later archiver resume past the log's real events, so they are taken back afterwards."""
    client = connect(dashboard_settings)
    now = datetime.now(UTC)
    today = now.date()
    for site, partition in PARTITIONS.items():
        t = now - timedelta(minutes=20)
        events = [page_view(site, f"v{n % 4}", t + timedelta(seconds=30 * n), f"/p{n % 3}") for n in range(9)]
        rows, columns = archive_rows(events, partition=partition)
        client.insert("events", rows, column_names=columns)
        client.insert(
            "stream_offsets",
            [["activity", dashboard_settings.pageviews_topic, partition, len(events), 1]],
            column_names=["query_name", "topic", "partition", "end_offset", "batch_id"],
        )
        backfill_rollups(client, site, today - timedelta(days=8), today + timedelta(days=1))
    client.insert(
        "stream_watermarks",
        [["activity", now - timedelta(minutes=2), 1]],
        column_names=["query_name", "watermark", "batch_id"],
    )
    client.insert(
        "late_events",
        [["activity", AGREEING, (now - timedelta(minutes=10)).replace(second=0, microsecond=0), 1, LATE]],
        column_names=["query_name", "site", "window_start", "batch_id", "events"],
    )
    client.command(
        "ALTER TABLE rollup_day DELETE WHERE site = {site:String} AND bucket = {day:Date} "
        "SETTINGS mutations_sync = 2",
        parameters={"site": BROKEN, "day": today},
    )
    yield dashboard_server
    for table in ("events", "late_events"):  # the store's own progress rows lose to real batches
        client.command(
            f"ALTER TABLE {table} DELETE WHERE site IN {{sites:Array(String)}} SETTINGS mutations_sync = 2",
            parameters={"sites": list(PARTITIONS)},
        )


def meta(server: DashboardServer, site: str, period: dict[str, str]) -> dict:
    """The stats API's provenance for the range the page shows, from the dashboard's source."""
    response = httpx.get(
        f"{server.url}/api/v1/stats/aggregate",
        params={"site": site, "source": "raw", "meta": "true", **period},
        headers={"Authorization": f"Bearer {server.api_key}"},
        timeout=30,
    )
    response.raise_for_status()
    return response.json()["meta"]


async def shown_period(page: object) -> dict[str, str]:
    label = page.locator("#period-range")  # type: ignore[attr-defined]
    await expect(label).to_be_visible()
    return {"from": await label.get_attribute("data-start"), "to": await label.get_attribute("data-end")}


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
async def test_overview_says_what_its_numbers_are_made_of(
    dashboard: DashboardServer, browser: Browser, viewport: str
) -> None:
    size = DESKTOP if viewport == "desktop" else PHONE
    context = await browser.new_context(viewport=size, locale="en-GB", is_mobile=viewport == "phone")
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = await context.new_page()
        await open_site(page, dashboard, AGREEING)
        expected = meta(dashboard, AGREEING, await shown_period(page))
        assert expected["agreement"]["status"] == "agree" and expected["late_events"]["count"] == LATE
        line = page.locator("#provenance")
        await expect(page.locator("#provenance-source")).to_have_text("Read from the raw archive (raw)")
        await expect(page.locator("#provenance-coverage")).to_contain_text("9 events from 1 log partition")
        await expect(page.locator("#provenance-late")).to_have_text(
            f"{LATE} late events (counted in raw, not in agg)"
        )
        await expect(page.locator("#provenance-agreement")).to_have_attribute("data-status", "agree")
        await expect(line).not_to_have_class("provenance provenance-warning")
        await expect(line).to_have_attribute("title", re.compile(r"partition 0: offsets 0\.\.8 \(9 events\)"))
        # Beside it, the page views of the period shown, as a file (tests/integration/test_export_figure.py)
        export = page.locator("#provenance-export")
        await expect(export).to_have_text("Download these page views (CSV)")
        href = rf"^/export/events\?site={re.escape(AGREEING)}&from=.+&metric=pageviews&format=csv"
        await expect(export).to_have_attribute("href", re.compile(href))
        await screenshot(page, f"{viewport}-provenance-agrees")

        await pick_site(page, BROKEN)
        expected = meta(dashboard, BROKEN, await shown_period(page))
        [day] = expected["agreement"]["days"]
        await expect(page.locator("#provenance-agreement")).to_have_attribute("data-status", "disagree")
        await expect(line).to_have_class("provenance provenance-warning")
        await expect(page.locator("#provenance-agreement")).to_contain_text(
            f"agg and raw disagree on {day['day'][:10]}: raw 9 page views / 4 visitors, agg 0 / 0"
        )
        assert await line.is_visible()  # shown, not only on hover
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= size["width"], width
        await screenshot(page, f"{viewport}-provenance-disagrees")
    finally:
        await context.close()
