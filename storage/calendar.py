"""A site's calendar: the buckets (hours, days, weeks, months) of its own time zone, as UTC
instants, and the SQL that puts an event in its bucket.

Every moment in the query layer is a UTC instant; a zone only decides where buckets start. A
local day is [local midnight, next local midnight): 24 hours, or 23 / 25 on a daylight-saving
change (Europe/Berlin 2026-03-29 is 23 h, 2026-10-25 is 25 h). Weeks start on Monday. Local
hours are one hour long (the clock changes shift by whole hours in the zones this serves; a
zone with a 30-minute change would see a 30-minute hour labelled twice). Arithmetic is done on
UTC instants, never on local wall-clock times, so the hour a clock repeats is two buckets.
The zone's name reaches SQL as a parameter (`{tz:String}`), after `zone()` has checked it
against the IANA database.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from tally.clock import as_utc
from tally.refusal import Refused

Interval = Literal["minute", "hour", "day", "week", "month"]
INTERVALS: tuple[Interval, ...] = ("minute", "hour", "day", "week", "month")
UTC_NAME = "UTC"
MAX_ZONE_NAME = 64

# Where an event (column `column`, a UTC DateTime64) falls, as the UTC instant its local bucket
# starts at. toStartOfWeek/Month answer a local Date: toDateTime(date, tz) is its local midnight.
_BUCKET_SQL = {
    "minute": "toStartOfMinute({column})",
    "hour": "toDateTime(toStartOfHour({column}, {{tz:String}}), 'UTC')",
    "day": "toDateTime(toStartOfDay({column}, {{tz:String}}), 'UTC')",
    "week": "toDateTime(toDateTime(toStartOfWeek({column}, 1, {{tz:String}}), {{tz:String}}), 'UTC')",
    "month": "toDateTime(toDateTime(toStartOfMonth({column}, {{tz:String}}), {{tz:String}}), 'UTC')",
}


class InvalidTimezone(Refused):
    """Not an IANA time zone name (zoneinfo's database)."""


def zone(name: str) -> ZoneInfo:
    """The IANA zone `name` (Europe/Berlin, Asia/Kolkata, UTC), or InvalidTimezone."""
    if not name or len(name) > MAX_ZONE_NAME or name not in _known_zones():
        raise InvalidTimezone(f"not an IANA time zone: {name!r} (e.g. Europe/Berlin, America/New_York, UTC)")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidTimezone(f"not an IANA time zone: {name!r}") from None


_ZONES: set[str] = set()


def _known_zones() -> set[str]:
    # The set, not ZoneInfo(name) alone: ZoneInfo also opens paths such as "../../etc/x".
    if not _ZONES:
        _ZONES.update(available_timezones() | {UTC_NAME})
    return _ZONES


def bucket_sql(interval: Interval, column: str) -> str:
    """SQL for the UTC start of the local `interval` bucket `column` falls in (needs the `tz`
    parameter); `column` is a fixed column name of Tally's, never user text."""
    return _BUCKET_SQL[interval].format(column=column)


def local_midnight(day: date, tz: ZoneInfo) -> datetime:
    """The UTC instant `day` begins at in `tz`."""
    return datetime.combine(day, time(), tz).astimezone(UTC)


def local_date(moment: datetime, tz: ZoneInfo) -> date:
    return as_utc(moment).astimezone(tz).date()


def floor_local(moment: datetime, interval: Interval, tz: ZoneInfo) -> datetime:
    """The UTC start of the local bucket `moment` is in."""
    moment = as_utc(moment)
    if interval == "minute":
        return moment.replace(second=0, microsecond=0)
    local = moment.astimezone(tz)
    if interval == "hour":  # on the UTC axis: a repeated hour is two buckets
        return moment.replace(second=0, microsecond=0) - timedelta(minutes=local.minute)
    day = local.date()
    if interval == "week":
        day -= timedelta(days=day.weekday())
    elif interval == "month":
        day = day.replace(day=1)
    return local_midnight(day, tz)


def next_bucket(start: datetime, interval: Interval, tz: ZoneInfo) -> datetime:
    """The start of the local bucket after the one starting at `start`."""
    if interval == "minute":
        return start + timedelta(minutes=1)
    if interval == "hour":
        return start + timedelta(hours=1)
    day = local_date(start, tz)
    if interval == "day":
        return local_midnight(day + timedelta(days=1), tz)
    if interval == "week":
        return local_midnight(day + timedelta(days=7), tz)
    return local_midnight(add_months(day, 1), tz)


def bucket_starts(start: datetime, end: datetime, interval: Interval, tz: ZoneInfo) -> list[datetime]:
    """Every local bucket start from the one holding `start` up to `end` (exclusive)."""
    result, moment, end = [], floor_local(start, interval, tz), as_utc(end)
    while moment < end:
        result.append(moment)
        moment = next_bucket(moment, interval, tz)
    return result


def add_months(day: date, months: int) -> date:
    """`day` moved by whole months, clamped to the target month's length (31 Mar - 1 = 28 Feb)."""
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    month += 1
    following = date(year + (month == 12), month % 12 + 1, 1)
    return day.replace(year=year, month=month, day=min(day.day, (following - timedelta(days=1)).day))


def shift_local(moment: datetime, tz: ZoneInfo, days: int = 0, months: int = 0) -> datetime:
    """`moment` moved by calendar days / months on the local wall clock (yesterday at the same
    local time, a year ago on the same date), as a UTC instant."""
    local = as_utc(moment).astimezone(tz)
    moved = add_months(local.date(), months) + timedelta(days=days)
    return datetime.combine(moved, local.time().replace(tzinfo=None), tz).astimezone(UTC)
