"""The query layer's pure parts, without ClickHouse: validation, parameters, buckets, metrics.

tests/integration/test_queries_raw.py and test_stats_api.py check the SQL against the engine;
these pin down what is decided in Python before and after it runs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from storage import queries
from storage.literals import quote_string
from storage.queries import Point, StatsQuery, UnsupportedQuery, agg, contract

START = datetime(2026, 11, 10, 9, 30, 15, tzinfo=UTC)


def test_a_filter_outside_the_vocabulary_is_refused_naming_the_allowed_ones() -> None:
    with pytest.raises(UnsupportedQuery, match=r"cannot filter by \['referrer'\]; filters: \['browser'"):
        queries.validate(StatsQuery("s", START, START + timedelta(hours=1), filters={"referrer": "x"}))


@pytest.mark.parametrize("end", [START, START - timedelta(seconds=1)])
def test_an_empty_or_reversed_range_is_refused(end: datetime) -> None:
    with pytest.raises(UnsupportedQuery, match="`to` must be after `from`"):
        queries.validate(StatsQuery("s", START, end))


def test_filter_values_travel_as_parameters_never_in_the_sql() -> None:
    q = StatsQuery("s", START, START + timedelta(hours=1), filters={"path": "/x' OR 1=1", "country": "CH"})
    queries.validate(q)
    assert q.filter_sql() == " AND path = {filter_0:String} AND country = {filter_1:String}"
    assert q.parameters() == {
        "site": "s",
        "start": START,
        "end": START + timedelta(hours=1),
        "gap_ms": 1_800_000,
        "engaged_bounce_ms": 10_000,
        "tz": "UTC",
        "channel_rules": [],  # the site's channel rules: none looked up for a query without a channel
        "channel_rules_patterns": [],
        "filter_0": "/x' OR 1=1",
        "filter_1": "CH",
    }
    assert "OR 1=1" not in queries.raw_sessions_sql(q)


def test_hour_buckets_start_on_the_hour_before_the_range_and_stop_before_its_end() -> None:
    q = StatsQuery("s", START, START.replace(hour=12, minute=0, second=0))
    assert queries.buckets(q, "hour") == [START.replace(hour=h, minute=0, second=0) for h in (9, 10, 11)]


def test_buckets_of_a_range_given_in_another_zone_are_utc() -> None:
    zurich = timezone(timedelta(hours=1))
    q = StatsQuery(
        "s", datetime(2026, 11, 10, 1, 0, tzinfo=zurich), datetime(2026, 11, 12, 1, 0, tzinfo=zurich)
    )
    assert queries.buckets(q, "day") == [
        datetime(2026, 11, 10, tzinfo=UTC),
        datetime(2026, 11, 11, tzinfo=UTC),
    ]


def test_minutes_without_rows_are_zero_and_naive_times_from_the_store_are_utc() -> None:
    q = StatsQuery("s", START, START + timedelta(minutes=3))
    first = START.replace(second=0)
    rows = [(first.replace(tzinfo=None) + timedelta(minutes=1), 4, 2)]
    assert contract.fill(q, "minute", rows) == [
        Point(first, 0, 0),
        Point(first + timedelta(minutes=1), 4, 2),
        Point(first + timedelta(minutes=2), 0, 0),
        Point(first + timedelta(minutes=3), 0, 0),
    ]


def test_metrics_round_bounce_rate_and_duration() -> None:
    assert contract.metrics(10, 4, 3, 1, 61.26) == {
        "pageviews": 10,
        "visitors": 4,
        "sessions": 3,
        "bounce_rate": 0.3333,
        "avg_session_duration_s": 61.3,
    }


def test_no_sessions_means_zero_rates_not_a_division_by_zero() -> None:
    assert contract.metrics(0, 0, 0, 0, 0.0)["bounce_rate"] == 0.0


def test_filters_always_read_the_raw_archive() -> None:
    # The derived tables hold no per-event dimensions to filter on.
    q = StatsQuery("s", START, START + timedelta(hours=1))
    assert queries.uses_agg(q, "agg")
    assert not queries.uses_agg(StatsQuery("s", q.start, q.end, filters={"path": "/"}), "agg")
    assert not queries.uses_agg(q, "raw")


@pytest.mark.parametrize(
    ("value", "literal"),
    [("plain", "'plain'"), ("it's", "'it\\'s'"), ("back\\slash", "'back\\\\slash'"), ("\\'", "'\\\\\\''")],
)
def test_a_string_literal_escapes_quotes_and_backslashes(value: str, literal: str) -> None:
    assert quote_string(value) == literal


def test_a_range_is_read_from_whole_days_hours_and_minutes_with_exact_visitors() -> None:
    # The last 24 hours to the minute: yesterday's tail counts visitors by their last page
    # view of the day, today's head by their first; whole hours from rollup_hour.
    day = START.replace(hour=0, minute=0, second=0)
    pieces = agg.plan(
        day + timedelta(hours=14, minutes=23), day + timedelta(days=1, hours=14, minutes=23), "day"
    )
    assert [
        (p.table, p.start.hour, p.start.minute, p.end.hour, p.end.minute, p.visitors) for p in pieces
    ] == [
        ("rollup_hour", 15, 0, 0, 0, "day_last_visitors"),
        ("rollup_minute", 14, 23, 15, 0, "day_last_visitors"),
        ("rollup_hour", 0, 0, 14, 0, "day_first_visitors"),
        ("rollup_minute", 14, 0, 14, 23, "day_first_visitors"),
    ]


def test_a_segment_inside_a_day_counts_its_visitors_in_the_archive() -> None:
    pieces = agg.plan(START, START + timedelta(hours=2), "day")  # 09:31 to 11:31
    assert {(p.table, p.visitors) for p in pieces} == {
        ("rollup_minute", ""),
        ("rollup_hour", ""),
        ("events", ""),
    }


def test_agg_counts_the_minutes_whose_start_is_in_the_range() -> None:
    # 09:30:15 to 10:30:15: the minutes 09:31 … 10:30.
    [piece, *_] = agg.plan(START, START + timedelta(hours=1), "minute")
    assert (piece.start, piece.end) == (
        START.replace(minute=31, second=0),
        START.replace(hour=10, minute=31, second=0),
    )
