"""A site's own time zone (storage/calendar.py): its hours, days, weeks and months start at its
local midnight, a daylight-saving day has 23 or 25 hours, and `agg` (the rollups, read as UTC
pieces) gives raw's numbers for every local bucket — in Europe/Berlin across both of 2026's
clock changes and in Asia/Kolkata (+05:30), whose local days begin at :30 of a UTC hour.

Real ClickHouse engine (the session's endpoint); rollups built from the archive by the backfill
(the Spark jobs' rows equal the backfill's: test_stream_agg_equals_raw.py).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

import pytest
from clickhouse_connect.driver.client import Client

from storage import queries
from storage.calendar import local_midnight, zone
from storage.client import connect
from storage.queries import StatsQuery
from storage.rollup_backfill import backfill_rollups
from storage.schema import apply_migrations
from storage.sites import add_site, set_timezone, site_timezone
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.clickhouse import Endpoint
from tests.fixtures.events import PATHS, archive_rows, page_view, visitor_attributes

pytestmark = pytest.mark.integration

BERLIN, KOLKATA = "Europe/Berlin", "Asia/Kolkata"
BERLIN_SITE, KOLKATA_SITE = "berlin.timezones.example.com", "kolkata.timezones.example.com"
# The known answers' own sites: nothing else in them, so agg's unfiltered numbers are checked too.
KNOWN_BERLIN, KNOWN_KOLKATA = "known.berlin.timezones.example.com", "known.kolkata.timezones.example.com"
SPRING, AUTUMN = date(2026, 3, 29), date(2026, 10, 25)  # Berlin's 23-hour and 25-hour days


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# Known answers: (UTC instant, visitor) page views of the Berlin site.
BERLIN_KNOWN = [
    ("2026-03-28 22:59:59", "a"),  # 23:59:59 on the 28th (CET, +01:00)
    ("2026-03-28 23:00:00", "b"),  # 00:00 on the 29th
    ("2026-03-28 23:30:00", "c"),  # 00:30 on the 29th, UTC day 28 ...
    ("2026-03-29 00:30:00", "c"),  # ... 01:30 on the 29th, UTC day 29: the same id, two visitors
    ("2026-03-29 01:00:00", "d"),  # 03:00 CEST: 02:00-03:00 never happened on the 29th
    ("2026-03-29 21:30:00", "p"),  # 23:30 CEST on the 29th ...
    ("2026-03-29 21:59:59", "e"),  # 23:59:59 CEST on the 29th
    ("2026-03-29 22:30:00", "p"),  # ... 00:30 on the 30th, the same UTC day: one visitor, in both days
    ("2026-03-29 22:00:00", "f"),  # 00:00 on the 30th
    ("2026-10-25 00:30:00", "g"),  # 02:30 CEST on the 25th ...
    ("2026-10-25 01:30:00", "h"),  # ... and 02:30 CET, an hour later: the repeated hour
    ("2026-10-25 22:59:59", "i"),  # 23:59:59 CET on the 25th
]
KOLKATA_KNOWN = [
    ("2026-03-28 18:29:59", "k"),  # 23:59:59 on the 28th (+05:30)
    ("2026-03-28 18:30:00", "l"),  # 00:00 on the 29th
    ("2026-03-29 18:29:00", "m"),  # 23:59 on the 29th
    ("2026-03-29 18:30:00", "n"),  # 00:00 on the 30th
]


def traffic(rng: random.Random, site: str, days: list[date]) -> list[PageViewEvent]:
    """Sessions on every UTC hour of the days, thickest near UTC and local midnights; a
    visitor id per UTC day, several sessions each, some across midnight."""
    events = []
    for day in days:
        start = datetime.combine(day, datetime.min.time(), UTC)
        for number in range(60):
            visitor, attributes = f"{day:%m%d}-{number % 25}", visitor_attributes(rng)
            if rng.random() < 0.5:
                at = start + timedelta(seconds=rng.randrange(86400))
            else:  # near 00:00, 18:30, 22:00 or 23:00 UTC: the local midnights of both zones
                anchor = start + timedelta(hours=rng.choice([0, 18.5, 22, 23, 24]))
                at = anchor + timedelta(seconds=rng.randrange(-1200, 1200))
            for _ in range(rng.choice([1, 1, 2, 3, 4])):
                events.append(page_view(site, visitor, at, rng.choice(PATHS), **attributes))
                at += timedelta(seconds=rng.randrange(5, 900), milliseconds=rng.randrange(1000))
    return events


DAYS = [SPRING + timedelta(days=n) for n in range(-3, 3)] + [AUTUMN + timedelta(days=n) for n in range(-3, 3)]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint) -> Iterator[Client]:
    settings = Settings(
        home=tmp_path_factory.mktemp("timezones-home"),
        clickhouse_url=clickhouse_endpoint.url,
        clickhouse_password=clickhouse_endpoint.password,
    )
    apply_migrations(settings)
    client = connect(settings)
    add_site(client, BERLIN_SITE, BERLIN)
    add_site(client, KOLKATA_SITE)
    set_timezone(client, KOLKATA_SITE, KOLKATA)
    rng = random.Random(20)
    events = [page_view(KNOWN_BERLIN, visitor, utc(at), "/known") for at, visitor in BERLIN_KNOWN]
    events += [page_view(KNOWN_KOLKATA, visitor, utc(at), "/known") for at, visitor in KOLKATA_KNOWN]
    events += traffic(rng, BERLIN_SITE, DAYS) + traffic(rng, KOLKATA_SITE, DAYS)
    rows, columns = archive_rows(events)
    client.insert("events", rows, column_names=columns)
    for site in (BERLIN_SITE, KOLKATA_SITE, KNOWN_BERLIN, KNOWN_KOLKATA):
        for first in (SPRING, AUTUMN):
            backfill_rollups(client, site, first - timedelta(days=4), first + timedelta(days=4))
    yield client


def local_range(site_zone: str, first: date, days: int) -> tuple[datetime, datetime]:
    tz = zone(site_zone)
    return local_midnight(first, tz), local_midnight(first + timedelta(days=days), tz)


def known(client: Client, site: str, site_zone: str, first: date, days: int, interval: str, source: str):
    q = StatsQuery(site, *local_range(site_zone, first, days), timezone=site_zone)
    return queries.timeseries(client, q, interval, source)


def test_the_registry_keeps_each_sites_zone(store: Client) -> None:
    assert site_timezone(store, BERLIN_SITE) == BERLIN
    assert site_timezone(store, KOLKATA_SITE) == KOLKATA
    add_site(store, BERLIN_SITE)  # added again without a zone: keeps its own
    assert site_timezone(store, BERLIN_SITE) == BERLIN
    assert site_timezone(store, "never-registered.example.com") == "UTC"


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_berlin_days_start_at_its_midnight_and_the_spring_day_has_23_hours(
    store: Client, source: str
) -> None:
    points = known(store, KNOWN_BERLIN, BERLIN, SPRING - timedelta(days=1), 3, "day", source)
    assert [(p.t, p.pageviews, p.visitors) for p in points] == [
        (utc("2026-03-27 23:00:00"), 1, 1),  # the 28th: a
        (utc("2026-03-28 23:00:00"), 6, 6),  # the 29th: b, c twice (two UTC days: two visitors), d, p, e
        (utc("2026-03-29 22:00:00"), 2, 2),  # the 30th: p, f
    ]
    assert points[2].t - points[1].t == timedelta(hours=23)
    hours = known(store, KNOWN_BERLIN, BERLIN, SPRING, 1, "hour", source)
    assert len(hours) == 23
    assert [p.t.astimezone(zone(BERLIN)).hour for p in hours[:4]] == [0, 1, 3, 4]


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_the_autumn_day_has_25_hours_and_its_repeated_hour_is_two_buckets(store: Client, source: str) -> None:
    hours = known(store, KNOWN_BERLIN, BERLIN, AUTUMN, 1, "hour", source)
    assert len(hours) == 25
    labels = [p.t.astimezone(zone(BERLIN)).strftime("%H:%M%z") for p in hours[1:5]]
    assert labels == ["01:00+0200", "02:00+0200", "02:00+0100", "03:00+0100"]
    assert [p.pageviews for p in hours[2:4]] == [1, 1]  # g and h
    days = known(store, KNOWN_BERLIN, BERLIN, AUTUMN, 1, "day", source)
    assert [(p.t, p.pageviews) for p in days] == [(utc("2026-10-24 22:00:00"), 3)]


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_a_half_hour_zone_starts_its_days_at_half_past_utc(store: Client, source: str) -> None:
    points = known(store, KNOWN_KOLKATA, KOLKATA, SPRING - timedelta(days=1), 3, "day", source)
    assert [(p.t, p.pageviews) for p in points] == [
        (utc("2026-03-27 18:30:00"), 1),
        (utc("2026-03-28 18:30:00"), 2),
        (utc("2026-03-29 18:30:00"), 1),
    ]


RANGES = {
    "the spring week, by day": (BERLIN_SITE, BERLIN, SPRING - timedelta(days=2), 4),
    "the autumn days": (BERLIN_SITE, BERLIN, AUTUMN - timedelta(days=2), 4),
    "the spring day alone": (BERLIN_SITE, BERLIN, SPRING, 1),
    "the autumn day alone": (BERLIN_SITE, BERLIN, AUTUMN, 1),
    "+05:30 days": (KOLKATA_SITE, KOLKATA, SPRING - timedelta(days=2), 4),
    "+05:30 one day": (KOLKATA_SITE, KOLKATA, AUTUMN, 1),
    # the Berlin site's traffic read as New York's days (the query's zone, not the registry's)
    "-04:00 days across UTC midnights": (BERLIN_SITE, "America/New_York", SPRING - timedelta(days=2), 3),
}


def reports(client: Client, q: StatsQuery, intervals: tuple[str, ...], source: str) -> dict[str, object]:
    found: dict[str, object] = {
        "aggregate": queries.aggregate(client, q, source),
        "breakdown path": queries.breakdown(client, q, "path", 100, source),
        "breakdown utm_source": queries.breakdown(client, q, "utm_source", 100, source),
    }
    for interval in intervals:
        found[f"by {interval}"] = queries.timeseries(client, q, interval, source)
        found[f"sessions by {interval}"] = queries.session_timeseries(client, q, interval, source)
    return found


@pytest.mark.parametrize("name", list(RANGES))
def test_agg_equals_raw_over_local_buckets(store: Client, name: str) -> None:
    site, site_zone, first, days = RANGES[name]
    q = StatsQuery(site, *local_range(site_zone, first, days), timezone=site_zone)
    intervals = ("hour", "day", "week", "month")
    raw = reports(store, q, intervals, "raw")
    assert raw["aggregate"]["pageviews"] > 0
    assert reports(store, q, intervals, "agg") == raw


def test_agg_equals_raw_for_a_local_month_and_weeks_over_the_clock_change(store: Client) -> None:
    """The days around the change in a month-long range: whole UTC days in the middle, local
    edges at both ends (weeks cut by the range, a month holding it)."""
    tz = zone(BERLIN)
    q = StatsQuery(BERLIN_SITE, local_midnight(date(2026, 3, 26), tz), local_midnight(date(2026, 4, 1), tz),
                   timezone=BERLIN)  # fmt: skip
    raw = reports(store, q, ("week", "month"), "raw")
    assert [p.t for p in raw["by week"]] == [utc("2026-03-22 23:00:00"), utc("2026-03-29 22:00:00")]
    assert [p.t for p in raw["by month"]] == [utc("2026-02-28 23:00:00")]
    assert reports(store, q, ("week", "month"), "agg") == raw


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_a_local_day_counts_the_visitors_of_its_utc_pieces(store: Client, source: str) -> None:
    """Visitors of any range are distinct (UTC day, visitor_id) pairs. One id on both sides of
    the UTC midnight inside a local day is two visitors (c: the salt rotates at UTC midnight, a
    real browser has two ids); one id on both sides of a local midnight inside one UTC day is
    a visitor of each local day and one visitor of both (p): local days do not add up."""
    days = known(store, KNOWN_BERLIN, BERLIN, SPRING, 2, "day", source)
    assert [p.visitors for p in days] == [6, 2]
    q = StatsQuery(KNOWN_BERLIN, *local_range(BERLIN, SPRING, 2), timezone=BERLIN)
    assert queries.aggregate(store, q, source)["visitors"] == 7


@pytest.mark.parametrize("zone_name", [BERLIN, KOLKATA, "America/New_York"])
def test_agg_equals_raw_on_a_range_cut_mid_day(store: Client, zone_name: str) -> None:
    """ "Today so far" and a start a few minutes past midnight: buckets cut by the range, whose
    pieces may touch no UTC midnight (New York's morning), so agg counts their visitors in the
    archive; minutes of the hours the cuts fall in come from rollup_minute."""
    tz = zone(zone_name)
    start = local_midnight(SPRING - timedelta(days=1), tz) + timedelta(minutes=7)
    q = StatsQuery(BERLIN_SITE, start, local_midnight(SPRING, tz) + timedelta(hours=13, minutes=37),
                   timezone=zone_name)  # fmt: skip
    raw = reports(store, q, ("hour", "day", "week"), "raw")
    assert raw["aggregate"]["pageviews"] > 0
    assert reports(store, q, ("hour", "day", "week"), "agg") == raw
