"""A site registered with `tally sites add` is accepted by the running collector from the
moment the command returns; events for made-up sites do not turn into a query each."""

from __future__ import annotations

import asyncio
import os
import re
import time
import uuid
from datetime import UTC, datetime

import httpx
import pytest

from storage import queries
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

BROWSER_UA = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36"
)
RECHECK_INTERVAL_S = 0.25  # collector/known_sites.py's default


def beacon(collector_url: str, site: str) -> httpx.Response:
    body = {"site": site, "url": f"https://{site}/welcome"}
    return httpx.post(f"{collector_url}/api/event", json=body, headers={"User-Agent": BROWSER_UA}, timeout=10)


def site_rereads(collector_url: str) -> float:
    metrics = httpx.get(f"{collector_url}/metrics", timeout=10).text
    return float(re.search(r"^tally_site_registry_rereads (\S+)$", metrics, re.MULTILINE)[1])


def test_site_added_with_the_cli_is_accepted_at_once(settings: Settings, collector_url: str) -> None:
    site = f"new-{uuid.uuid4().hex[:8]}.example.com"
    assert beacon(collector_url, site).status_code == 400
    added = run_tally(os.environ | settings.environment(), "sites", "add", site)
    assert added.returncode == 0, added.stderr
    assert beacon(collector_url, site).status_code == 202


def test_events_for_made_up_sites_share_registry_rereads(collector_url: str) -> None:
    async def flood() -> list[int]:
        async with httpx.AsyncClient(timeout=30) as client:
            answers = await asyncio.gather(
                *(
                    client.post(
                        f"{collector_url}/api/event",
                        json={"site": f"made-up-{n}.example.com", "url": "https://example.com/"},
                        headers={"User-Agent": BROWSER_UA},
                    )
                    for n in range(100)
                )
            )
        return [answer.status_code for answer in answers]

    before = site_rereads(collector_url)
    started = time.monotonic()
    statuses = asyncio.run(flood())
    elapsed_s = time.monotonic() - started
    assert statuses == [400] * 100
    # Re-reads start at least RECHECK_INTERVAL_S apart, all within the flood: not one per event.
    rereads = site_rereads(collector_url) - before
    assert 1 <= rereads <= elapsed_s / RECHECK_INTERVAL_S + 1
    assert rereads < 100


def test_a_registered_site_is_offered_to_pick_behind_a_thousand_busier_ones(settings: Settings) -> None:
    """The site picker lists the archive's busiest sites (at most 1000) and then every registered
    site: a tenant's quiet site is never pushed out of its own picker by the busy ones."""
    clickhouse = connect(settings)
    run = uuid.uuid4().hex[:8]
    now = datetime.now(UTC)
    busy = [
        page_view(f"busy-{n}-{run}.example.com", f"v{k}", now, "/") for n in range(1001) for k in range(3)
    ]
    quiet, silent = f"quiet-{run}.example.com", f"silent-{run}.example.com"
    rows, columns = archive_rows([*busy, page_view(quiet, "v", now, "/")])
    clickhouse.insert("events", rows, column_names=columns)
    add_site(clickhouse, quiet)
    add_site(clickhouse, silent)
    offered = queries.sites(clickhouse)
    assert quiet in offered and silent in offered
    assert len(offered) == len(set(offered))  # a registered site with events is listed once
    assert f"unregistered-{run}.example.com" not in offered
