"""A session row carries its first page view's utm_content, utm_term, screen size class and
language (migration 0062), so that filters and breakdowns on them can read `sessions`: the SQL
backfill (storage/rollup_backfill.py) writes them as Spark does (tests/integration/
test_stream_sessions.py and test_stream_agg_equals_raw.py check Spark's); rows written before the
migration read '' in them until `tally replay` rebuilds them.

Real ClickHouse engine (the session's endpoint), a database per test.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from clickhouse_connect.driver.client import Client

from storage.client import connect
from storage.rollup_backfill import backfill_rollups
from storage.schema import apply_migrations
from tally.settings import Settings
from tests.fixtures.clickhouse import Endpoint, own_database_settings
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

SITE = "entry-properties.example.com"
DAY = datetime(2026, 11, 14, tzinfo=UTC)
NEW_COLUMNS = ("utm_content", "utm_term", "screen_size", "language")


def migrated(tmp_path_factory: pytest.TempPathFactory, endpoint: Endpoint, name: str) -> Settings:
    """A database of its own, every migration applied."""
    return own_database_settings(tmp_path_factory.mktemp(name), endpoint, name)


def stored(client: Client) -> list[tuple]:
    return client.query(
        f"SELECT visitor_id, session_start, entry_path, {', '.join(NEW_COLUMNS)} FROM sessions FINAL "
        "WHERE site = {site:String} AND NOT is_deleted ORDER BY visitor_id, session_start",
        parameters={"site": SITE},
    ).result_rows


def test_the_backfill_gives_each_session_its_first_page_views_utms_screen_size_and_language(
    tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint
) -> None:
    client = connect(migrated(tmp_path_factory, clickhouse_endpoint, "entry_properties_backfill"))
    at = lambda minutes: DAY + timedelta(hours=10, minutes=minutes)  # noqa: E731
    events = [
        # one visit: the values of its first page view, not of the later ones
        page_view(SITE, "v", at(0), "/in", utm_content="a", utm_term="seo", screen_width=400, language="fr"),
        page_view(SITE, "v", at(5), "/on", utm_content="b", utm_term="ads", screen_width=1600, language="en"),
        # 40 minutes later: another visit, with its own first page view
        page_view(SITE, "v", at(45), "/back", screen_width=1000, language="de"),
        # no width known: no class
        page_view(SITE, "w", at(1), "/", utm_term="brand", screen_width=0),
    ]
    rows, columns = archive_rows(events)
    client.insert("events", rows, column_names=columns)

    backfill_rollups(client, SITE, DAY.date(), DAY.date() + timedelta(days=1))

    start = lambda minutes: at(minutes).replace(tzinfo=None)  # noqa: E731
    assert stored(client) == [
        ("v", start(0), "/in", "a", "seo", "Mobile", "fr"),
        ("v", start(45), "/back", "", "", "Laptop", "de"),
        ("w", start(1), "/", "", "brand", "", ""),
    ]


def test_sessions_written_before_the_migration_read_blank_in_the_new_columns(
    tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint
) -> None:
    """A database from before 0062 holding a session row: applying 0062 keeps the row, with ''
    in the new columns (the header of the migration says so; `tally replay` refills them)."""
    settings = migrated(tmp_path_factory, clickhouse_endpoint, "entry_properties_migration")
    client = connect(settings)
    client.command("ALTER TABLE sessions " + ", ".join(f"DROP COLUMN {name}" for name in NEW_COLUMNS))
    client.command("DELETE FROM schema_migrations WHERE version = '0062_session_entry_properties'")
    old = {"site": SITE, "session_start": DAY + timedelta(hours=10), "visitor_id": "o", "entry_path": "/in"}
    client.insert("sessions", [list(old.values())], column_names=list(old))

    assert apply_migrations(settings) == ["0062_session_entry_properties"]
    assert stored(client) == [("o", datetime(2026, 11, 14, 10), "/in", "", "", "", "")]
