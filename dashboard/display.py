"""How numbers and dimension values read on screen: counts, rates, durations, changes."""

from __future__ import annotations

from dataclasses import dataclass

from dashboard.countries import country_name
from stats import catalogue

# Dimension → how a person calls it, for headings and filter chips: the catalogue's labels
# (stats/catalogue.py), and the dashboard's own filters.
DIMENSION_LABELS = {
    **{entry.tally: entry.label for entry in catalogue.DIMENSIONS if entry.scope != "time"},
    "segment": "Segment",
}
# What an empty value means for each dimension.
EMPTY_VALUES = {
    "referrer_domain": "Direct / none",
    "utm_source": "(no UTM source)",
    "utm_medium": "(no UTM medium)",
    "utm_campaign": "(no UTM campaign)",
    "utm_content": "(no UTM content)",
    "utm_term": "(no UTM term)",
    "language": "(unknown)",
    "screen_size": "(unknown)",
}


@dataclass(frozen=True)
class Metric:
    key: str  # as queries.aggregate names it
    label: str
    kind: str  # count | rate | duration
    lower_is_better: bool = False


METRICS = [
    Metric("visitors", "Unique visitors", "count"),
    Metric("pageviews", "Total page views", "count"),
    Metric("sessions", "Visits", "count"),
    Metric("bounce_rate", "Bounce rate", "rate", lower_is_better=True),
    Metric("avg_session_duration_s", "Visit duration", "duration"),
]


def count(value: float) -> str:
    """Exact up to 100k (so that a number can be checked against the API), compact beyond."""
    value = int(value)
    if abs(value) < 100_000:
        return f"{value:,}"
    if abs(value) < 10_000_000:
        return f"{value / 1000:,.0f}k"
    return f"{value / 1_000_000:,.1f}M"


def rate(value: float) -> str:
    return f"{value * 100:.0f}%"


def duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def metric_value(metric: Metric, value: float) -> str:
    return {"count": count, "rate": rate, "duration": duration}[metric.kind](value)


@dataclass(frozen=True)
class Change:
    text: str
    tone: str  # good | bad | flat


NO_COMPARISON = Change("new", "flat")


def change(metric: Metric, current: float, previous: float) -> Change:
    """Change against the previous period: relative for counts and durations, in percentage
    points for the bounce rate (a rate going from 40% to 44% is "+4 pts", not "+10%")."""
    if metric.kind == "rate":
        points = round((current - previous) * 100)
        text = "no change" if points == 0 else f"{'↑' if points > 0 else '↓'} {abs(points)} pts"
        return Change(text, _tone(points, metric))
    if previous == 0:
        return Change("new" if current else "no change", _tone(current, metric))
    percent = round((current - previous) / previous * 100)
    text = "no change" if percent == 0 else f"{'↑' if percent > 0 else '↓'} {abs(percent)}%"
    return Change(text, _tone(percent, metric))


def _tone(direction: float, metric: Metric) -> str:
    if direction == 0:
        return "flat"
    return "good" if (direction > 0) != metric.lower_is_better else "bad"


def dimension_value(dimension: str, value: str) -> str:
    """A breakdown value as a person reads it: country names, a word for 'none'."""
    if dimension == "country":
        return country_name(value)
    if not value:
        return EMPTY_VALUES.get(dimension, "(none)")
    return value
