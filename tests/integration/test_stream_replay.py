"""Replay: every derived table rebuilt from the log equals the live one, and after the swap
the live queries carry on from the replay's checkpoints without losing or double-counting.
The log holds engagement events too: the replayed sessions keep their engaged time.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from storage.client import connect
from stream_jobs.activity import QUERY_NAME
from stream_jobs.alerts import QUERY_NAME as ALERTS_QUERY
from stream_jobs.app import stop_gracefully
from stream_jobs.context import REPLAY_SUFFIX
from stream_jobs.queries import REPLAYED_QUERIES, start_queries
from stream_jobs.replay import DERIVED_TABLES, rebuild, swap
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.clickhouse import Endpoint
from tests.fixtures.events import engagement_event, page_view
from tests.fixtures.spark import (
    isolated_settings,
    minutes_ago,
    mixed_traffic,
    produce,
    published_watermark,
    site_names,
    table_contents,
    wait_for,
    wait_until,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def replay_settings(tmp_path: Path, kafka_bootstrap: str, clickhouse_endpoint: Endpoint) -> Settings:
    return isolated_settings(
        tmp_path / "home", kafka_bootstrap, clickhouse_endpoint, rate_limit=5, rate_window_s=600
    )


def test_replay_rebuilds_the_live_tables_and_the_live_run_continues_after_the_swap(
    spark: SparkSession, replay_settings: Settings, running_queries: list[StreamingQuery]
) -> None:
    settings = replay_settings
    sites = site_names(2)
    t = minutes_ago(90)
    traffic = mixed_traffic(sites, t, minutes=5)
    # Every fourth page view read for 12 s: an engaged session (no bounce if it is its only one).
    read = [
        engagement_event(e.site, e.visitor_id, e.ts + timedelta(seconds=12), e.path, 12_000)
        for e in traffic[::4]
    ]
    first = [
        *sorted(traffic + read, key=lambda e: e.ts),
        page_view(sites[0], "clock-1", t + timedelta(minutes=45)),
    ]
    produce(settings, first)
    live = start_queries(spark, settings)
    running_queries.extend(live)
    # Live has read everything and closed what the last event time closes.
    wait_for_all_watermarks(settings, max(e.ts for e in first) - timedelta(seconds=settings.watermark_s))
    assert wait_for(lambda: minute_counts(settings), expected_minute_counts(first)) == expected_minute_counts(
        first
    )
    for query in live:
        stop_gracefully(query)

    summary = rebuild(spark, settings)
    assert summary.events == len(first)
    for table in DERIVED_TABLES:
        assert table_contents(settings, table, REPLAY_SUFFIX) == table_contents(settings, table), table
    assert table_contents(settings, "sessions"), "the traffic closes sessions"
    assert engaged_sessions(settings) > 0, "the replayed sessions keep their engaged time"
    assert table_contents(settings, "rate_limit_blocks"), "the traffic has a client over the limit"

    alerts_checkpoint = (settings.checkpoints_dir / ALERTS_QUERY / "metadata").read_text()
    swap(settings)
    # The alerts query is not replayed: it keeps its checkpoint (and so its offsets).
    assert (settings.checkpoints_dir / ALERTS_QUERY / "metadata").read_text() == alerts_checkpoint
    replayed_batches = max_batch(settings, QUERY_NAME + REPLAY_SUFFIX)
    running_queries.extend(start_queries(spark, settings))
    second = mixed_traffic(sites, t + timedelta(minutes=46), minutes=3, seed=1)
    produce(settings, second)
    expected = expected_minute_counts(first + second)
    assert wait_for(lambda: minute_counts(settings), expected) == expected
    # The live query resumed from the replay's checkpoint: its batch ids continue the replay's,
    # from the replay's last batch if the replay was stopped during it (it runs that one again).
    resumed = wait_until(lambda: first_batch_after_replay(settings), lambda batch: batch is not None)
    assert resumed in (replayed_batches, replayed_batches + 1)


def expected_minute_counts(events: list[PageViewEvent]) -> dict[tuple[str, datetime], int]:
    """Page views per (site, minute): engagement events are none."""
    return dict(
        Counter(
            (e.site, e.ts.replace(second=0, microsecond=0, tzinfo=None))
            for e in events
            if e.name == "pageview"
        )
    )


def engaged_sessions(settings: Settings) -> int:
    rows = connect(settings).query("SELECT countIf(engaged_ms > 0) FROM sessions FINAL WHERE NOT is_deleted")
    return int(rows.result_rows[0][0])


def minute_counts(settings: Settings) -> dict[tuple[str, datetime], int]:
    """Page views per (site, minute): the site totals' deltas (dimension '') summed."""
    rows = (
        connect(settings)
        .query(
            "SELECT site, bucket, sum(pageviews) AS n FROM rollup_minute WHERE dimension = '' "
            "GROUP BY 1, 2 HAVING n != 0"
        )
        .result_rows
    )
    return {(site, start): int(n) for site, start, n in rows}


def wait_for_all_watermarks(settings: Settings, at_least: datetime) -> None:
    for name in REPLAYED_QUERIES:  # the alerts query derives no table and has no watermark
        seen = wait_for(lambda name=name: published_watermark(settings, name) >= at_least, True)
        assert seen, f"{name} did not reach watermark {at_least}"


def max_batch(settings: Settings, query_name: str) -> int:
    rows = (
        connect(settings)
        .query(
            "SELECT max(batch_id) FROM stream_batches WHERE query_name = {q:String}",
            parameters={"q": query_name},
        )
        .result_rows
    )
    return int(rows[0][0])


def first_batch_after_replay(settings: Settings) -> int | None:
    """The first batch the live query wrote after the replay's last (None if none yet). Any
    batch: the activity query runs a batch every trigger, with or without new events."""
    rows = (
        connect(settings)
        .query(
            "SELECT minOrNull(batch_id) FROM stream_batches WHERE query_name = {q:String} "
            "AND written_at > (SELECT max(written_at) FROM stream_batches WHERE query_name = {r:String})",
            parameters={"q": QUERY_NAME, "r": QUERY_NAME + REPLAY_SUFFIX},
        )
        .result_rows
    )
    return None if rows[0][0] is None else int(rows[0][0])
