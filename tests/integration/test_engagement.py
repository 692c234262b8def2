"""Engagement (time on page, scroll depth) per page: known answers, agg equal to raw, and
engagement events leaving every page-view number as it was (storage/queries/contract.py);
engaged sessions (10 s of engaged time or more) are no bounces, on both sources.

Real ClickHouse engine (the session's endpoint): events go into `events` as the archiver
writes them, so engagement_minute is filled by its materialized view (migration 0023) and
the rollups by storage/rollup_backfill.py (the rows the stream jobs write).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from archiver.rows import archive_row, insert_rows
from dashboard.app import build_app
from storage import queries
from storage.client import connect
from storage.queries import PageEngagement, StatsQuery
from storage.rollup_backfill import backfill_rollups
from storage.schema import apply_migrations
from storage.tables import SYNTHETIC_PARTITION
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.events import (
    ENGAGED_BOUNCE_ANSWER,
    PATHS,
    archive_rows,
    engaged_bounce_visits,
    page_view,
)
from tests.fixtures.stats_api import api_json

pytestmark = pytest.mark.integration

SITE = "engagement.queries.example.com"
# The same page views as SITE, without a single engagement event.
TWIN = "no-engagement.queries.example.com"
RANDOM_SITE = "random-engagement.queries.example.com"
RETRIED_SITE = "retried-engagement.queries.example.com"
BOUNCE_SITE = "engaged-bounce.queries.example.com"
DAY = datetime(2026, 11, 10, tzinfo=UTC)
T0 = DAY + timedelta(hours=9)


def engagement(site: str, visitor: str, ts: datetime, path: str, sd: int, e: int) -> PageViewEvent:
    return page_view(site, visitor, ts, path, name="engagement", scroll_depth=sd, engagement_ms=e)


def page_views(site: str) -> list[PageViewEvent]:
    return [
        page_view(site, "a", T0, "/"),
        page_view(site, "a", T0 + timedelta(minutes=3), "/pricing"),
        page_view(site, "b", T0 + timedelta(minutes=5), "/"),
        page_view(site, "c", T0 + timedelta(minutes=10), "/"),  # a bounce (0 s engaged on SITE)
        page_view(site, "a", T0 + timedelta(days=1), "/"),  # the next day: another visitor
    ]


# a scrolls "/" to 40 % then 80 % over two engagement events (20 + 10 s), then 5 s on /pricing
# read to the end; b reads "/" 30 s to 20 %; c leaves "/" at once (0 s, 0 %); the next day's a
# spends 6 s on "/" down to 50 %.
ENGAGEMENT = [
    engagement(SITE, "a", T0 + timedelta(seconds=30), "/", 40, 20_000),
    engagement(SITE, "a", T0 + timedelta(minutes=2, seconds=10), "/", 80, 10_000),
    engagement(SITE, "a", T0 + timedelta(minutes=4), "/pricing", 100, 5_000),
    engagement(SITE, "b", T0 + timedelta(minutes=6), "/", 20, 30_000),
    engagement(SITE, "c", T0 + timedelta(minutes=10, seconds=1), "/", 0, 0),
    engagement(SITE, "a", T0 + timedelta(days=1, seconds=6), "/", 50, 6_000),
]


def random_traffic(rng: random.Random) -> list[PageViewEvent]:
    """Visitors over three days reading pages, each page view followed by 0 to 3 engagement
    events on it (the deepest point only grows, as the trackers send it)."""
    events = []
    for day in (DAY - timedelta(days=1), DAY, DAY + timedelta(days=1)):
        for number in range(40):
            at = day + timedelta(hours=6, seconds=rng.randrange(12 * 3600))
            for _ in range(rng.choice([1, 2, 3])):
                path, depth = rng.choice(PATHS), rng.randrange(0, 60)
                events.append(page_view(RANDOM_SITE, f"{day:%d}-v{number}", at, path))
                for _ in range(rng.randrange(4)):
                    at += timedelta(seconds=rng.randrange(1, 400), milliseconds=rng.randrange(1000))
                    depth = min(100, depth + rng.randrange(0, 30))
                    events.append(
                        engagement(
                            RANDOM_SITE, f"{day:%d}-v{number}", at, path, depth, rng.randrange(0, 90_000)
                        )
                    )
                at += timedelta(seconds=rng.randrange(5, 600))
    return events


@pytest.fixture(scope="module")
def store(dashboard_settings: Settings) -> Client:
    client = connect(dashboard_settings)
    events = page_views(SITE) + ENGAGEMENT + page_views(TWIN) + random_traffic(random.Random(16))
    events += engaged_bounce_visits(BOUNCE_SITE, T0, timedelta(seconds=dashboard_settings.session_gap_s))
    rows, columns = archive_rows(events)
    client.insert("events", rows, column_names=columns)
    first, last = (DAY - timedelta(days=1)).date(), (DAY + timedelta(days=2)).date()
    for site in (SITE, TWIN, RANDOM_SITE, BOUNCE_SITE):
        backfill_rollups(client, site, first, last)
    return client


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings, store: Client) -> FlaskClient:
    return build_app(dashboard_settings, clock=lambda: DAY + timedelta(days=2)).server.test_client()


def both(store: Client, q: StatsQuery, paths: list[str]) -> dict[str, PageEngagement]:
    """The raw answer, after checking agg gives the same."""
    raw = queries.engagement(store, q, paths, source="raw")
    assert queries.engagement(store, q, paths, source="agg") == raw
    return raw


def test_time_on_page_and_scroll_depth_are_per_engaged_visitor(store: Client) -> None:
    day = StatsQuery(SITE, DAY, DAY + timedelta(days=1))
    assert both(store, day, ["/", "/pricing", "/blog"]) == {
        # (20 + 10 + 30 + 0) s over a, b, c; each one's deepest: (80 + 20 + 0) / 3
        "/": PageEngagement("/", 3, 20.0, 33.3),
        "/pricing": PageEngagement("/pricing", 1, 5.0, 100.0),
    }
    two_days = StatsQuery(SITE, DAY, DAY + timedelta(days=2))
    # the next day's a is a visitor of its own: 66 s over 4, (80 + 20 + 0 + 50) / 4
    assert both(store, two_days, ["/"]) == {"/": PageEngagement("/", 4, 16.5, 37.5)}
    first_minutes = StatsQuery(SITE, T0, T0 + timedelta(minutes=2))
    assert both(store, first_minutes, ["/"]) == {"/": PageEngagement("/", 1, 20.0, 40.0)}


RANGES = {
    "three whole days": (DAY - timedelta(days=1), DAY + timedelta(days=2)),
    "one whole day": (DAY, DAY + timedelta(days=1)),
    "last 24 hours to the minute": (
        DAY + timedelta(hours=14, minutes=23), DAY + timedelta(days=1, hours=14, minutes=23)
    ),
    "one hour": (DAY + timedelta(hours=9), DAY + timedelta(hours=10)),
    "inside a day": (DAY + timedelta(hours=9, minutes=15), DAY + timedelta(hours=13, minutes=45)),
}  # fmt: skip


@pytest.mark.parametrize("name", RANGES)
def test_agg_equals_raw_on_generated_traffic(store: Client, name: str) -> None:
    start, end = RANGES[name]
    q = StatsQuery(RANDOM_SITE, start, end)
    raw = queries.engagement(store, q, PATHS, source="raw")
    assert raw, "the range holds engagement"
    assert queries.engagement(store, q, PATHS, source="agg") == raw


def test_a_filtered_report_counts_the_filtered_engagement_events(store: Client) -> None:
    q = StatsQuery(SITE, DAY, DAY + timedelta(days=1), filters={"path": "/pricing"})
    assert queries.engagement(store, q, ["/", "/pricing"], source="agg") == {
        "/pricing": PageEngagement("/pricing", 1, 5.0, 100.0)
    }


def test_a_retried_archive_insert_adds_its_engaged_time_once(store: Client) -> None:
    events = [
        page_view(RETRIED_SITE, "r", T0, "/"),
        engagement(RETRIED_SITE, "r", T0 + timedelta(seconds=9), "/", 70, 9_000),
    ]
    lines = [archive_row(event, SYNTHETIC_PARTITION, offset) for offset, event in enumerate(events)]
    for _ in range(2):  # the archiver's retry of a batch whose answer was lost
        insert_rows(store, lines, deduplication_token="engagement-retry-batch")
    q = StatsQuery(RETRIED_SITE, DAY, DAY + timedelta(days=1))
    assert both(store, q, ["/"]) == {"/": PageEngagement("/", 1, 9.0, 70.0)}


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_engagement_events_change_no_page_view_number(
    api: FlaskClient, dashboard_settings: Settings, source: str
) -> None:
    def report(site: str) -> list[Any]:
        """Every number but the bounces (engaged sessions are no bounces: tested below)."""
        span = {"site": site, "from": "2026-11-10T00:00:00Z", "to": "2026-11-12T00:00:00Z", "source": source}
        aggregate = api_json(api, dashboard_settings, "/stats/aggregate", **span)
        del aggregate["bounce_rate"]
        breakdowns = [
            [{k: row[k] for k in ("value", "pageviews", "visitors")} for row in
             api_json(api, dashboard_settings, "/stats/breakdown", **span, by=by)]
            for by in ("path", "entry_path", "exit_path")
        ]  # fmt: skip
        return [
            aggregate,
            api_json(api, dashboard_settings, "/stats/timeseries", **span, interval="hour"),
            breakdowns,
            [
                {k: v for k, v in session.items() if k not in ("visitor_id", "is_bounce", "engaged_s")}
                for session in api_json(api, dashboard_settings, "/sessions", **span)
            ],
        ]

    assert report(SITE) == report(TWIN)
    # a's two page views; b read "/" 30 s: engaged, no bounce; c (0 s) and the next day's a
    # (6 s) bounce. Without engagement events, b bounces too.
    span = {"from": "2026-11-10T00:00:00Z", "to": "2026-11-12T00:00:00Z", "source": source}
    assert api_json(api, dashboard_settings, "/stats/aggregate", site=SITE, **span) == {
        "pageviews": 5, "visitors": 4, "sessions": 4, "bounce_rate": 0.5, "avg_session_duration_s": 45.0,
    }  # fmt: skip
    assert api_json(api, dashboard_settings, "/stats/aggregate", site=TWIN, **span)["bounce_rate"] == 0.75


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_a_one_page_session_with_10_s_of_engaged_time_is_no_bounce(
    api: FlaskClient, dashboard_settings: Settings, source: str
) -> None:
    """12 s: no bounce; 3 s: a bounce; 6 s twice: no bounce; sent after the session ended: a
    bounce; exactly the gap after the page view: no bounce; an engagement event without a page
    view: no session, no visitor, no page view."""
    span = {
        "site": BOUNCE_SITE,
        "from": "2026-11-10T00:00:00Z",
        "to": "2026-11-11T00:00:00Z",
        "source": source,
    }
    answer = ENGAGED_BOUNCE_ANSWER
    assert api_json(api, dashboard_settings, "/stats/aggregate", **span) == {
        "pageviews": answer["pageviews"],
        "visitors": answer["sessions"],
        "sessions": answer["sessions"],
        "bounce_rate": round(answer["bounces"] / answer["sessions"], 4),
        "avg_session_duration_s": round(10 / answer["sessions"], 1),
    }
    sessions = api_json(api, dashboard_settings, "/sessions", **span)
    assert {s["visitor_id"]: (s["is_bounce"], s["engaged_s"]) for s in sessions} == {
        "read-12s": (False, 12.0),
        "read-3s": (True, 3.0),
        "read-6s-twice": (False, 12.0),
        "read-after-the-end": (True, 0.0),
        "read-at-the-gap": (False, 10.0),
        "two-pages": (False, 0.0),
    }


def test_the_engaged_time_that_ends_a_bounce_is_a_setting(
    dashboard_settings: Settings, store: Client
) -> None:
    """TALLY_ENGAGED_BOUNCE_MS = 15 s: the 12 s, 6 + 6 s and 10 s readers bounce too (raw; the
    rollups take it when the stream jobs, or a replay, write them)."""
    settings = dashboard_settings.model_copy(update={"engaged_bounce_ms": 15_000})
    api = build_app(settings, clock=lambda: DAY + timedelta(days=2)).server.test_client()
    span = {
        "site": BOUNCE_SITE,
        "from": "2026-11-10T00:00:00Z",
        "to": "2026-11-11T00:00:00Z",
        "source": "raw",
    }
    assert api_json(api, settings, "/stats/aggregate", **span)["bounce_rate"] == round(5 / 6, 4)


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_the_page_breakdown_shows_time_on_page_and_scroll_depth(
    api: FlaskClient, dashboard_settings: Settings, source: str
) -> None:
    rows = api_json(api, dashboard_settings, "/stats/breakdown", site=SITE, by="path", source=source,
               **{"from": "2026-11-10T00:00:00Z", "to": "2026-11-11T00:00:00Z"})  # fmt: skip
    assert rows == [
        {"value": "/", "pageviews": 3, "visitors": 3, "time_on_page_s": 20.0, "scroll_depth": 33.3},
        {"value": "/pricing", "pageviews": 1, "visitors": 1, "time_on_page_s": 5.0, "scroll_depth": 100.0},
    ]
    twin = api_json(api, dashboard_settings, "/stats/breakdown", site=TWIN, by="path", source=source,
               **{"from": "2026-11-10T00:00:00Z", "to": "2026-11-11T00:00:00Z"})  # fmt: skip
    assert [(row["time_on_page_s"], row["scroll_depth"]) for row in twin] == [(0.0, 0.0), (0.0, 0.0)]
    other = api_json(api, dashboard_settings, "/stats/breakdown", site=SITE, by="country", source=source,
                **{"from": "2026-11-10T00:00:00Z", "to": "2026-11-11T00:00:00Z"})  # fmt: skip
    assert all("time_on_page_s" not in row for row in other)


def test_the_migration_backfills_the_engagement_archived_before_it(
    tmp_path_factory: pytest.TempPathFactory, dashboard_settings: Settings
) -> None:
    """Engagement events archived while engagement_minute and its view did not exist (a
    database of its own, 0023 undone but for its columns): applying 0023 counts them."""
    home = tmp_path_factory.mktemp("backfill-home")
    update = {"home": home, "clickhouse_database": "engagement_backfill"}
    settings = dashboard_settings.model_copy(update=update)
    apply_migrations(settings)
    client = connect(settings)
    client.command("DROP VIEW engagement_minute_from_events")
    client.command("DROP TABLE engagement_minute")
    client.command("DELETE FROM schema_migrations WHERE version = '0023_engagement'")
    rows, columns = archive_rows(page_views(SITE) + ENGAGEMENT)
    client.insert("events", rows, column_names=columns)

    assert apply_migrations(settings) == ["0023_engagement"]
    day = StatsQuery(SITE, DAY, DAY + timedelta(days=1))
    assert both(client, day, ["/", "/pricing"]) == {
        "/": PageEngagement("/", 3, 20.0, 33.3),
        "/pricing": PageEngagement("/pricing", 1, 5.0, 100.0),
    }
