"""The Web Vitals report (storage/queries/vitals.py) on the real broker, archiver and ClickHouse
engine: engagement events with known vitals go through Kafka into the archive, whose
materialized view fills vitals_quarter (migration 0070). The agg answer, the raw answer and a
computation here from the values sent — each percentile the bucket bound at or above the
nearest-rank value, each rating counted against Google's thresholds — must be the same, to the
unit, overall and by page, device, country and browser, and on the API over a day of the site's
own time zone.
"""

from __future__ import annotations

import json
import math
import os
import random
from bisect import bisect_left
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage.client import connect
from storage.queries import StatsQuery
from storage.queries.vitals import (
    BOUNDS,
    COLUMNS,
    PROPERTIES,
    THRESHOLDS,
    VitalSummary,
    vitals,
    vitals_by_day,
)
from storage.sites import add_site
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.events import page_view
from tests.fixtures.stats_api import api_json
from tests.integration.test_archiver import archive_until, produce

pytestmark = pytest.mark.integration

SITE = "vitals.example.com"
KOLKATA = "Asia/Kolkata"  # +05:30: its midnight is on a quarter-hour, not on a UTC hour
DAY = datetime(2026, 11, 10, tzinfo=UTC)
DEVICES = ("desktop", "mobile", "tablet")
COUNTRIES = ("DE", "IN", "US", "")
BROWSERS = ("Chrome", "Firefox", "Safari")
PATHS = ("/", "/blog", "/pricing", "/docs/setup")
# Each vital's spread (ms, CLS in thousandths): across its thresholds, with exact bucket bounds
# (2500, 0, 120000) and values just beside them among the draws.
SPREAD = {"lcp_ms": 9000, "cls_milli": 600, "inp_ms": 900, "fcp_ms": 5000, "ttfb_ms": 3000}
EDGES = {"lcp_ms": (2500, 2501, 120_000), "cls_milli": (0, 100, 251), "inp_ms": (200, 0, 40)}


def measured(rng: random.Random, column: str) -> int | None:
    if rng.random() < 0.2:
        return None  # not measured: no INP without an interaction, say
    if column in EDGES and rng.random() < 0.1:
        return rng.choice(EDGES[column])
    return int(rng.lognormvariate(math.log(SPREAD[column] / 4), 0.8)) % 120_001


def traffic(rng: random.Random) -> list[PageViewEvent]:
    """Over three UTC days: page views, each followed by its engagement event with vitals; a
    page view carrying an LCP (no engagement event: not counted) and engagement events with none."""
    events = []
    for number in range(400):
        at = (
            DAY
            - timedelta(days=1)
            + timedelta(seconds=rng.randrange(3 * 86_400), milliseconds=rng.randrange(1000))
        )
        visit = {
            "device": rng.choice(DEVICES),
            "country": rng.choice(COUNTRIES),
            "browser": rng.choice(BROWSERS),
        }
        path, visitor = rng.choice(PATHS), f"v{number}"
        events.append(page_view(SITE, visitor, at, path, lcp_ms=1 if number % 50 == 0 else None, **visit))
        vitals_sent = {column: measured(rng, column) for column in COLUMNS.values()}
        events.append(
            page_view(
                SITE,
                visitor,
                at + timedelta(seconds=20),
                path,
                name="engagement",
                engagement_ms=20_000,
                **vitals_sent,
                **visit,
            )
        )
    return events


EVENTS = traffic(random.Random(35))


def expected(events: list[PageViewEvent], start: datetime, end: datetime, by: str | None) -> dict:
    """The report computed from the values sent: per value, per vital measured, the nearest-rank
    value's bucket bound for each percentile and the ratings counted value by value."""
    chosen = [event for event in events if event.name == "engagement" and start <= quarter_of(event.ts) < end]
    groups: dict[str | None, list[PageViewEvent]] = {}
    for event in chosen:
        groups.setdefault(getattr(event, PROPERTIES[by]) if by else None, []).append(event)
    report = {}
    for value, group in groups.items():
        row = {}
        for vital, column in COLUMNS.items():
            values = sorted(v for event in group if (v := getattr(event, column)) is not None)
            if values:
                row[vital] = summary_of(vital, values)
        report[value] = row
    return report


def quarter_of(ts: datetime) -> datetime:
    return ts.replace(minute=ts.minute - ts.minute % 15, second=0, microsecond=0)


def summary_of(vital: str, values: list[int]) -> VitalSummary:
    good_up_to, poor_above = THRESHOLDS[vital]  # type: ignore[index]

    def at(p: int) -> float:
        nearest = values[max(1, math.ceil(len(values) * p / 100)) - 1]
        upper = BOUNDS[bisect_left(BOUNDS, nearest)]
        return upper / 1000 if vital == "cls" else upper  # CLS is sent in thousandths

    good = sum(v <= good_up_to for v in values)
    poor = sum(v > poor_above for v in values)
    shares = (round(100 * n / len(values), 1) for n in (good, len(values) - good - poor, poor))
    return VitalSummary(len(values), at(50), at(75), at(95), *shares)


def report(store: Client, q: StatsQuery, by: str | None) -> dict:
    """The raw answer as {value: {vital: summary}}, after checking agg answers the same."""
    raw = vitals(store, q, by, limit=1000, source="raw")
    assert vitals(store, q, by, limit=1000, source="agg") == raw
    return {row.value: row.vitals for row in raw}


@pytest.fixture(scope="module")
def store(settings: Settings) -> Client:
    import asyncio

    client = connect(settings)
    add_site(client, SITE, KOLKATA)
    asyncio.run(produce(settings, [(event.key, event.to_json()) for event in EVENTS]))
    asyncio.run(archive_until(settings, SITE, expected=len(EVENTS)))
    return client


@pytest.fixture(scope="module")
def api(settings: Settings, store: Client) -> FlaskClient:
    return build_app(settings, clock=lambda: DAY + timedelta(days=3)).server.test_client()


@pytest.mark.parametrize("by", [None, *PROPERTIES])
def test_agg_equals_raw_equals_the_values_bucketed(store: Client, by: str | None) -> None:
    start, end = DAY - timedelta(days=1), DAY + timedelta(days=2)
    answer = report(store, StatsQuery(SITE, start, end), by)
    assert answer == expected(EVENTS, start, end, by)
    assert len(answer) == (1 if by is None else len({getattr(e, PROPERTIES[by]) for e in EVENTS}))
    # The spread reaches every rating, and the thresholds' own values are in it.
    overall = expected(EVENTS, start, end, None)[None]
    assert all(s.good > 0 and s.needs_improvement > 0 and s.poor > 0 for s in overall.values())


def test_a_range_of_quarter_hours_counts_only_them(store: Client) -> None:
    start, end = DAY + timedelta(hours=5, minutes=45), DAY + timedelta(hours=9, minutes=15)
    answer = report(store, StatsQuery(SITE, start, end), "event:page")
    assert answer == expected(EVENTS, start, end, "event:page") and answer


def test_the_api_reports_a_day_of_the_sites_time_zone(api: FlaskClient, settings: Settings) -> None:
    local = ZoneInfo(KOLKATA)
    start = datetime(2026, 11, 10, tzinfo=local).astimezone(UTC)  # 2026-11-09 18:30 UTC
    want = expected(EVENTS, start, start + timedelta(days=1), "visit:device")
    assert len(want) == len(DEVICES)
    for source in ("agg", "raw"):
        rows = api_json(
            api, settings, "/stats/vitals", site_id=SITE, **{"from": "2026-11-10", "to": "2026-11-11"},
            property="visit:device", source=source,
        )  # fmt: skip
        assert {row["value"]: {k: v for k, v in row.items() if k != "value"} for row in rows} == {
            value: {vital: vars(summary) for vital, summary in row.items()} for value, row in want.items()
        }


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ({"property": "visit:os"}, "property"),
        ({"filters": '{"country": "DE"}'}, "filters"),
        ({"source": "cache"}, "source"),
        ({"period": "fortnight"}, "period"),
    ],
)
def test_bad_parameters_get_a_400_naming_them(
    api: FlaskClient, settings: Settings, query: dict[str, str], named: str
) -> None:
    headers = {"Authorization": f"Bearer {settings.resolved_api_key()}"}
    response = api.get("/api/v1/stats/vitals", query_string={"site": SITE, **query}, headers=headers)
    assert response.status_code == 400
    assert response.get_json()["error"].startswith(f"{named}:")


def test_the_report_needs_a_key(api: FlaskClient) -> None:
    assert api.get("/api/v1/stats/vitals", query_string={"site": SITE}).status_code == 401


def test_the_cli_prints_the_apis_report(api: FlaskClient, settings: Settings) -> None:
    asked = {"from": "2026-11-10", "to": "2026-11-11", "property": "event:page", "source": "agg"}
    options = [item for name, value in asked.items() for item in (f"--{name}", value)]
    env = os.environ | settings.environment()
    printed = run_tally(env, "stats", SITE, "--vitals", *options, "--json")
    assert printed.returncode == 0, printed.stderr
    answered = api_json(api, settings, "/stats/vitals", site=SITE, **asked)
    assert json.loads(printed.stdout) == answered and answered
    lines = run_tally(env, "stats", SITE, "--vitals", *options).stdout.splitlines()
    first = answered[0]
    lcp = first["lcp"]
    numbers = ("measured", "p50", "p75", "p95", "good", "needs_improvement", "poor")
    assert lines[0].split("\t") == [first["value"], "lcp", *(str(lcp[n]) for n in numbers)]
    refused = run_tally(env, "stats", SITE, "--vitals", "--property", "visit:os")
    assert refused.returncode != 0 and refused.stderr.strip().startswith("tally: --property:"), refused.stderr


def test_the_trend_is_the_report_of_each_day_of_the_sites_zone(store: Client) -> None:
    local = ZoneInfo(KOLKATA)
    first = datetime(2026, 11, 9, tzinfo=local).astimezone(UTC)
    q = StatsQuery(SITE, first, first + timedelta(days=3), timezone=KOLKATA)
    raw = vitals_by_day(store, q, source="raw")
    assert vitals_by_day(store, q, source="agg") == raw
    days = [(first + timedelta(days=n), f"2026-11-{9 + n:02d}") for n in range(3)]
    assert [(row.value, row.vitals) for row in raw] == [
        (name, expected(EVENTS, start, start + timedelta(days=1), None)[None]) for start, name in days
    ]
