"""The query layer's `agg` source equals its `raw` source, report for report, over rollups
built from the same archive by storage/rollup_backfill.py (the rows the stream jobs write).

Real ClickHouse engine (the session's endpoint); the events are varied traffic over three
UTC days plus the edge cases: gaps of session gap - 1 s and + 1 s, a session straddling
midnight, page views in the same millisecond, and a site sessionised with a gap under a
minute. Ranges: whole days, today so far, the last 24 hours, one hour, an hour's first
minutes, and a segment inside a day touching no midnight (visitors from the archive).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from clickhouse_connect.driver.client import Client

from storage import queries
from storage.client import connect
from storage.queries import StatsQuery
from storage.rollup_backfill import backfill_rollups
from storage.schema import apply_migrations
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.clickhouse import Endpoint
from tests.fixtures.events import PATHS, archive_rows, page_view, visitor_attributes

pytestmark = pytest.mark.integration

SITE = "agg.queries.example.com"
SHORT_GAP_SITE = "short-gap.agg.queries.example.com"
DAY = datetime(2026, 11, 10, tzinfo=UTC)  # the middle one of three days of traffic
GAP = timedelta(seconds=queries.SESSION_GAP_S)
SHORT_GAP_S = 30
DIMENSIONS_SITE = "dimensions.agg.queries.example.com"


def traffic(rng: random.Random) -> list[PageViewEvent]:
    """Sessions of 1 to 5 page views starting 06:00 to 18:30 on each of the three days; visitor ids
    are the day's (they rotate with the daily salt), a visitor may come back later that day."""
    events = []
    for day in (DAY - timedelta(days=1), DAY, DAY + timedelta(days=1)):
        for number in range(40):
            visitor, attributes = f"{day:%d}-v{number}", visitor_attributes(rng)
            at = day + timedelta(hours=6, seconds=rng.randrange(int(timedelta(hours=12.5).total_seconds())))
            for _ in range(rng.choice([1, 1, 2, 3, 5])):
                events.append(page_view(SITE, visitor, at, rng.choice(PATHS), **attributes))
                at += timedelta(seconds=rng.randrange(5, 600), milliseconds=rng.randrange(1000))
    return events


def edge_cases() -> list[PageViewEvent]:
    t = DAY + timedelta(hours=9, minutes=20)
    return [
        # one session: the gap is exactly one second short of the session gap
        page_view(SITE, "gap-1", t, "/a", referrer_domain="google.com"),
        page_view(SITE, "gap-1", t + GAP - timedelta(seconds=1), "/b"),
        # two sessions: one second over
        page_view(SITE, "gap+1", t, "/a", utm_source="newsletter"),
        page_view(SITE, "gap+1", t + GAP + timedelta(seconds=1), "/c"),
        # one session from 23:50 to 00:20 the next day (the same id: a batch import, say)
        page_view(SITE, "midnight", DAY + timedelta(hours=23, minutes=50), "/late", country="JP"),
        page_view(SITE, "midnight", DAY + timedelta(days=1, minutes=10), "/later", country="JP"),
        page_view(SITE, "midnight", DAY + timedelta(days=1, minutes=20), "/latest", country="JP"),
        # three page views in one millisecond: ordered by event_id
        *(
            page_view(SITE, "ties", t, path, event_id=event_id)
            for path, event_id in zip(("/x", "/y", "/z"), sorted(str(uuid4()) for _ in range(3)), strict=True)
        ),
    ]


def short_gap_events() -> list[PageViewEvent]:
    t, views = DAY + timedelta(hours=10, minutes=0, seconds=50), []
    for gap_s in (0, 29, 31, 30, 45, 10, 200, 5):  # splits after 31, 45 and 200 s
        t += timedelta(seconds=gap_s)
        views.append(page_view(SHORT_GAP_SITE, "quick", t, f"/s{gap_s}"))
    return views


def dimension_events() -> list[PageViewEvent]:
    """Hand-made visitors for the issue-16 dimensions, whose answers are written out in the test:
    screen widths on each side of 576, 992 and 1440 px and unknown (0); utm_* that change after
    a session's first page view (which alone counts for a session dimension)."""
    t, later = DAY + timedelta(hours=11), timedelta(minutes=5)
    campaign = {"utm_source": "newsletter", "utm_medium": "email", "utm_campaign": "launch"}
    return [
        # p: one session on a phone; its second page view's utm_* do not count.
        page_view(DIMENSIONS_SITE, "p", t, "/", screen_width=390, language="de-DE", **campaign,
                  utm_content="header", utm_term="analytics"),
        page_view(DIMENSIONS_SITE, "p", t + later, "/b", screen_width=390, language="de-DE",
                  utm_content="footer"),
        # l: one session, 1439 px (Laptop) then 1440 px (Desktop).
        page_view(DIMENSIONS_SITE, "l", t, "/", screen_width=1439, language="en-US", utm_medium="social",
                  utm_campaign="launch", utm_content="footer", utm_term="kafka"),
        page_view(DIMENSIONS_SITE, "l", t + later, "/c", screen_width=1440, language="en-US"),
        # t: a bounce at exactly 576 px (Tablet), no language.
        page_view(DIMENSIONS_SITE, "t", t, "/", screen_width=576),
        # u: unknown width; two sessions, each with its own utm_content.
        page_view(DIMENSIONS_SITE, "u", t, "/", language="fr-FR", utm_content="header"),
        page_view(DIMENSIONS_SITE, "u", t + timedelta(hours=2), "/", language="fr-FR", utm_content="footer"),
        # m: 575 px (Mobile), then 991 px (Tablet) in a second session.
        page_view(DIMENSIONS_SITE, "m", t, "/", screen_width=575, language="en-GB"),
        page_view(DIMENSIONS_SITE, "m", t + timedelta(hours=3), "/", screen_width=991, language="en-GB"),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint) -> Iterator[Client]:
    """The archive of both sites and their rollups, built by the backfill."""
    settings = Settings(
        home=tmp_path_factory.mktemp("agg-queries-home"),
        clickhouse_url=clickhouse_endpoint.url,
        clickhouse_password=clickhouse_endpoint.password,
    )
    apply_migrations(settings)
    client = connect(settings)
    rows, columns = archive_rows(
        traffic(random.Random(14)) + edge_cases() + short_gap_events() + dimension_events()
    )
    client.insert("events", rows, column_names=columns)
    first, last = (DAY - timedelta(days=1)).date(), (DAY + timedelta(days=2)).date()
    backfill_rollups(client, SITE, first, last)
    backfill_rollups(client, SHORT_GAP_SITE, first, last, session_gap_s=SHORT_GAP_S)
    backfill_rollups(client, DIMENSIONS_SITE, first, last)
    yield client


RANGES = {
    "three whole days": (DAY - timedelta(days=1), DAY + timedelta(days=2)),
    "one whole day": (DAY, DAY + timedelta(days=1)),
    "today so far": (DAY + timedelta(days=1), DAY + timedelta(days=1, hours=13, minutes=7)),
    "last 24 hours": (DAY + timedelta(hours=14), DAY + timedelta(days=1, hours=14)),
    "last 24 hours to the minute": (
        DAY + timedelta(hours=14, minutes=23),
        DAY + timedelta(days=1, hours=14, minutes=23),
    ),
    "7 days to now": (DAY - timedelta(days=5), DAY + timedelta(days=1, hours=16, minutes=41)),
    "one hour": (DAY + timedelta(hours=9), DAY + timedelta(hours=10)),
    "an hour's first minutes": (DAY + timedelta(hours=9), DAY + timedelta(hours=9, minutes=40)),
    "inside a day (raw visitors)": (
        DAY + timedelta(hours=9, minutes=15),
        DAY + timedelta(hours=13, minutes=45),
    ),
}


def reports(client: Client, q: StatsQuery, source: queries.Source) -> dict[str, object]:
    found: dict[str, object] = {
        "aggregate": queries.aggregate(client, q, source),
        "sessions": queries.sessions(client, q, 1000, source),
    }
    for interval in ("minute", "hour", "day"):
        found[f"by {interval}"] = queries.timeseries(client, q, interval, source)
        found[f"sessions by {interval}"] = queries.session_timeseries(client, q, interval, source)
    for by in queries.DIMENSIONS:
        found[f"breakdown {by}"] = queries.breakdown(client, q, by, 100, source)
    for by in queries.SESSION_DIMENSIONS:  # visits, bounces, durations per value (Plausible's API)
        found[f"session breakdown {by}"] = queries.session_breakdown(client, q, by, 100, source)
    return found


@pytest.mark.parametrize("name", list(RANGES))
def test_agg_answers_every_report_as_raw_does(store: Client, name: str) -> None:
    q = StatsQuery(SITE, *RANGES[name])
    raw, agg = reports(store, q, "raw"), reports(store, q, "agg")
    assert raw["aggregate"]["pageviews"] > 0
    for report in raw:
        assert agg[report] == raw[report], report


def test_gap_rule_straddling_midnight_and_ties_seen_by_agg(store: Client) -> None:
    q = StatsQuery(SITE, DAY, DAY + timedelta(days=1))
    listed = {
        s.visitor_id: s for s in queries.sessions(store, q, 1000, "agg") if not s.visitor_id[0].isdigit()
    }
    assert {v: s.pageviews for v, s in listed.items()} == {"gap-1": 2, "gap+1": 1, "midnight": 3, "ties": 3}
    assert (listed["midnight"].exit_path, listed["ties"].entry_path) == ("/latest", "/x")
    next_day = StatsQuery(SITE, DAY + timedelta(days=1), DAY + timedelta(days=2))
    assert "midnight" not in {s.visitor_id for s in queries.sessions(store, next_day, 1000, "agg")}


def test_a_session_gap_under_a_minute(store: Client) -> None:
    q = StatsQuery(SHORT_GAP_SITE, DAY, DAY + timedelta(days=1), session_gap_s=SHORT_GAP_S)
    assert queries.aggregate(store, q, "agg")["sessions"] == 4
    assert reports(store, q, "agg") == reports(store, q, "raw")


@pytest.mark.parametrize("now", [DAY + timedelta(days=1, minutes=22), DAY + timedelta(hours=19, minutes=12)])
def test_live_visitors_as_raw_counts_them(store: Client, now: datetime) -> None:
    # Moments when no session runs on past `now` (the backfill writes sessions closed).
    assert queries.realtime(store, SITE, now, "agg") == queries.realtime(store, SITE, now, "raw")


# value → (page views, visitors) over DAY, worked out by hand from dimension_events().
KNOWN_BREAKDOWNS = {
    "screen_size": {"Mobile": (3, 2), "Tablet": (2, 2), "Laptop": (1, 1), "Desktop": (1, 1), "": (2, 1)},
    "language": {"de-DE": (2, 1), "en-US": (2, 1), "fr-FR": (2, 1), "en-GB": (2, 1), "": (1, 1)},
    "utm_medium": {"email": (2, 1), "social": (2, 1), "": (5, 3)},
    "utm_campaign": {"launch": (4, 2), "": (5, 3)},
    "utm_content": {"header": (3, 2), "footer": (3, 2), "": (3, 2)},
    "utm_term": {"analytics": (2, 1), "kafka": (2, 1), "": (5, 3)},
}


@pytest.mark.parametrize("source", ["raw", "agg"])
@pytest.mark.parametrize("by", list(KNOWN_BREAKDOWNS))
def test_issue_16_dimensions_give_the_known_answers(store: Client, by: str, source: queries.Source) -> None:
    q = StatsQuery(DIMENSIONS_SITE, DAY, DAY + timedelta(days=1))
    rows = queries.breakdown(store, q, by, 100, source)
    assert {row.value: (row.pageviews, row.visitors) for row in rows} == KNOWN_BREAKDOWNS[by]


@pytest.mark.parametrize(
    ("name", "value", "pageviews"), [("screen_size", "Mobile", 3), ("language", "de-DE", 2)]
)
def test_filter_by_a_new_event_dimension(store: Client, name: str, value: str, pageviews: int) -> None:
    q = StatsQuery(DIMENSIONS_SITE, DAY, DAY + timedelta(days=1), filters={name: value})
    for source in ("raw", "agg"):
        assert queries.aggregate(store, q, source)["pageviews"] == pageviews
