"""The date ranges a site owner picks (today, yesterday, 7 and 30 days, month to date, last
month, year to date, last 12 months, all time, custom) and the period each is compared with:
the previous period or the same period a year before. Ranges follow the site's time zone
(storage/calendar.py): "today" starts at the site's midnight, a month on its first day; every
bound is a UTC instant, as the query layer takes it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Literal

from storage.calendar import (
    INTERVALS,
    UTC_NAME,
    InvalidTimezone,
    add_months,
    floor_local,
    local_date,
    local_midnight,
    next_bucket,
    shift_local,
    zone,
)
from storage.queries import Interval, UnsupportedQuery, fitting_interval

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


# The dates a dashboard period may cover: no site's traffic predates 2000, and none is later
# than next year (UTC instants of a local day reach a day either side). The compared period
# ends by the period's end and starts at most its length and a year (and a leap day's slack)
# before its start: the stretch just before it, or the same one a year earlier.
EARLIEST_DAY = date(2000, 1, 1)
COMPARED_REACH = timedelta(days=368)


class UnknownPeriod(UnsupportedQuery):
    """A preset or comparison outside PRESETS / COMPARISONS, or a period outside the bounds."""


def latest_day(now: datetime) -> date:
    """The last day a custom range may end on: the end of next year."""
    return date(now.year + 1, 12, 31)


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
    def from_store(cls, data: dict[str, str], now: datetime | None = None) -> Period:
        """The period a callback reads back from the browser, which may send anything: parsed,
        then bounded (`bounded`), so that a forged period costs what a chosen one can. Every
        callback reads its period through here; UnknownPeriod (an UnsupportedQuery: the panel
        says it) for a period that is none."""
        try:
            parsed = cls(
                start=_instant(data["start"]),
                end=_instant(data["end"]),
                previous_start=_instant(data["previous_start"]),
                previous_end=_instant(data["previous_end"]),
                interval=data["interval"],  # type: ignore[arg-type]
                timezone=data.get("timezone", UTC_NAME),
                compare=data.get("compare", DEFAULT_COMPARISON),  # type: ignore[arg-type]
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            raise UnknownPeriod("period: not a period this dashboard chose; reload the page") from None
        return bounded(parsed, now or datetime.now(UTC))


def _instant(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise ValueError("a period's bounds are UTC instants")
    return moment


def bounded(p: Period, now: datetime) -> Period:
    """`p` within the dashboard's bounds: its range ordered and between EARLIEST_DAY and the end
    of next year, the compared one within COMPARED_REACH of it, a known zone and comparison,
    and an interval whose buckets over either range are at most the API's cap
    (storage.queries.MAX_BUCKETS): a finer one is coarsened to the finest that fits, as the
    chart of a longer range would be. UnknownPeriod otherwise."""
    earliest = datetime.combine(EARLIEST_DAY, datetime.min.time(), UTC) - timedelta(days=1)
    latest = datetime.combine(latest_day(now), datetime.min.time(), UTC) + timedelta(days=2)
    if not earliest <= p.start < p.end <= latest:
        raise UnknownPeriod(
            f"period: dates between {EARLIEST_DAY.year} and {latest_day(now).year}, the start before the end"
        )
    reach = p.start - (p.end - p.start) - COMPARED_REACH
    if not reach <= p.previous_start < p.previous_end <= p.end:
        raise UnknownPeriod("period: the compared range is the one before the period or a year earlier")
    if p.compare not in COMPARISONS:
        raise UnknownPeriod(f"period: compare must be one of {', '.join(COMPARISONS)}")
    if p.interval not in INTERVALS:
        raise UnknownPeriod(f"period: interval must be one of {', '.join(INTERVALS)}")
    try:
        zone(p.timezone)
    except InvalidTimezone as refused:
        raise UnknownPeriod(f"period: {refused}") from None
    longest = max(p.end - p.start, p.previous_end - p.previous_start)
    interval = fitting_interval(p.start, p.start + longest, p.interval)
    return p if interval == p.interval else replace(p, interval=interval)


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
        if first < EARLIEST_DAY or last > latest_day(now):
            raise UnknownPeriod(f"a custom range is between {EARLIEST_DAY} and {latest_day(now)}")
        days = (last - first).days + 1
        ranges["custom"] = (
            local_midnight(first, tz),
            local_midnight(last + timedelta(days=1), tz),
            (-days, 0),
        )
    if preset == "all":  # compared with as long a stretch just before it
        start = local_midnight(max(min(first_day or today, today), EARLIEST_DAY), tz)
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


def picked_day(text: object) -> date | None:
    """A day given as text, ISO, by its first ten characters (a date picker's value, a time
    chart's clicked x), or None for no day or one that is not."""
    try:
        return date.fromisoformat(text[:10]) if isinstance(text, str) and text else None
    except ValueError:
        return None
