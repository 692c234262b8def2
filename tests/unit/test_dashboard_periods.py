"""What the dashboard's header and cards say, without a store: periods and their comparison,
changes against the previous period, countries on the map."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

import dashboard
from dashboard import display, periods
from dashboard.countries import alpha2, alpha3, country_name

NOW = datetime(2026, 11, 22, 10, 37, 20, tzinfo=UTC)
MIDNIGHT = datetime(2026, 11, 22, tzinfo=UTC)


def test_today_is_compared_with_yesterday_up_to_the_same_time() -> None:
    p = periods.period("today", NOW)
    assert (p.start, p.end) == (MIDNIGHT, NOW.replace(second=0) + timedelta(minutes=1))
    assert (p.previous_start, p.previous_end) == (p.start - timedelta(days=1), p.end - timedelta(days=1))
    assert p.interval == "hour"


def test_last_24_hours_is_24_whole_hours_ending_with_the_current_one() -> None:
    p = periods.period("24h", NOW)
    assert p.end == datetime(2026, 11, 22, 11, tzinfo=UTC)
    assert p.end - p.start == timedelta(hours=24) == p.start - p.previous_start


@pytest.mark.parametrize(("preset", "days"), [("7d", 7), ("30d", 30)])
def test_last_n_days_include_today_and_compare_with_the_n_days_before(preset: str, days: int) -> None:
    p = periods.period(preset, NOW)
    assert p.start == MIDNIGHT - timedelta(days=days - 1)
    assert p.previous_start == p.start - timedelta(days=days)
    assert p.previous_end == p.end - timedelta(days=days)
    assert p.interval == "day"


def test_custom_range_covers_whole_days_in_either_order() -> None:
    p = periods.period("custom", NOW, date(2026, 11, 12), date(2026, 11, 10))
    assert (p.start, p.end) == (datetime(2026, 11, 10, tzinfo=UTC), datetime(2026, 11, 13, tzinfo=UTC))
    assert p.previous_end == p.start
    one_day = periods.period("custom", NOW, date(2026, 11, 10), date(2026, 11, 10))
    assert one_day.interval == "hour"


def test_custom_without_dates_falls_back_to_the_default() -> None:
    assert periods.period("custom", NOW) == periods.period(periods.DEFAULT_PRESET, NOW)


def test_period_survives_the_browser_store() -> None:
    p = periods.period("7d", NOW)
    assert periods.Period.from_store(json.loads(json.dumps(p.to_store()))) == p


@pytest.mark.parametrize("preset", list(periods.PRESETS))
@pytest.mark.parametrize("compare", list(periods.COMPARISONS))
def test_every_period_the_page_chooses_passes_the_bounds_unchanged(preset: str, compare: str) -> None:
    p = periods.period(
        preset, NOW, date(2000, 1, 1), date(2027, 12, 31), "Pacific/Kiritimati", compare, date(1990, 5, 1)
    )
    assert periods.Period.from_store(p.to_store(), NOW) == p


def test_a_forged_interval_is_coarsened_to_the_apis_cap() -> None:
    """Minutes over 27 years (14 million buckets) are drawn by days (9,825), up to the end of
    next year by weeks; a week of minutes (10,081 buckets) by hours."""
    forged = periods.period("custom", NOW, date(2000, 1, 1), date(2026, 11, 22)).to_store()
    assert periods.Period.from_store(forged | {"interval": "minute"}, NOW).interval == "day"
    longest = periods.period("custom", NOW, date(2000, 1, 1), date(2027, 12, 31)).to_store()
    assert periods.Period.from_store(longest | {"interval": "minute"}, NOW).interval == "week"
    week = periods.period("custom", NOW, date(2026, 11, 16), date(2026, 11, 22)).to_store()
    assert periods.Period.from_store(week | {"interval": "minute"}, NOW).interval == "hour"


@pytest.mark.parametrize(
    "forged",
    [
        {"start": "1926-01-01T00:00:00+00:00"},  # a century of minutes
        {"end": "2200-01-01T00:00:00+00:00"},
        {"start": "2026-11-23T00:00:00+00:00"},  # after its end
        {"previous_start": "1950-01-01T00:00:00+00:00"},  # a compared range far longer than the period
        {"start": "2026-11-01T00:00:00"},  # no offset
        {"start": "yesterday"},
        {"interval": "second"},
        {"timezone": "Mars/Olympus"},
        {"compare": "last_decade"},
        {"end": None},
    ],
)
def test_a_forged_period_is_refused_naming_it(forged: dict) -> None:
    stored = periods.period("7d", NOW).to_store() | forged
    with pytest.raises(periods.UnknownPeriod, match=r"^period: "):
        periods.Period.from_store(stored, NOW)


def test_a_custom_range_is_within_2000_and_next_year() -> None:
    with pytest.raises(periods.UnknownPeriod):
        periods.period("custom", NOW, date(1, 1, 1), date(2026, 11, 22))
    with pytest.raises(periods.UnknownPeriod):
        periods.period("custom", NOW, date(2026, 11, 22), date(2028, 1, 1))
    assert periods.period("all", NOW, first_day=date(1970, 1, 1)).start == datetime(2000, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("key", "current", "previous", "text", "tone"),
    [
        ("visitors", 120, 100, "↑ 20%", "good"),
        ("visitors", 80, 100, "↓ 20%", "bad"),
        ("visitors", 5, 0, "new", "good"),
        ("visitors", 0, 0, "no change", "flat"),
        ("bounce_rate", 0.44, 0.40, "↑ 4 pts", "bad"),  # more bounces is worse
        ("bounce_rate", 0.30, 0.40, "↓ 10 pts", "good"),
    ],
)
def test_change_against_the_previous_period(
    key: str, current: float, previous: float, text: str, tone: str
) -> None:
    metric = next(m for m in display.METRICS if m.key == key)
    assert display.change(metric, current, previous) == display.Change(text, tone)


@pytest.mark.parametrize(
    ("value", "shown"), [(999, "999"), (99_999, "99,999"), (123_456, "123k"), (12_345_678, "12.3M")]
)
def test_counts_are_exact_until_they_are_large(value: int, shown: str) -> None:
    assert display.count(value) == shown


def test_durations_read_as_minutes_and_seconds() -> None:
    assert [display.duration(s) for s in (42, 125.4, 3725)] == ["42s", "2m 05s", "1h 02m"]


def test_every_country_shape_on_the_map_has_a_code_events_carry() -> None:
    shapes = Path(dashboard.__file__).parent / "assets" / "topojson" / "world_110m.json"
    ids = {g.get("id") for g in json.loads(shapes.read_text())["objects"]["countries"]["geometries"]}
    assert {shape for shape in ids if shape and alpha2(shape) is None} == set()
    assert (alpha3("ch"), alpha3("GB"), alpha3("XX")) == ("CHE", "GBR", None)
    assert (country_name("DE"), country_name(""), country_name("XX")) == ("Germany", "Unknown", "XX")


# --- the site's own time zone and the comparisons (issue 20) ----------------------------------
BERLIN = "Europe/Berlin"


def berlin(text: str) -> datetime:
    """A Berlin wall-clock time as the UTC instant it is."""
    from zoneinfo import ZoneInfo

    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(BERLIN)).astimezone(UTC)


def test_today_starts_at_the_sites_midnight_and_a_spring_day_is_23_hours() -> None:
    now = berlin("2026-03-29T21:30:00")
    p = periods.period("today", now, timezone=BERLIN)
    assert p.start == berlin("2026-03-29T00:00:00") == datetime(2026, 3, 28, 23, tzinfo=UTC)
    yesterday = periods.period("yesterday", berlin("2026-03-30T09:00:00"), timezone=BERLIN)
    assert (yesterday.start, yesterday.end) == (
        datetime(2026, 3, 28, 23, tzinfo=UTC),
        datetime(2026, 3, 29, 22, tzinfo=UTC),
    )
    assert yesterday.end - yesterday.start == timedelta(hours=23)
    # compared with the day before, at the same local time (a 24-hour day)
    assert yesterday.previous_end - yesterday.previous_start == timedelta(hours=24)
    assert p.previous_start == berlin("2026-03-28T00:00:00")
    assert p.previous_end == berlin("2026-03-28T21:31:00")


@pytest.mark.parametrize(
    ("preset", "start", "previous_start", "interval"),
    [
        ("month", "2026-11-01", "2026-10-01", "day"),
        ("last_month", "2026-10-01", "2026-09-01", "day"),
        ("year", "2026-01-01", "2025-01-01", "month"),
        ("12mo", "2025-12-01", "2024-12-01", "month"),
    ],
)
def test_calendar_ranges_start_on_local_first_days(
    preset: str, start: str, previous_start: str, interval: str
) -> None:
    now = berlin("2026-11-22T10:37:20")
    p = periods.period(preset, now, timezone=BERLIN)
    assert p.start == berlin(f"{start}T00:00:00")
    assert p.previous_start == berlin(f"{previous_start}T00:00:00")
    assert p.interval == interval
    if preset == "last_month":
        assert (p.end, p.previous_end) == (berlin("2026-11-01T00:00:00"), berlin("2026-10-01T00:00:00"))


def test_month_to_date_is_compared_with_the_same_days_of_the_month_before() -> None:
    p = periods.period("month", berlin("2026-03-31T12:00:00"), timezone=BERLIN)
    assert (p.previous_start, p.previous_end) == (
        berlin("2026-02-01T00:00:00"),
        berlin("2026-02-28T12:01:00"),
    )


def test_year_over_year_compares_with_the_same_local_dates_a_year_before() -> None:
    p = periods.period("7d", berlin("2026-11-22T10:37:20"), timezone=BERLIN, compare="year_over_year")
    assert p.previous_start == berlin("2025-11-16T00:00:00")
    assert p.previous_end == berlin("2025-11-22T10:38:00")
    assert p.compare == "year_over_year"


def test_all_time_starts_on_the_sites_first_day() -> None:
    p = periods.period("all", NOW, first_day=date(2026, 6, 1))
    assert p.start == datetime(2026, 6, 1, tzinfo=UTC)
    assert p.previous_end == p.start
    assert p.interval == "month"


def test_a_half_hour_zone_and_the_store_round_trip() -> None:
    p = periods.period("today", datetime(2026, 11, 22, 20, tzinfo=UTC), timezone="Asia/Kolkata")
    assert p.start == datetime(2026, 11, 22, 18, 30, tzinfo=UTC)  # midnight of the 23rd in Kolkata
    assert periods.Period.from_store(json.loads(json.dumps(p.to_store()))) == p
    assert periods.describe(p).endswith("Asia/Kolkata")


@pytest.mark.parametrize(("preset", "compare"), [("fortnight", "previous_period"), ("7d", "last_decade")])
def test_an_unknown_preset_or_comparison_is_refused(preset: str, compare: str) -> None:
    with pytest.raises(periods.UnknownPeriod):
        periods.period(preset, NOW, compare=compare)
