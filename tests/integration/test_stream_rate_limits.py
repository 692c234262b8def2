"""Rate limiting in the activity query: per-client counts, windows over the limit, the blocklist.

A small limit and a 10-minute window keep the run short; the rule is the same. The expected
per-minute counts and the windows over the limit are computed here from the events, window by
window (every window of 10 minutes starting on a minute).
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from storage.client import connect
from stream_jobs.activity import QUERY_NAME
from stream_jobs.queries import start_queries
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.clickhouse import Endpoint
from tests.fixtures.events import page_view
from tests.fixtures.spark import (
    isolated_settings,
    minutes_ago,
    produce,
    read_topic,
    site_names,
    wait_for,
    wait_until,
)

pytestmark = pytest.mark.integration

LIMIT = 5
WINDOW_S = 600


@pytest.fixture
def rate_settings(tmp_path: Path, kafka_bootstrap: str, clickhouse_endpoint: Endpoint) -> Settings:
    return isolated_settings(
        tmp_path / "home", kafka_bootstrap, clickhouse_endpoint, rate_limit=LIMIT, rate_window_s=WINDOW_S
    )


def test_client_over_the_limit_is_blocked_until_its_window_ends_then_lifted(
    spark: SparkSession, rate_settings: Settings, running_queries: list[StreamingQuery]
) -> None:
    [site] = site_names(1)
    t = minutes_ago(60)
    scraper = [page_view(site, f"s{i}", t + timedelta(seconds=20 * i), ip_hash="scraper") for i in range(8)]
    visitor = [page_view(site, "v", t + timedelta(minutes=i), ip_hash="visitor") for i in range(LIMIT)]
    produce(rate_settings, sorted(scraper + visitor, key=lambda e: e.ts))
    running_queries.extend(start_queries(spark, rate_settings, [QUERY_NAME]))

    counts = expected_minute_counts(scraper + visitor)
    assert wait_for(lambda: stored_counts(rate_settings), counts) == counts
    over = expected_windows_over_limit(scraper + visitor)
    assert wait_for(lambda: stored_windows_over_limit(rate_settings), over) == over
    until, count = expected_block(scraper)
    blocked = json.dumps({"until": until.strftime("%Y-%m-%dT%H:%M:%SZ"), "count": count}).encode()
    messages = wait_until(
        lambda: read_topic(rate_settings, rate_settings.blocklist_topic),
        lambda m: bool(m) and m[-1] == ("scraper", blocked),
    )
    assert messages[-1] == ("scraper", blocked)
    assert {key for key, _ in messages} == {"scraper"}, "a client at the limit is not over it"

    # Event time moves past the end of the scraper's last window over the limit: lifted.
    produce(
        rate_settings, [page_view(site, "later", until + timedelta(seconds=rate_settings.watermark_s + 60))]
    )
    messages = wait_until(
        lambda: read_topic(rate_settings, rate_settings.blocklist_topic), lambda m: m[-1][1] is None
    )
    assert messages[-2:] == [("scraper", blocked), ("scraper", None)]


# --- expectations -------------------------------------------------------------------------


def windows_of(ts: datetime) -> list[datetime]:
    """Starts of the sliding windows [start, start + WINDOW_S) that contain `ts`."""
    epoch = int(ts.timestamp())
    last = epoch - epoch % 60
    return [datetime.fromtimestamp(start, tz=UTC) for start in range(last, epoch - WINDOW_S, -60)]


def expected_minute_counts(events: list[PageViewEvent]) -> dict[tuple[str, datetime], int]:
    return dict(Counter((e.ip_hash, e.ts.replace(second=0, microsecond=0)) for e in events))


def expected_windows_over_limit(events: list[PageViewEvent]) -> dict[tuple[str, datetime], int]:
    counts = Counter((e.ip_hash, start) for e in events for start in windows_of(e.ts))
    return {key: n for key, n in counts.items() if n > LIMIT}


def expected_block(events: list[PageViewEvent]) -> tuple[datetime, int]:
    """(end of the client's last window over the limit, its count)."""
    over = {start: n for (_, start), n in expected_windows_over_limit(events).items()}
    last = max(over)
    return last + timedelta(seconds=WINDOW_S), over[last]


def stored_windows_over_limit(settings: Settings) -> dict[tuple[str, datetime], int]:
    rows = (
        connect(settings)
        .query("SELECT ip_hash, window_start, pageviews FROM rate_limit_blocks FINAL")
        .result_rows
    )
    return {(ip, start.replace(tzinfo=UTC)): int(n) for ip, start, n in rows}


def stored_counts(settings: Settings) -> dict[tuple[str, datetime], int]:
    """Page views per (client, minute): the sum of the panes' deltas, whichever batch wrote them."""
    rows = (
        connect(settings)
        .query("SELECT ip_hash, window_start, sum(pageviews) FROM rate_limit_counters GROUP BY 1, 2")
        .result_rows
    )
    return {(ip, start.replace(tzinfo=UTC)): int(n) for ip, start, n in rows}
