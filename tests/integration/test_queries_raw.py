"""The query layer's `raw` source over a hand-built archive, checked against numbers
computed here independently from the same events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from clickhouse_connect.driver.client import Client

from storage import queries
from storage.client import connect
from storage.queries import StatsQuery
from tally.settings import Settings
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

SITE = "queries.example.com"
DAY = datetime(2026, 11, 10, tzinfo=UTC)
T0 = DAY + timedelta(hours=9)


# Visitor a: a 3-page session (gaps of 10 and exactly 30 minutes), then a bounce 2 h later.
# Visitor b: a bounce from Google on a phone. Visitor c: a custom event (not a page view).
EVENTS = [
    page_view(SITE, "a", T0, "/", referrer_domain="news.ycombinator.com", country="CH", device="desktop"),
    page_view(SITE, "a", T0 + timedelta(minutes=10), "/pricing", country="CH", device="desktop"),
    page_view(SITE, "a", T0 + timedelta(minutes=40), "/signup", country="CH", device="desktop"),
    page_view(SITE, "a", T0 + timedelta(hours=3), "/blog", country="CH", device="desktop"),
    page_view(
        SITE,
        "b",
        T0 + timedelta(minutes=5),
        "/pricing",
        referrer_domain="google.com",
        country="DE",
        device="mobile",
    ),
    page_view(SITE, "c", T0, "/signup", name="signup"),
]


@pytest.fixture(scope="module")
def archive(settings: Settings) -> Client:
    client = connect(settings)
    rows, columns = archive_rows(EVENTS)
    client.insert("events", rows, column_names=columns)
    return client


def day_query(**filters: str) -> StatsQuery:
    return StatsQuery(SITE, DAY, DAY + timedelta(days=1), filters=filters)


def test_aggregate_follows_the_metric_definitions(archive: Client) -> None:
    assert queries.aggregate(archive, day_query()) == {
        "pageviews": 5,
        "visitors": 2,
        "sessions": 3,  # a's 3-page session, a's later bounce, b's bounce
        "bounce_rate": round(2 / 3, 4),
        "avg_session_duration_s": round((40 * 60 + 0 + 0) / 3, 1),
    }


def test_session_belongs_to_the_range_where_it_starts(archive: Client) -> None:
    # From 09:20: a's first session started before, so only a's 12:00 bounce starts inside.
    q = StatsQuery(SITE, T0 + timedelta(minutes=20), DAY + timedelta(days=1))
    metrics = queries.aggregate(archive, q)
    assert (metrics["pageviews"], metrics["sessions"]) == (2, 1)


def test_sessions_list_entry_exit_and_bounce(archive: Client) -> None:
    listed = queries.sessions(archive, day_query())
    first = next(s for s in listed if s.visitor_id == "a" and s.pageviews == 3)
    assert (first.entry_path, first.exit_path, first.is_bounce, first.duration_s) == (
        "/",
        "/signup",
        False,
        2400,
    )
    assert first.referrer_domain == "news.ycombinator.com"
    assert sorted((s.visitor_id, s.pageviews) for s in listed) == [("a", 1), ("a", 3), ("b", 1)]


def test_hourly_timeseries_fills_empty_hours(archive: Client) -> None:
    points = queries.timeseries(archive, day_query(), "hour")
    assert len(points) == 24
    by_hour = {p.t.hour: (p.pageviews, p.visitors) for p in points if p.pageviews}
    assert by_hour == {9: (4, 2), 12: (1, 1)}


@pytest.mark.parametrize(
    ("by", "expected"),
    [
        ("path", [("/pricing", 2, 2), ("/", 1, 1), ("/blog", 1, 1), ("/signup", 1, 1)]),
        ("device", [("desktop", 4, 1), ("mobile", 1, 1)]),
        ("entry_path", [("/", 3, 1), ("/blog", 1, 1), ("/pricing", 1, 1)]),
        ("exit_path", [("/blog", 1, 1), ("/pricing", 1, 1), ("/signup", 3, 1)]),
        ("referrer_domain", [("", 1, 1), ("google.com", 1, 1), ("news.ycombinator.com", 3, 1)]),
    ],
)
def test_breakdown_counts_pageviews_and_visitors(archive: Client, by: str, expected: list[tuple]) -> None:
    rows = queries.breakdown(archive, day_query(), by, limit=10)
    assert sorted((r.value, r.pageviews, r.visitors) for r in rows) == sorted(expected)


def test_filter_restricts_the_page_views_counted(archive: Client) -> None:
    metrics = queries.aggregate(archive, day_query(country="DE"))
    assert (metrics["pageviews"], metrics["visitors"], metrics["sessions"]) == (1, 1, 1)


def test_unknown_dimension_and_filter_are_refused(archive: Client) -> None:
    with pytest.raises(queries.UnsupportedQuery):
        queries.breakdown(archive, day_query(), "ip_hash")
    with pytest.raises(queries.UnsupportedQuery):
        queries.aggregate(archive, day_query(**{"path; DROP TABLE events": "x"}))


def test_site_value_cannot_inject_sql(archive: Client) -> None:
    q = StatsQuery("x' OR '1'='1", DAY, DAY + timedelta(days=1))
    assert queries.aggregate(archive, q)["pageviews"] == 0


def test_realtime_counts_the_last_five_minutes(archive: Client) -> None:
    # [09:05, 09:10]: b's bounce and a's second page view; a's later page views are not yet.
    now = T0 + timedelta(minutes=10)
    assert queries.realtime(archive, SITE, now=now) == {"visitors": 2, "pageviews": 2}


def test_page_views_in_the_same_millisecond_are_ordered_by_event_id(settings: Settings) -> None:
    # The sessions stream query orders ties on ts by event_id (as a string); raw must agree,
    # whatever order the rows were archived in.
    site, at = "ties.queries.example.com", T0 + timedelta(hours=1)
    ids = sorted(str(uuid4()) for _ in range(3))
    views = [
        page_view(site, "t", at, path, event_id=event_id)
        for event_id, path in zip(ids, ["/first", "/middle", "/last"], strict=True)
    ]
    client = connect(settings)
    rows, columns = archive_rows(list(reversed(views)))
    client.insert("events", rows, column_names=columns)
    q = StatsQuery(site, DAY, DAY + timedelta(days=1))
    [session] = queries.sessions(client, q)
    assert (session.entry_path, session.exit_path, session.pageviews) == ("/first", "/last", 3)
    assert [row.value for row in queries.breakdown(client, q, "entry_path")] == ["/first"]


def test_newest_sessions_of_a_long_range(settings: Settings) -> None:
    # The list is looked for in the range's last day first, then widened: both ways must
    # give the newest sessions of the whole range.
    site, end = "newest.queries.example.com", DAY + timedelta(days=1)
    starts = {
        "old": DAY - timedelta(days=8),
        "week": DAY - timedelta(days=3),
        "day-1": T0,
        "day-2": T0 + timedelta(hours=1),
    }
    views = [page_view(site, visitor, at) for visitor, at in starts.items()]
    client = connect(settings)
    rows, columns = archive_rows(views)
    client.insert("events", rows, column_names=columns)
    month = StatsQuery(site, end - timedelta(days=30), end)

    def newest(limit: int) -> list[str]:
        return [s.visitor_id for s in queries.sessions(client, month, limit=limit)]

    assert newest(2) == ["day-2", "day-1"]
    assert newest(3) == ["day-2", "day-1", "week"]
    assert newest(10) == ["day-2", "day-1", "week", "old"]
