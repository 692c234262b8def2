"""The day-level aggregates of goals and engagement (migrations 0026, 0027): `agg` reads a
range's whole UTC days from them and its edge minutes from the minute tables, and must give
raw's numbers on any range — starting or ending mid-day, a minute either side of midnight, a
second into a minute, whole days with edges on both sides.

Real ClickHouse engine (the session's endpoint). Traffic over four days, thickest around the
midnights and the ranges' edges: page views, custom events with revenue and properties, and
engagement events; visitor ids reused across days (each day's another visitor) and sessions
that run across midnight.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from clickhouse_connect.driver.client import Client

from storage import goals as goal_store
from storage import queries
from storage.client import connect
from storage.queries import StatsQuery
from storage.queries.agg import ceil_minute
from storage.schema import apply_migrations
from storage.sites import add_site
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.clickhouse import Endpoint
from tests.fixtures.events import PATHS, archive_rows, page_view

pytestmark = pytest.mark.integration

SITE = "day-aggregates.queries.example.com"
DAY = datetime(2026, 11, 14, tzinfo=UTC)
M = timedelta(minutes=1)
MIDNIGHTS = [DAY + timedelta(days=n) for n in range(1, 4)]
GOALS = ({"event_name": "Signup"}, {"event_name": "Purchase", "currency": "EUR"}, {"page_pattern": "/blog*"})


def moment(rng: random.Random) -> datetime:
    """Anywhere in the four days, or within ten minutes of a midnight or of 12:30 (edges)."""
    if rng.random() < 0.4:
        return DAY + timedelta(seconds=rng.randrange(4 * 86400), milliseconds=rng.randrange(1000))
    anchor = rng.choice([*MIDNIGHTS, DAY + timedelta(days=1, hours=12, minutes=30)])
    return anchor + timedelta(seconds=rng.randrange(-600, 600), milliseconds=rng.randrange(1000))


def traffic(rng: random.Random) -> list[PageViewEvent]:
    events = []
    for number in range(600):
        at, visitor = moment(rng), f"d{number % 70}"
        for _ in range(rng.choice([1, 2, 3])):  # a few page views, some across midnight
            path = rng.choice([*PATHS, "/blog/spark-streaming"])
            events.append(page_view(SITE, visitor, at, path))
            for _ in range(rng.randrange(3)):
                at += timedelta(seconds=rng.randrange(1, 200))
                events.append(
                    page_view(
                        SITE, visitor, at, path, name="engagement",
                        scroll_depth=rng.randrange(101), engagement_ms=rng.randrange(60_000),
                    )
                )  # fmt: skip
            if rng.random() < 0.3:
                name = rng.choice(["Signup", "Purchase", "Download"])
                revenue = {}
                if name == "Purchase":
                    amount, currency = f"{rng.randrange(1, 10_000) / 100}", rng.choice(["EUR", "USD"])
                    revenue = {"revenue_amount": amount, "revenue_currency": currency}
                props = {"plan": rng.choice(["pro", "free"])} if rng.random() < 0.5 else {}
                events.append(page_view(SITE, visitor, at, path, name=name, props=props, **revenue))
            at += timedelta(seconds=rng.randrange(10, 900))
    return events


TRAFFIC = traffic(random.Random(26))

RANGES = {
    "four whole days": (DAY, DAY + timedelta(days=4)),
    "mid-day, two whole days, mid-day": (
        DAY + timedelta(hours=7, minutes=13), DAY + timedelta(days=3, hours=16, minutes=2)
    ),
    "mid-day to midnight": (DAY + timedelta(days=1, hours=12, minutes=31), DAY + timedelta(days=3)),
    "midnight to mid-day": (DAY + timedelta(days=1), DAY + timedelta(days=2, hours=12, minutes=29)),
    "a minute either side of midnight": (MIDNIGHTS[0] - M, MIDNIGHTS[0] + M),
    "the last minute of a day": (MIDNIGHTS[1] - M, MIDNIGHTS[1]),
    "the first minute of a day": (MIDNIGHTS[1], MIDNIGHTS[1] + M),
    "across midnight, no whole day": (
        DAY + timedelta(days=1, hours=12, minutes=30), DAY + timedelta(days=2, hours=12, minutes=30)
    ),
    "seconds into minutes": (
        DAY + timedelta(hours=23, minutes=55, seconds=30), DAY + timedelta(days=2, minutes=4, seconds=1)
    ),
    "inside one day": (
        DAY + timedelta(days=1, hours=12, minutes=25), DAY + timedelta(days=1, hours=12, minutes=35)
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint) -> Iterator[Client]:
    settings = Settings(
        home=tmp_path_factory.mktemp("day-aggregates-home"),
        clickhouse_url=clickhouse_endpoint.url,
        clickhouse_password=clickhouse_endpoint.password,
    )
    apply_migrations(settings)
    client = connect(settings)
    add_site(client, SITE)
    for fields in GOALS:
        goal_store.add_goal(client, goal_store.make_goal(SITE, **fields))
    rows, columns = archive_rows(TRAFFIC)
    for start in range(0, len(rows), 500):  # several inserts: unmerged parts, as the archiver leaves them
        client.insert("events", rows[start : start + 500], column_names=columns)
    yield client


def reports(client: Client, q: StatsQuery, source: queries.Source) -> dict[str, object]:
    return {
        "goals": queries.goals(client, q, source),
        "custom events": queries.custom_events(client, q, 100, source),
        "engagement": queries.engagement(client, q, [*PATHS, "/blog/spark-streaming", "/nowhere"], source),
    }


@pytest.mark.parametrize("name", list(RANGES))
def test_agg_from_days_and_edge_minutes_equals_raw(store: Client, name: str) -> None:
    """agg counts the minutes starting in the range (its resolution): raw over those minutes."""
    start, end = RANGES[name]
    raw = reports(store, StatsQuery(SITE, ceil_minute(start), ceil_minute(end)), "raw")
    assert reports(store, StatsQuery(SITE, start, end), "agg") == raw
    assert raw["custom events"] and raw["engagement"], "the range holds events"


def test_a_range_holding_no_minute_start_counts_nothing(store: Client) -> None:
    q = StatsQuery(SITE, DAY + timedelta(days=1, seconds=10), DAY + timedelta(days=1, seconds=50))
    found = reports(store, q, "agg")
    assert [
        (row.events, row.visitors, row.revenue_events, row.conversion_rate) for row in found["goals"]
    ] == [(0, 0, 0, 0.0)] * len(GOALS)
    assert (found["custom events"], found["engagement"]) == ([], {})


def test_the_ranges_have_the_shapes_they_are_named_for(store: Client) -> None:
    """Each range's goals are non-trivial where it counts (not all zeros by accident)."""
    q = StatsQuery(SITE, *RANGES["mid-day, two whole days, mid-day"])
    rows = {row.goal: row for row in queries.goals(store, q, "agg")}
    assert all(row.visitors > 0 for row in rows.values()), rows
    assert rows["Purchase"].revenue_events > 0


def test_the_migrations_backfill_what_the_archive_already_holds(
    tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint
) -> None:
    """An archive from before migrations 0026 and 0027: applying them fills the day tables."""
    settings = Settings(
        home=tmp_path_factory.mktemp("day-aggregates-backfill-home"),
        clickhouse_url=clickhouse_endpoint.url,
        clickhouse_password=clickhouse_endpoint.password,
        clickhouse_database="day_aggregates_backfill",
    )
    apply_migrations(settings)
    client = connect(settings)
    for view in (
        "goal_events_day_from_events",
        "goal_visitors_day_from_events",
        "engagement_day_from_events",
    ):
        client.command(f"DROP VIEW {view}")
    for table in ("goal_events_day", "goal_visitors_day", "engagement_day"):
        client.command(f"DROP TABLE {table}")
    client.command(
        "DELETE FROM schema_migrations WHERE version IN ('0026_goals_by_day', '0027_engagement_by_day')"
    )
    add_site(client, SITE)
    for fields in GOALS:
        goal_store.add_goal(client, goal_store.make_goal(SITE, **fields))
    rows, columns = archive_rows(TRAFFIC)
    client.insert("events", rows, column_names=columns)

    assert apply_migrations(settings) == ["0026_goals_by_day", "0027_engagement_by_day"]
    q = StatsQuery(SITE, *RANGES["mid-day, two whole days, mid-day"])
    assert reports(client, q, "agg") == reports(client, q, "raw")
    # and the views count what is archived after them
    later = [page_view(SITE, "late", DAY + timedelta(days=2, hours=3), "/blog", name="Signup")]
    rows, columns = archive_rows(later)
    client.insert("events", rows, column_names=columns)
    assert reports(client, q, "agg") == reports(client, q, "raw")
