"""A site's calendar without a store (storage/calendar.py): local buckets as UTC instants."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta

import pytest

from storage.calendar import (
    InvalidTimezone,
    add_months,
    bucket_sql,
    bucket_starts,
    floor_local,
    local_midnight,
    shift_local,
    zone,
)

BERLIN, KOLKATA = zone("Europe/Berlin"), zone("Asia/Kolkata")


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_berlins_days_around_the_clock_changes_are_23_and_25_hours() -> None:
    days = bucket_starts(local_midnight(date(2026, 3, 28), BERLIN), local_midnight(date(2026, 3, 31), BERLIN),
                         "day", BERLIN)  # fmt: skip
    assert [b - a for a, b in itertools.pairwise(days)] == [timedelta(hours=24), timedelta(hours=23)]
    autumn = local_midnight(date(2026, 10, 25), BERLIN)
    hours = bucket_starts(autumn, local_midnight(date(2026, 10, 26), BERLIN), "hour", BERLIN)
    assert len(hours) == 25
    assert [h.astimezone(BERLIN).strftime("%H%z") for h in hours[2:4]] == ["02+0200", "02+0100"]


def test_a_half_hour_zone_floors_to_its_own_hours_and_days() -> None:
    moment = utc("2026-11-22 20:10:00")  # 01:40 on the 23rd in Kolkata
    assert floor_local(moment, "hour", KOLKATA) == utc("2026-11-22 19:30:00")
    assert floor_local(moment, "day", KOLKATA) == utc("2026-11-22 18:30:00")
    assert floor_local(moment, "week", KOLKATA) == utc("2026-11-22 18:30:00")  # Monday the 23rd
    assert floor_local(moment, "month", KOLKATA) == utc("2026-10-31 18:30:00")


def test_months_clamp_to_the_shorter_month_and_shifts_keep_the_wall_clock() -> None:
    assert add_months(date(2026, 3, 31), -1) == date(2026, 2, 28)
    assert add_months(date(2024, 2, 29), 12) == date(2025, 2, 28)
    assert add_months(date(2026, 12, 15), 1) == date(2027, 1, 15)
    # 10:00 CEST on the 30th, a day back: 10:00 CEST on the 29th (after that morning's change)
    assert shift_local(utc("2026-03-30 08:00:00"), BERLIN, days=-1) == utc("2026-03-29 08:00:00")
    # 13:00 CEST on 29 March 2026, a year back: 13:00 CET on 29 March 2025 (one offset less)
    assert shift_local(utc("2026-03-29 11:00:00"), BERLIN, months=-12) == utc("2025-03-29 12:00:00")


@pytest.mark.parametrize(
    "name", ["", "Mars/Olympus", "../../etc/passwd", "utc'; DROP TABLE x", "Europe/Berlin " * 9]
)
def test_only_iana_zones_are_taken(name: str) -> None:
    with pytest.raises(InvalidTimezone):
        zone(name)


def test_the_zone_reaches_sql_as_a_parameter() -> None:
    assert bucket_sql("day", "ts") == "toDateTime(toStartOfDay(ts, {tz:String}), 'UTC')"
