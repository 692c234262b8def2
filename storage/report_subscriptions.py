"""Email report subscriptions and the record of reports sent (migration 0040).

A subscriber receives a site's report weekly (the last whole ISO week, Monday to Sunday) and/or
monthly (the last whole calendar month), in the site's time zone: a week starts on Monday at the
site's midnight, a month on the 1st at its midnight (storage/calendar.py), so a report holds the
days the dashboard shows for that week or month. A report is due when its period has ended and
no delivery of it is recorded; the delivery is recorded once the SMTP server accepted the mail,
so each (site, subscriber, frequency, period) is sent once — a sender that dies between the
server's acceptance and the record sends it once more at its next run (at least once, never
silently lost).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Literal

from clickhouse_connect.driver.client import Client

from storage import site_caps
from storage.calendar import UTC_NAME, InvalidTimezone, local_date, local_midnight, zone
from storage.site_settings_rows import SettingsTable
from storage.sites import list_timezones, normalise, registered
from tally.refusal import Refused

Frequency = Literal["weekly", "monthly"]
FREQUENCIES: tuple[Frequency, ...] = ("weekly", "monthly")
SUBSCRIPTIONS = "report_subscriptions"
DELIVERIES = "report_deliveries"
# A subscription is its key (site, subscriber, frequency): it is there or removed.
TABLE = SettingsTable(SUBSCRIPTIONS, keys=("site", "email", "frequency"))
# An address an SMTP server takes: local part @ a domain with a dot; no spaces, no brackets,
# no second @ (RFC 5322's full grammar is not needed to refuse typos).
EMAIL = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$")
MAX_EMAIL = 254


class InvalidSubscription(Refused):
    """A subscription Tally cannot add or remove; the message names what is wrong."""


@dataclass(frozen=True)
class Subscription:
    site: str
    email: str
    frequency: Frequency


@dataclass(frozen=True)
class ReportPeriod:
    """[first, last] whole local days of the site's `timezone`, and the period before it of the
    same kind."""

    frequency: Frequency
    first: date
    last: date
    previous_first: date
    previous_last: date
    timezone: str = UTC_NAME

    @property
    def span(self) -> tuple[datetime, datetime]:
        """[start, end) of the period as UTC instants: its first and its next local midnight."""
        return _span(self.first, self.last, self.timezone)

    @property
    def previous_span(self) -> tuple[datetime, datetime]:
        return _span(self.previous_first, self.previous_last, self.timezone)


def _span(first: date, last: date, timezone: str) -> tuple[datetime, datetime]:
    tz = zone(timezone)
    return local_midnight(first, tz), local_midnight(last + timedelta(days=1), tz)


def checked_email(email: str) -> str:
    email = email.strip()
    if len(email) > MAX_EMAIL or not EMAIL.match(email):
        raise InvalidSubscription(f"not an email address: {email!r}")
    return email


def subscribe(client: Client, site: str, email: str, frequency: Frequency) -> Subscription:
    site, email = normalise(site), checked_email(email)
    if frequency not in FREQUENCIES:
        raise InvalidSubscription(f"frequency must be weekly or monthly (got {frequency!r})")
    registered(client, site, InvalidSubscription)
    subscription = Subscription(site, email, frequency)
    existing = list_subscriptions(client, site)
    if subscription not in existing:  # subscribing again changes nothing, so takes no place
        site_caps.REPORT_SUBSCRIPTIONS.check(len(existing), InvalidSubscription)
    _write(client, subscription, removed=0)
    return subscription


def unsubscribe(
    client: Client, site: str, email: str, frequency: Frequency | None = None
) -> list[Subscription]:
    """End `email`'s subscriptions to `site` (one frequency, or all); InvalidSubscription if none."""
    site, email = normalise(site), email.strip()
    ended = [
        s for s in list_subscriptions(client, site) if s.email == email and frequency in (None, s.frequency)
    ]
    if not ended:
        raise InvalidSubscription(f"{email} receives no report of {site} (see 'tally reports list {site}')")
    for subscription in ended:
        _write(client, subscription, removed=1)
    return ended


def list_subscriptions(client: Client, site: str | None = None) -> list[Subscription]:
    """Live subscriptions (of one site, or all), by site, email and frequency."""
    rows = TABLE.newest(
        client,
        "{site:String} = '' OR site = {site:String}",
        {"site": normalise(site) if site else ""},
        order=("site", "email", "frequency"),
    )
    return [Subscription(*row) for row in rows]


def last_period(frequency: Frequency, today: date, timezone: str = UTC_NAME) -> ReportPeriod:
    """The last whole week (Monday to Sunday) or calendar month before `today`, a local date of
    `timezone`."""
    if frequency == "weekly":
        first = today - timedelta(days=today.weekday() + 7)
        return ReportPeriod(frequency, first, first + timedelta(days=6), first - timedelta(days=7),
                            first - timedelta(days=1), timezone)  # fmt: skip
    last = today.replace(day=1) - timedelta(days=1)
    first = last.replace(day=1)
    previous_last = first - timedelta(days=1)
    return ReportPeriod(frequency, first, last, previous_last.replace(day=1), previous_last, timezone)


def due(client: Client, now: datetime) -> list[tuple[Subscription, ReportPeriod]]:
    """Every subscription's last whole period whose report has not been sent, the period being
    the site's: a New York site's week ends at its Monday midnight (05:00 UTC), a Kolkata site's
    at 18:30 UTC on Sunday. Deliveries stay keyed by the period's first (local) day."""
    zones = dict(list_timezones(client))
    sent = {
        (site, email, frequency, period_start)
        for site, email, frequency, period_start in client.query(
            f"SELECT site, email, frequency, period_start FROM {DELIVERIES} FINAL"
        ).result_rows
    }
    result = []
    for subscription in list_subscriptions(client):
        timezone = _known_zone(zones.get(subscription.site, UTC_NAME))
        period = last_period(subscription.frequency, local_date(now, zone(timezone)), timezone)
        if (subscription.site, subscription.email, subscription.frequency, period.first) not in sent:
            result.append((subscription, period))
    return result


def _known_zone(name: str) -> str:
    """A zone the database no longer knows reads as UTC, as storage.sites.site_timezone says."""
    try:
        zone(name)
    except InvalidTimezone:
        return UTC_NAME
    return name


def record_delivery(client: Client, subscription: Subscription, period: ReportPeriod) -> None:
    client.insert(
        DELIVERIES,
        [[subscription.site, subscription.email, subscription.frequency, period.first, period.last]],
        column_names=["site", "email", "frequency", "period_start", "period_end"],
    )


def _write(client: Client, subscription: Subscription, removed: int) -> None:
    TABLE.write(client, [[subscription.site, subscription.email, subscription.frequency]], removed)
