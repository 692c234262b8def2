"""The dashboard's rate-limiting panel reads what the stream jobs write (storage/rate_limits.py):
per-client panes summed over the window that ends now. A pane's rows are deltas (the activity
query writes each batch's page views of a pane as a row of their own), so a pane is the sum of
its rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from storage import tables
from storage.client import connect
from storage.rate_limits import Offender, rate_limit_status
from tally.settings import Settings

pytestmark = pytest.mark.integration

# Far from the times other tests write, so that only this test's rows are in the window.
NOW = datetime(2031, 1, 1, 12, tzinfo=UTC)
SCRAPER, READER = "5c4a9e12" * 8, "0ead0ead" * 8
COLUMNS = ["ip_hash", "window_start", "window_end", "pageviews", "batch_id"]


def pane(ip_hash: str, minutes_ago: int, pageviews: int, batch_id: int = 1) -> list[object]:
    start = NOW - timedelta(minutes=minutes_ago)
    return [ip_hash, start, start + timedelta(minutes=1), pageviews, batch_id]


def test_busiest_clients_sum_their_panes_in_the_window_and_show_who_is_blocked(settings: Settings) -> None:
    client = connect(settings)
    client.insert(
        tables.RATE_LIMIT_COUNTERS,
        [
            pane(SCRAPER, 50, 70),
            pane(SCRAPER, 10, 30),
            pane(SCRAPER, 10, 50, batch_id=2),  # the same pane, 50 more page views in a later batch
            pane(SCRAPER, 61, 500),  # before the window: not counted
            pane(READER, 5, 12),
        ],
        column_names=COLUMNS,
    )
    window_start = NOW - timedelta(minutes=50)
    client.insert(
        tables.RATE_LIMIT_BLOCKS,
        [[SCRAPER, window_start, window_start + timedelta(hours=1), 150, 2]],
        column_names=COLUMNS,
    )

    status = rate_limit_status(client, NOW, window_s=3600)

    assert status.available
    assert status.blocked_now == 1
    assert status.offenders == [Offender(SCRAPER[:10], 150, True), Offender(READER[:10], 12, False)]


def test_a_client_is_blocked_until_the_end_of_its_last_window_over_the_limit(settings: Settings) -> None:
    client = connect(settings)
    end = datetime(2032, 6, 1, 12, tzinfo=UTC)  # apart from the other test's rows
    client.insert(
        tables.RATE_LIMIT_BLOCKS,
        [["b10cb10c" * 8, end - timedelta(hours=1), end, 101, 1]],
        column_names=COLUMNS,
    )
    assert rate_limit_status(client, end - timedelta(seconds=1)).blocked_now == 1
    assert rate_limit_status(client, end).blocked_now == 0
