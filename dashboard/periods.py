"""The date ranges a site owner picks (today, yesterday, 7 and 30 days, month to date, last
month, year to date, last 12 months, all time, custom) and the period each is compared with:
the previous period or the same period a year before. Ranges follow the site's time zone
(storage/calendar.py): "today" starts at the site's midnight, a month on its first day; every
bound is a UTC instant, as the query layer takes it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal

from storage.calendar import (
    UTC_NAME,
    add_months,
    floor_local,
    local_date,
    local_midnight,
    next_bucket,
    shift_local,
    zone,
)
from storage.queries import Interval

PRESETS = {
    "today": "Today",
    "yesterday": "Yesterday",
    "24h": "Last 24 hours",
    "7d": "Last 7 days",
    "30d": "Last 30 days",
    "month": "Month to date",
    "last_month": "Last month",
    "year": "Year to date",
    "12mo": "Last 12 months",
    "all": "All time",
    "custom": "Custom range",
}
DEFAULT_PRESET = "7d"

Comparison = Literal["previous_period", "year_over_year"]
COMPARISONS: dict[str, str] = {
    "previous_period": "Previous period",
    "year_over_year": "Same period last year",
}
DEFAULT_COMPARISON: Comparison = "previous_period"


class UnknownPeriod(ValueError):
    """A preset or comparison outside PRESETS / COMPARISONS."""


@dataclass(frozen=True)
class Period:
    """[start, end) and the period it is compared with, [previous_start, previous_end)."""

    start: datetime
    end: datetime
    previous_start: datetime
    previous_end: datetime
    interval: Interval
    timezone: str = UTC_NAME
    compare: Comparison = DEFAULT_COMPARISON

    def to_store(self) -> dict[str, str]:
        """JSON for a dcc.Store: the browser keeps the period, callbacks read it back."""
        return {
            name: value if isinstance(value, str) else value.isoformat()
            for name, value in asdict(self).items()
        }

    @classmethod
    def from_store(cls, data: dict[str, str]) -> Period:
        return cls(
            start=datetime.fromisoformat(data["start"]),
            end=datetime.fromisoformat(data["end"]),
            previous_start=datetime.fromisoformat(data["previous_start"]),
            previous_end=datetime.fromisoformat(data["previous_end"]),
            interval=data["interval"],  # type: ignore[arg-type]
            timezone=data.get("timezone", UTC_NAME),
            compare=data.get("compare", DEFAULT_COMPARISON),  # type: ignore[arg-type]
        )


def period(
    preset: str,
    now: datetime,
    custom_start: date | None = None,
    custom_end: date | None = None,
    timezone: str = UTC_NAME,
    compare: str = DEFAULT_COMPARISON,
    first_day: date | None = None,
) -> Period:
    """The range for a preset in `timezone`. Ranges that include the present end now (to the
    next minute) and are compared with the same stretch of the previous day / week / month:
    this morning against yesterday morning, not against all of yesterday. `first_day` is the
    site's first day with events (where "all time" starts)."""
    if preset not in PRESETS:
        raise UnknownPeriod(f"must be one of {', '.join(p for p in PRESETS if p != 'custom')}")
    if compare not in COMPARISONS:
        raise UnknownPeriod(f"must be one of {', '.join(COMPARISONS)}")
    tz = zone(timezone)
    up_to_now = now.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    today = local_date(now, tz)
    midnight = local_midnight(today, tz)

    def days_ago(days: int) -> datetime:
        return local_midnight(today - timedelta(days=days), tz)

    first_of_month = today.replace(day=1)
    # preset -> (start, end, the previous period's shift: (days, months))
    ranges: dict[str, tuple[datetime, datetime, tuple[int, int]]] = {
        "today": (midnight, up_to_now, (-1, 0)),
        "yesterday": (days_ago(1), midnight, (-1, 0)),
        "7d": (days_ago(6), up_to_now, (-7, 0)),
        "30d": (days_ago(29), up_to_now, (-30, 0)),
        "month": (local_midnight(first_of_month, tz), up_to_now, (0, -1)),
        "last_month": (
            local_midnight(add_months(first_of_month, -1), tz), local_midnight(first_of_month, tz), (0, -1)
        ),
        "year": (local_midnight(today.replace(month=1, day=1), tz), up_to_now, (0, -12)),
        "12mo": (local_midnight(add_months(first_of_month, -11), tz), up_to_now, (0, -12)),
    }  # fmt: skip
    if preset == "custom" and custom_start and custom_end:
        first, last = sorted((custom_start, custom_end))
        days = (last - first).days + 1
        ranges["custom"] = (
            local_midnight(first, tz),
            local_midnight(last + timedelta(days=1), tz),
            (-days, 0),
        )
    if preset == "all":  # compared with as long a stretch just before it
        start = local_midnight(min(first_day or today, today), tz)
        before = start - (up_to_now - start)
        return _compared(start, up_to_now, interval_for(start, up_to_now), timezone, compare, before, start)
    if preset == "24h":
        end = next_bucket(floor_local(now, "hour", tz), "hour", tz)
        start = end - timedelta(hours=24)
        return _compared(start, end, "hour", timezone, compare, start - timedelta(hours=24), start)
    start, end, (days, months) = ranges.get(preset, ranges[DEFAULT_PRESET])
    previous = (shift_local(start, tz, days, months), shift_local(end, tz, days, months))
    return _compared(start, end, interval_for(start, end), timezone, compare, *previous)


def _compared(
    start: datetime,
    end: datetime,
    interval: Interval,
    timezone: str,
    compare: str,
    previous_start: datetime,
    previous_end: datetime,
) -> Period:
    if compare == "year_over_year":
        tz = zone(timezone)
        previous_start, previous_end = shift_local(start, tz, months=-12), shift_local(end, tz, months=-12)
    return Period(start, end, previous_start, previous_end, interval, timezone, compare)  # type: ignore[arg-type]


def interval_for(start: datetime, end: datetime) -> Interval:
    """A chart's buckets for a range's length: hours up to two days, days up to a quarter, then
    months."""
    length = end - start
    if length <= timedelta(days=2):
        return "hour"
    return "day" if length <= timedelta(days=92) else "month"


def describe(p: Period) -> str:
    """What the range covers, in words a person reads at a glance, in the site's zone."""
    tz = zone(p.timezone)
    start, last = p.start.astimezone(tz), (p.end - timedelta(microseconds=1)).astimezone(tz)
    if p.interval == "hour" and p.end - p.start <= timedelta(days=1):
        end = p.end.astimezone(tz)
        return f"{start:%d %b %H:%M} to {end:%d %b %H:%M} {p.timezone}"
    return f"{start:%d %b} to {last:%d %b %Y} ({p.timezone})"


def describe_comparison(p: Period) -> str:
    """The compared period, in the same words."""
    return describe(Period(p.previous_start, p.previous_end, p.start, p.end, p.interval, p.timezone))
