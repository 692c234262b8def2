"""The Definitions panel as the operator uses it: a version built by `tally whatif` (a 20-minute
session gap, rebuilt from the archive) shown beside the current one for the picked site and
period, with the numbers the comparison query gives; Swap in and Discard record requests for the
stream jobs, whose outcome (here: the swap refused, an archive-built version is for comparing
only; the discard done) the panel then lists. Its own store and dashboard server: recording
definitions versions in the shared store would change other tests' numbers."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from archiver.rows import archive_row, insert_rows
from ops.local import whatif
from storage import definitions
from storage.client import connect
from storage.queries import StatsQuery
from storage.queries.whatif import compare, side_tables_exist
from storage.rollup_backfill import backfill_rollups
from storage.tables import SYNTHETIC_PARTITION
from stream_jobs.definition_requests import DefinitionRequests
from tally.settings import Settings
from tests.browser.test_dashboard import DESKTOP, SCREENSHOTS, open_site
from tests.browser.test_dashboard_periods import choose
from tests.fixtures.browser import open_settings
from tests.fixtures.clickhouse import Endpoint, own_database_settings
from tests.fixtures.dashboard_server import DashboardServer
from tests.fixtures.ports import free_port
from tests.fixtures.service_process import running_module
from tests.integration.test_whatif import PROPOSED_GAP_S, visits, yesterday

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("patient_expectations")]

SITE = "whatif.dashboard.test"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint) -> Settings:
    settings = own_database_settings(
        tmp_path_factory.mktemp("whatif-dashboard-home"), clickhouse_endpoint, "whatif_browser"
    )
    client = connect(settings)
    events = visits(SITE, yesterday(), seed=9)
    insert_rows(client, [archive_row(e, SYNTHETIC_PARTITION, i) for i, e in enumerate(events)])
    day = yesterday().date()
    backfill_rollups(client, SITE, day, day + timedelta(days=1))  # the live tables, version 1
    return settings


@pytest.fixture(scope="module")
def server(store: Settings) -> Iterator[DashboardServer]:
    port = free_port()
    environment = {key: value for key, value in os.environ.items() if not key.startswith("TALLY_")} | {
        "TALLY_HOME": str(store.home_dir),
        "TALLY_CLICKHOUSE_URL": store.clickhouse_url,
        "TALLY_CLICKHOUSE_PASSWORD": store.clickhouse_password,
        "TALLY_CLICKHOUSE_DATABASE": store.clickhouse_database,
        "TALLY_DASHBOARD_PORT": str(port),
    }
    url = f"http://127.0.0.1:{port}"
    log_path = Path(store.home_dir) / "dashboard.log"
    with running_module("dashboard.app", environment, log_path, f"{url}/healthz"):
        password = (store.home_dir / "dashboard_password").read_text().strip()
        yield DashboardServer(url, store.resolved_api_key(), password, log_path)


def stream_jobs_look_at_requests(settings: Settings) -> None:
    """What the live stream jobs do between two batches (none run here: no query to restart)."""
    DefinitionRequests(settings, start=lambda _: [], stop=lambda _: None)([])


async def test_the_operator_compares_a_version_and_asks_for_a_swap_and_a_discard(
    browser: Browser, server: DashboardServer, store: Settings
) -> None:
    current, proposed = whatif.propose(store, {"session_gap_s": PROPOSED_GAP_S}, "20-minute visits")
    day = yesterday()
    whatif.build(store, proposed, day, day + timedelta(days=1), progress=print, from_archive=True)
    expected = compare(connect(store), StatsQuery(SITE, day, day + timedelta(days=1)), current, proposed)
    assert expected.proposed.totals["sessions"] > expected.current.totals["sessions"]

    page = await browser.new_page(viewport=DESKTOP)
    await open_site(page, server, SITE)
    await choose(page, "preset", "Yesterday")
    await open_settings(page)
    panel = page.locator("#whatif-panel")
    await panel.scroll_into_view_if_needed()
    await expect(page.locator("#whatif-current-version")).to_have_text(
        "Current: version 1: session gap 30 min, engaged bounce 10 s"
    )
    await expect(page.locator("#whatif-version")).to_contain_text("version 2: session gap 20 min")
    await expect(page.locator("#whatif-history li")).to_have_text(
        [
            re.compile(r"^v2 · [\d-]+ [\d:]+ · 20-minute visits — session gap 30m -> 20m$"),
            re.compile(r"^v1 \(current\) · [\d-]+ [\d:]+ · from the environment"),
        ]
    )
    for metric, old, new in (
        ("sessions", expected.current.totals["sessions"], expected.proposed.totals["sessions"]),
        ("visitors", expected.current.totals["visitors"], expected.proposed.totals["visitors"]),
        ("pageviews", expected.current.totals["pageviews"], expected.proposed.totals["pageviews"]),
    ):
        await expect(page.locator(f"#whatif-{metric} td")).to_have_text([f"{int(old):,}", f"{int(new):,}"])
    bounce = [
        f"{expected.current.totals['bounce_rate'] * 100:.1f}%",
        f"{expected.proposed.totals['bounce_rate'] * 100:.1f}%",
    ]
    await expect(page.locator("#whatif-bounce_rate td")).to_have_text(bounce)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / "whatif-panel-desktop.png"), full_page=False)

    await page.click("#whatif-swap")
    await expect(page.locator("#whatif-status")).to_contain_text("Asked the stream jobs to swap version 2 in")
    await expect(page.locator(".whatif-request").first).to_have_text("swap version 2: pending")
    assert [(r.version, r.action) for r in definitions.pending_requests(connect(store))] == [(2, "swap")]
    stream_jobs_look_at_requests(store)
    assert definitions.current(connect(store), store).number == 1  # an archive-built version stays out

    await page.click("#whatif-discard")
    await expect(page.locator("#whatif-status")).to_contain_text("drop version 2's side tables")
    await expect(page.locator(".whatif-request-refused")).to_contain_text("built from the archive")
    stream_jobs_look_at_requests(store)
    assert not side_tables_exist(connect(store), 2)
