"""The date ranges a site owner picks (today, last 24 hours, 7 days, 30 days, custom) and
the previous period each is compared with. All in UTC, like the data."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, time, timedelta

from storage.queries import Interval

PRESETS = {
    "today": "Today",
    "24h": "Last 24 hours",
    "7d": "Last 7 days",
    "30d": "Last 30 days",
    "custom": "Custom range",
}
DEFAULT_PRESET = "7d"


@dataclass(frozen=True)
class Period:
    """[start, end) and the previous period [previous_start, previous_end) of the same length."""

    start: datetime
    end: datetime
    previous_start: datetime
    previous_end: datetime
    interval: Interval

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
        )


def period(
    preset: str, now: datetime, custom_start: date | None = None, custom_end: date | None = None
) -> Period:
    """The range for a preset. Ranges that include the present end now (to the next minute),
    and are compared with the same stretch of the previous day / week / month: this
    morning against yesterday morning, not against all of yesterday."""
    up_to_now = now.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    midnight = datetime.combine(now.astimezone(UTC).date(), time(), UTC)
    if preset == "today":
        return _shifted(midnight, up_to_now, timedelta(days=1), "hour")
    if preset == "24h":
        next_hour = up_to_now.replace(minute=0) + timedelta(hours=1) if up_to_now.minute else up_to_now
        return _shifted(next_hour - timedelta(hours=24), next_hour, timedelta(hours=24), "hour")
    if preset == "30d":
        return _shifted(midnight - timedelta(days=29), up_to_now, timedelta(days=30), "day")
    if preset == "custom" and custom_start and custom_end:
        first, last = sorted((custom_start, custom_end))
        start = datetime.combine(first, time(), UTC)
        end = datetime.combine(last, time(), UTC) + timedelta(days=1)
        return _shifted(start, end, end - start, "hour" if end - start <= timedelta(days=2) else "day")
    return _shifted(midnight - timedelta(days=6), up_to_now, timedelta(days=7), "day")


def _shifted(start: datetime, end: datetime, shift: timedelta, interval: Interval) -> Period:
    return Period(start, end, start - shift, end - shift, interval)


def describe(p: Period) -> str:
    """What the range covers, in words a person reads at a glance."""
    last = p.end - timedelta(microseconds=1)
    if p.interval == "hour" and p.end - p.start <= timedelta(days=1):
        return f"{p.start:%d %b %H:%M} to {p.end:%d %b %H:%M} UTC"
    return f"{p.start:%d %b} to {last:%d %b %Y} (UTC)"
