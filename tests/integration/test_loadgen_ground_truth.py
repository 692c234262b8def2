"""loadgen against the real collector, then the archiver: the archive holds exactly what
loadgen's ground truth says was accepted — no bot, every late event, nothing lost."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC
from pathlib import Path

import pytest

from loadgen.__main__ import LoadPlan, run_plan
from loadgen.traffic import TrafficMix
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.archive import archived
from tests.fixtures.clickhouse import Endpoint
from tests.fixtures.collector_server import running_collector
from tests.fixtures.ports import free_port
from tests.fixtures.topics import own_store_and_topic
from tests.integration.test_archiver import archive_until

pytestmark = pytest.mark.integration

SITES = ["truth1.example.com", "truth2.example.com"]


def archive_counts(settings: Settings, sql: str) -> list[tuple]:
    return connect(settings).query(sql, parameters={"sites": SITES}).result_rows


def test_archive_matches_loadgen_ground_truth_exactly(
    settings: Settings, clickhouse_endpoint: Endpoint, tmp_path: Path
) -> None:
    # A store and a topic of its own. The archiver resumes each partition after the highest offset
    # the store's archive holds: in the shared store other tests' rows (written straight into the
    # archive, with offsets of their own) stood above this test's, and the archiver skipped its
    # events as archived (CI: 0 of 505, "skipped=1122"; before, fewer than the truth per path).
    settings = own_store_and_topic(tmp_path, clickhouse_endpoint, settings.kafka_bootstrap, "truth")
    client = connect(settings)
    for site in SITES:
        add_site(client, site)
    mix = TrafficMix(bot_fraction=0.1, late_fraction=0.1, late_delay_s=900)
    with running_collector(settings, free_port()) as url:
        plan = LoadPlan(url, 80, 8, SITES, 40, mix, 0, 7, settings.resolved_ingest_key())
        summary, truth = run_plan(plan)
        batch_plan = LoadPlan(url, 200, 3, SITES, 40, mix, 20, 8, settings.resolved_ingest_key())
        batch_summary, batch_truth = run_plan(batch_plan)
    truth.merge(batch_truth)
    counted = truth.counted()
    assert summary.accepted == summary.sent and batch_summary.accepted == batch_summary.sent
    assert any(e.kind == "bot" for e in truth.accepted) and any(e.kind == "late" for e in counted)

    for site in SITES:
        asyncio.run(archive_until(settings, site, expected=truth.pageviews_by_site()[site]))
        expected = truth.pageviews_by_site()[site]
        assert archived(settings, site)[0] == expected, f"{site}: not all archived in time"

    by_site_path = archive_counts(
        settings,
        "SELECT site, path, count() FROM events WHERE site IN {sites:Array(String)} GROUP BY site, path",
    )
    assert Counter({(site, path): n for site, path, n in by_site_path}) == truth.pageviews_by_site_path()
    visitors = archive_counts(
        settings,
        "SELECT site, uniqExact(visitor_id) FROM events WHERE site IN {sites:Array(String)} GROUP BY site",
    )
    assert dict(visitors) == truth.visitors_by_site()
    by_minute = dict(
        ((site, minute.replace(tzinfo=UTC)), n)
        for site, minute, n in archive_counts(
            settings,
            "SELECT site, toStartOfMinute(ts), count() FROM events WHERE site IN {sites:Array(String)} "
            "GROUP BY site, toStartOfMinute(ts)",
        )
    )
    bounds = truth.pageviews_by_site_minute()
    assert set(by_minute) <= set(bounds)
    for key, (fewest, most) in bounds.items():
        assert fewest <= by_minute.get(key, 0) <= most, key
    assert sum(by_minute.values()) == len(counted)
