"""Time in UTC, as every component keeps it: ClickHouse hands back naive datetimes that are
UTC (DateTime64(3, 'UTC') columns), and users type times with or without an offset."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """`moment` in UTC: a naive one is taken to be UTC already, an aware one is converted."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
