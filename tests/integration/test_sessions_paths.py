"""A session row says which pages its visit viewed (migration 0063: `paths`, the distinct paths
of its page views in order of first view, uncapped), so that a page filter's visit metrics can
read `sessions`: the SQL backfill (storage/rollup_backfill.py) writes it as Spark does
(tests/integration/test_stream_sessions.py and test_stream_agg_equals_raw.py check Spark's);
rows written before the migration read [] until `tally replay`; and the visits whose `paths`
hold the page are those the archive compiler (stats/raw_sql.py) counts under the page filter,
a matching page view after the range's end included. Where they part is stated and pinned: a
visit kept only by a custom event on the page.

Real ClickHouse engine (the session's endpoint), a database per test.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from clickhouse_connect.driver.client import Client

from stats import catalogue, raw_sql
from stats.query import Condition, Query
from storage.client import connect
from storage.rollup_backfill import backfill_rollups
from storage.schema import apply_migrations
from tally.settings import Settings
from tests.fixtures.clickhouse import Endpoint, own_database_settings
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

SITE = "session-paths.example.com"
DAY = datetime(2026, 11, 14, tzinfo=UTC)
VISIT_METRICS = ("visits", "bounce_rate", "visit_duration", "views_per_visit")


def at(minutes: float) -> datetime:
    return DAY + timedelta(hours=10, minutes=minutes)


def migrated(tmp_path_factory: pytest.TempPathFactory, endpoint: Endpoint, name: str) -> Settings:
    """A database of its own, every migration applied."""
    return own_database_settings(tmp_path_factory.mktemp(name), endpoint, name)


def backfilled(client: Client, events: list) -> None:
    rows, columns = archive_rows(events)
    client.insert("events", rows, column_names=columns)
    backfill_rollups(client, SITE, DAY.date(), DAY.date() + timedelta(days=1))


def stored_paths(client: Client) -> list[tuple]:
    return client.query(
        "SELECT visitor_id, session_start, paths FROM sessions FINAL "
        "WHERE site = {site:String} AND NOT is_deleted ORDER BY visitor_id, session_start",
        parameters={"site": SITE},
    ).result_rows


def test_the_backfill_gives_each_session_the_distinct_pages_it_viewed_in_order_of_first_view(
    tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint
) -> None:
    client = connect(migrated(tmp_path_factory, clickhouse_endpoint, "session_paths_backfill"))
    many = [f"/doc/{n}" for n in range(1500)]  # more pages than any cap would keep
    backfilled(
        client,
        [
            # / then /a then / then /b: each once, where first viewed
            page_view(SITE, "v", at(0), "/"),
            page_view(SITE, "v", at(5), "/a"),
            page_view(SITE, "v", at(10), "/"),
            page_view(SITE, "v", at(15), "/b"),
            # 45 minutes later: another visit, its own pages
            page_view(SITE, "v", at(60), "/b"),
            # two page views in one millisecond: the smaller event_id first, as Spark orders them
            page_view(SITE, "w", at(0), "/second", event_id="00000000-0000-4000-8000-000000000002"),
            page_view(SITE, "w", at(0), "/first", event_id="00000000-0000-4000-8000-000000000001"),
            # a crawler's visit: every one of its pages, none dropped
            *(page_view(SITE, "x", at(n / 100), path) for n, path in enumerate(many)),
        ],
    )

    start = lambda minutes: at(minutes).replace(tzinfo=None)  # noqa: E731
    assert stored_paths(client) == [
        ("v", start(0), ["/", "/a", "/b"]),
        ("v", start(60), ["/b"]),
        ("w", start(0), ["/first", "/second"]),
        ("x", start(0), many),
    ]


def test_sessions_written_before_the_migration_read_no_pages(
    tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint
) -> None:
    """A database from before 0063 holding a session row: applying 0063 keeps the row, with []
    in `paths` (no page filter matches it until `tally replay` refills it: the header says so)."""
    settings = migrated(tmp_path_factory, clickhouse_endpoint, "session_paths_migration")
    client = connect(settings)
    client.command("ALTER TABLE sessions DROP COLUMN paths")
    client.command("DELETE FROM schema_migrations WHERE version = '0063_session_paths'")
    old = {"site": SITE, "session_start": DAY + timedelta(hours=10), "visitor_id": "o", "entry_path": "/in"}
    client.insert("sessions", [list(old.values())], column_names=list(old))

    assert apply_migrations(settings) == ["0063_session_paths"]
    assert stored_paths(client) == [("o", datetime(2026, 11, 14, 10), [])]


def sessions_answer(client: Client, condition: str, start: datetime, end: datetime) -> dict[str, float]:
    """The page filter's visit metrics from `sessions` alone: the visits starting in [start, end)
    whose `paths` (the catalogue's sessions_array for the page) hold a page passing `condition`
    (on `p`), as a planner reading sessions would answer them (Plausible's rounding)."""
    array = catalogue.by_tally("path").sessions_array
    visits, bounces, duration, pageviews = client.query(
        "SELECT count(), sum(is_bounce), sum(duration_s), sum(pageviews) FROM sessions FINAL "
        "WHERE site = {site:String} AND NOT is_deleted "
        "AND session_start >= {start:DateTime64(3, 'UTC')} AND session_start < {end:DateTime64(3, 'UTC')} "
        f"AND arrayExists(p -> {condition}, {array})",
        parameters={"site": SITE, "start": start, "end": end},
    ).result_rows[0]
    return {
        "visits": visits,
        "bounce_rate": round(100 * bounces / visits),
        "visit_duration": round(duration / visits),
        "views_per_visit": round(pageviews / visits, 2),
    }


def raw_answer(client: Client, condition: Condition, start: datetime, end: datetime) -> dict[str, object]:
    [row] = raw_sql.answer(client, Query(SITE, start, end, VISIT_METRICS, filters=condition))
    return row.metrics


def test_a_page_filters_visits_are_those_whose_paths_hold_the_page_as_the_archive_counts_them(
    tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint
) -> None:
    """The range is [10:00, 11:00). Counted: visits starting in it that viewed /pricing at any
    time, after 11:00 too (the visit is counted whole); not counted: a visit that viewed /pricing
    inside the range but started before it, or never viewed it."""
    client = connect(migrated(tmp_path_factory, clickhouse_endpoint, "session_paths_filter"))
    backfilled(
        client,
        [
            # starts in the range, views /pricing only after its end: counted
            page_view(SITE, "late-match", at(50), "/"),
            page_view(SITE, "late-match", at(75), "/pricing"),
            # a bounce on /pricing: counted
            page_view(SITE, "bounce", at(10), "/pricing"),
            # starts in the range on /pricing, then reads on: counted, whole
            page_view(SITE, "reader", at(20), "/pricing"),
            page_view(SITE, "reader", at(22), "/docs"),
            page_view(SITE, "reader", at(30), "/blog"),
            # started before the range, views /pricing inside it: not counted
            page_view(SITE, "earlier", at(-10), "/"),
            page_view(SITE, "earlier", at(5), "/pricing"),
            # never views it: not counted
            page_view(SITE, "other", at(15), "/docs"),
            page_view(SITE, "other", at(16), "/pricing-faq"),
        ],
    )
    start, end = at(0), at(60)

    is_pricing = Condition("is", "event:page", ("/pricing",))
    expected = {"visits": 3, "bounce_rate": 33, "visit_duration": 700, "views_per_visit": 2.0}
    assert raw_answer(client, is_pricing, start, end) == expected
    assert sessions_answer(client, "p = '/pricing'", start, end) == expected

    # a condition on the path, not only a value: arrayExists over paths, as the archive's match
    prefix = Condition("matches", "event:page", ("^/pricing",))
    expected = {"visits": 4, "bounce_rate": 25, "visit_duration": 540, "views_per_visit": 2.0}
    assert raw_answer(client, prefix, start, end) == expected
    assert sessions_answer(client, "match(p, '^/pricing')", start, end) == expected


def test_a_visit_kept_only_by_a_custom_event_on_the_page_is_the_archives_alone(
    tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint
) -> None:
    """The edge migration 0063 states: `paths` holds page views' paths, the archive also keeps a
    visit whose custom event (within [first page view, last page view + gap]) is on the page. A
    planner answering a page filter from `sessions` must rule such events out first."""
    client = connect(migrated(tmp_path_factory, clickhouse_endpoint, "session_paths_custom"))
    backfilled(
        client,
        [
            page_view(SITE, "signup", at(10), "/"),
            # a custom event whose path the visit never viewed (e.g. sent by a server)
            page_view(SITE, "signup", at(11), "/pricing", name="Signup"),
        ],
    )
    start, end = at(0), at(60)

    assert raw_answer(client, Condition("is", "event:page", ("/pricing",)), start, end)["visits"] == 1
    assert stored_paths(client) == [("signup", at(10).replace(tzinfo=None), ["/"])]
