"""loadgen against the real collector, then the archiver: the archive holds exactly what
loadgen's ground truth says was accepted — no bot, every late event, nothing lost."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC
from uuid import uuid4

import pytest

from loadgen.__main__ import LoadPlan, run_plan
from loadgen.traffic import TrafficMix
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.archive import archived
from tests.fixtures.collector_server import running_collector
from tests.fixtures.ports import free_port
from tests.integration.test_archiver import archive_until
from tests.integration.test_broken_parts import create_topic

pytestmark = pytest.mark.integration

SITES = ["truth1.example.com", "truth2.example.com"]


def archive_counts(settings: Settings, sql: str) -> list[tuple]:
    return connect(settings).query(sql, parameters={"sites": SITES}).result_rows


def test_archive_matches_loadgen_ground_truth_exactly(settings: Settings) -> None:
    # A topic of its own: the archiver then reads this test's events only, not the backlog the
    # worker's earlier tests left unarchived in the shared topic (in CI, under load, 240 s were not
    # enough to get through that first, and the archive held fewer than the truth).
    topic = f"truth-{uuid4().hex[:8]}"
    settings = settings.model_copy(update={"pageviews_topic": topic})
    asyncio.run(create_topic(settings.kafka_bootstrap, topic, settings.pageviews_partitions))
    client = connect(settings)
    for site in SITES:
        add_site(client, site)
    mix = TrafficMix(bot_fraction=0.1, late_fraction=0.1, late_delay_s=900)
    with running_collector(settings, free_port(), {"TALLY_PAGEVIEWS_TOPIC": topic}) as url:
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
