"""The reports that read whole visits from `sessions` (journeys, retention) take each visit's
newest version and no tombstone: the stream jobs write a visit again each time it grows, and a
tombstone where a late page view moved its start (storage/queries/session_versions.py)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from clickhouse_connect.driver.client import Client

from storage.client import connect
from storage.queries.retention import retention
from storage.queries.session_versions import newest_visits_sql
from tally.settings import Settings

pytestmark = pytest.mark.integration

SITE = "session-versions.example.com"
MONDAY = date(2026, 11, 2)
START = datetime(2026, 11, 2, 10, tzinfo=UTC)
COLUMNS = ["site", "session_start", "visitor_id", "session_end", "pageviews", "journey", "is_deleted"]


def write_versions(client: Client) -> None:
    """One insert (one part) per batch, so that nothing is merged unless the reader merges it."""
    grows = ("grows", START)
    # Its first page view just after midnight of the next Monday, then a late one 20 minutes
    # before it: the visit's start moves into the week before, leaving a tombstone at the old key.
    moved = ("moved", datetime(2026, 11, 9, 0, 10, tzinfo=UTC))
    batches = [
        (1, [[*grows, ["/a"], 0], [*moved, ["/x"], 0]]),
        (2, [[*grows, ["/a", "/b"], 0]]),
        (3, [[*moved, ["/x"], 1], [moved[0], moved[1] - timedelta(minutes=20), ["/w", "/x"], 0]]),
    ]
    for batch_id, versions in batches:
        rows = [
            [SITE, start, visitor, start + timedelta(minutes=len(path)), len(path), path, deleted]
            for visitor, start, path, deleted in versions
        ]
        client.insert("sessions", [[*row, batch_id] for row in rows], column_names=[*COLUMNS, "batch_id"])


@pytest.fixture(scope="module")
def store(settings: Settings) -> Client:
    client = connect(settings)
    write_versions(client)
    return client


def test_each_visit_is_read_once_in_its_newest_version_and_tombstones_are_dropped(store: Client) -> None:
    rows = store.query(
        f"SELECT visitor_id, start, journey FROM ({newest_visits_sql('journey')}) ORDER BY start",
        parameters={"site": SITE, "start": START - timedelta(days=1), "end": START + timedelta(days=8)},
    ).result_rows
    assert [(visitor, journey) for visitor, _, journey in rows] == [
        ("grows", ["/a", "/b"]),
        ("moved", ["/w", "/x"]),
    ]


def test_retention_sees_the_moved_visit_in_its_new_week_only(store: Client) -> None:
    """Read with its tombstoned old version, `moved` would come back in the second week."""
    report = retention(store, SITE, (MONDAY, MONDAY + timedelta(days=7)), "UTC", session_gap_s=1800)
    assert (report.cohorts[0].visitors, report.cohorts[0].returning) == (2, (0,))
    assert report.cohorts[1].visitors == 0
