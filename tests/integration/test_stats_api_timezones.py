"""The stats API in a site's time zone: `period=` presets start at the site's midnight, buckets
are its local hours and days (labelled with their offset), dates without an offset are local,
and `compare=previous_period|year_over_year` answers the compared range's numbers and the
change. Real ClickHouse engine; the rollups built by the backfill, so `agg` is checked too.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage.client import connect
from storage.rollup_backfill import backfill_rollups
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

SITE = "api.berlin.timezones.example.com"
NOW = datetime(2026, 3, 30, 8, 0, tzinfo=UTC)  # 10:00 CEST on Monday the 30th


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


EVENTS = [
    ("2026-03-22 12:00:00", "h"),  # the week before
    ("2026-03-28 22:30:00", "a"),  # 23:30 on the 28th (CET)
    ("2026-03-28 23:30:00", "b"),  # 00:30 on the 29th
    ("2026-03-29 10:00:00", "c"),  # 12:00 CEST on the 29th
    ("2026-03-29 21:30:00", "d"),  # 23:30 CEST on the 29th
    ("2026-03-30 07:00:00", "e"),  # 09:00 today
    ("2025-03-29 11:00:00", "f"),  # a year before: 12:00 CET on 29 March 2025
    ("2025-03-29 12:00:00", "g"),
]


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings) -> FlaskClient:
    client = connect(dashboard_settings)
    add_site(client, SITE, "Europe/Berlin")
    rows, columns = archive_rows([page_view(SITE, visitor, utc(at), "/") for at, visitor in EVENTS])
    client.insert("events", rows, column_names=columns)
    for first in (date(2025, 3, 27), date(2026, 3, 20)):
        backfill_rollups(client, SITE, first, first + timedelta(days=12))
    return build_app(dashboard_settings, clock=lambda: NOW).server.test_client()


@pytest.fixture(scope="module")
def auth(dashboard_settings: Settings) -> dict[str, str]:
    return {"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"}


def get(api: FlaskClient, auth: dict[str, str], path: str, **params: str) -> tuple[int, Any]:
    response = api.get(f"/api/v1{path}", query_string={"site": SITE, **params}, headers=auth)
    return response.status_code, response.get_json()


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_last_7_days_are_local_days_labelled_with_their_offset(
    api: FlaskClient, auth: dict, source: str
) -> None:
    status, points = get(api, auth, "/stats/timeseries", period="7d", interval="day", source=source)
    assert status == 200, points
    assert [(p["t"], p["pageviews"]) for p in points] == [
        ("2026-03-24T00:00:00+01:00", 0),
        ("2026-03-25T00:00:00+01:00", 0),
        ("2026-03-26T00:00:00+01:00", 0),
        ("2026-03-27T00:00:00+01:00", 0),
        ("2026-03-28T00:00:00+01:00", 1),
        ("2026-03-29T00:00:00+01:00", 3),
        ("2026-03-30T00:00:00+02:00", 1),
    ]


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_local_dates_without_offset_and_the_23_hour_day(api: FlaskClient, auth: dict, source: str) -> None:
    status, hours = get(
        api,
        auth,
        "/stats/timeseries",
        source=source,
        interval="hour",
        **{"from": "2026-03-29", "to": "2026-03-30"},
    )
    assert status == 200, hours
    assert len(hours) == 23
    assert [p["t"] for p in hours[1:3]] == ["2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00"]
    assert sum(p["pageviews"] for p in hours) == 3


@pytest.mark.parametrize("source", ["raw", "agg"])
@pytest.mark.parametrize(
    ("compare", "previous", "change", "compared_from"),
    [
        ("previous_period", 1, 200.0, "2026-03-28T00:00:00+01:00"),
        ("year_over_year", 2, 50.0, "2025-03-29T00:00:00+01:00"),
    ],
)
def test_yesterday_compared(
    api: FlaskClient, auth: dict, source: str, compare: str, previous: int, change: float, compared_from: str
) -> None:
    status, answer = get(api, auth, "/stats/aggregate", period="yesterday", compare=compare, source=source)
    assert status == 200, answer
    assert answer["pageviews"] == answer["visitors"] == 3
    assert answer["comparison"]["from"] == compared_from
    assert answer["comparison"]["pageviews"] == previous
    assert answer["change"]["pageviews"] == change
    assert answer["change"]["bounce_rate"] == 0.0  # every session a bounce: no change, in points


def test_timeseries_pairs_each_bucket_with_the_compared_one(api: FlaskClient, auth: dict) -> None:
    status, points = get(
        api, auth, "/stats/timeseries", period="7d", interval="day", compare="previous_period"
    )
    assert status == 200, points
    by_day = {p["t"][:10]: p for p in points}
    assert by_day["2026-03-29"]["comparison"]["t"] == "2026-03-22T00:00:00+01:00"
    assert by_day["2026-03-29"]["comparison"]["pageviews"] == 1  # h
    assert by_day["2026-03-29"]["change"]["pageviews"] == 200.0
    assert by_day["2026-03-28"]["change"]["pageviews"] is None  # nothing on the 21st to compare with


def test_month_to_date_and_all_time(api: FlaskClient, auth: dict) -> None:
    assert get(api, auth, "/stats/aggregate", period="month")[1]["pageviews"] == 6
    assert get(api, auth, "/stats/aggregate", period="all")[1]["pageviews"] == len(EVENTS)
    status, months = get(api, auth, "/stats/timeseries", period="12mo", interval="month")
    assert status == 200, months
    assert (months[0]["t"], months[-1]["t"]) == ("2025-04-01T00:00:00+02:00", "2026-03-01T00:00:00+01:00")


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"period": "fortnight"}, "period: must be one of today, yesterday"),
        ({"period": "7d", "from": "2026-03-01"}, "period: give either period or from/to"),
        ({"period": "custom"}, "period: a custom range is from and to"),
        (
            {"period": "7d", "compare": "last_decade"},
            "compare: must be one of previous_period, year_over_year",
        ),
        ({"interval": "fortnight"}, "interval: must be one of minute, hour, day, week, month"),
    ],
)
def test_bad_period_or_compare_is_a_400_naming_it(
    api: FlaskClient, auth: dict, params: dict, named: str
) -> None:
    status, answer = get(api, auth, "/stats/timeseries", **params)
    assert status == 400
    assert answer["error"].startswith(named)


def query_v2(api: FlaskClient, auth: dict, body: dict, source: str = "agg") -> dict:
    response = api.post(f"/api/v2/query?source={source}", json={"site_id": SITE, **body}, headers=auth)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_plausible_v2_days_and_hours_are_the_sites(api: FlaskClient, auth: dict, source: str) -> None:
    """Plausible's date_range and time dimensions in the site's zone, labelled on its wall clock."""
    days = query_v2(
        api, auth,
        # the 7 days before the 31st (Plausible's "7d" leaves the reference day out): up to the 30th
        {"metrics": ["pageviews"], "date_range": "7d", "date": "2026-03-31", "dimensions": ["time:day"]},
        source,
    )  # fmt: skip
    assert [(row["dimensions"][0], row["metrics"][0]) for row in days["results"]] == [
        ("2026-03-28", 1),
        ("2026-03-29", 3),
        ("2026-03-30", 1),
    ]
    hours = query_v2(
        api, auth,
        {"metrics": ["visitors"], "date_range": ["2026-03-29", "2026-03-29"], "dimensions": ["time:hour"],
         "include": {"time_labels": True}},
        source,
    )  # fmt: skip
    labels = hours["meta"]["time_labels"]
    assert len(labels) == 23
    assert labels[:3] == ["2026-03-29 00:00:00", "2026-03-29 01:00:00", "2026-03-29 03:00:00"]
    assert [row["dimensions"][0] for row in hours["results"]] == [
        "2026-03-29 00:00:00", "2026-03-29 12:00:00", "2026-03-29 23:00:00",
    ]  # fmt: skip
    total = query_v2(api, auth, {"metrics": ["pageviews"], "date_range": "day", "date": "2026-03-29"}, source)
    assert total["results"][0]["metrics"] == [3]


@pytest.mark.parametrize(
    ("comparisons", "old", "change", "compared_range"),
    [
        ({"mode": "previous_period"}, 1, 200, ["2026-03-28T00:00:00+01:00", "2026-03-28T23:59:59+01:00"]),
        ({"mode": "year_over_year"}, 2, 50, ["2025-03-29T00:00:00+01:00", "2025-03-29T23:59:59+01:00"]),
        (
            {"mode": "custom", "date_range": ["2026-03-22", "2026-03-22"]},
            1, 200, ["2026-03-22T00:00:00+01:00", "2026-03-22T23:59:59+01:00"],
        ),
    ],
)  # fmt: skip
def test_plausible_v2_comparisons(
    api: FlaskClient, auth: dict, comparisons: dict, old: int, change: int, compared_range: list[str]
) -> None:
    """include.comparisons: the 29th (3 page views) against the 28th, the 29th a year before, the 22nd."""
    answer = query_v2(
        api, auth,
        {"metrics": ["pageviews", "bounce_rate"], "date_range": ["2026-03-29", "2026-03-29"],
         "include": {"comparisons": comparisons}},
    )  # fmt: skip
    result = answer["results"][0]
    assert result["metrics"] == [3, 100]
    assert result["comparison"] == {"dimensions": [], "metrics": [old, 100], "change": [change, 0]}
    assert [moment.replace("Z", "+00:00") for moment in answer["meta"]["comparison_date_range"]] == [
        datetime.fromisoformat(text).astimezone(UTC).isoformat() for text in compared_range
    ]


def test_plausible_v2_comparison_pairs_days_by_their_place(api: FlaskClient, auth: dict) -> None:
    answer = query_v2(
        api, auth,
        {"metrics": ["pageviews"], "date_range": ["2026-03-28", "2026-03-29"], "dimensions": ["time:day"],
         "include": {"comparisons": {"mode": "year_over_year"}}},
    )  # fmt: skip
    assert [(row["dimensions"], row["metrics"], row["comparison"]) for row in answer["results"]] == [
        (["2026-03-28"], [1], {"dimensions": ["2025-03-28"], "metrics": [0], "change": [100]}),
        (["2026-03-29"], [3], {"dimensions": ["2025-03-29"], "metrics": [2], "change": [50]}),
    ]
