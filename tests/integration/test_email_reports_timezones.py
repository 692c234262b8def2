"""Email reports of sites outside UTC, as their subscribers receive them: a real SMTP server
(aiosmtpd) on 127.0.0.1 takes what `tally reports send` sends, and the test reads the numbers,
the days and the chart of the mail against the stats API's for the same local week or month.

New York's week starts on Monday at its midnight (05:00 UTC): a visit at 23:00 on its Sunday
(04:00 UTC on Monday) belongs to the week that Sunday ends. Kolkata's month starts on the 1st at
its midnight (18:30 UTC the day before): a visit at 00:30 on the 1st is that month's.
"""

from __future__ import annotations

import email
import io
import os
import re
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.policy import default

import pytest
from clickhouse_connect.driver.client import Client
from PIL import Image

from dashboard import display
from dashboard.app import build_app
from dashboard.email_reports import BAR_COLOUR, CHART_HEIGHT, CHART_WIDTH
from storage.calendar import local_date, local_midnight, zone
from storage.client import connect
from storage.report_subscriptions import ReportPeriod, due, last_period, subscribe, unsubscribe
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.events import archive_rows, page_view
from tests.fixtures.smtp_inbox import Inbox
from tests.integration.test_email_reports import part

pytestmark = pytest.mark.integration

NEW_YORK, KOLKATA = "America/New_York", "Asia/Kolkata"
WEEK_SITE = "ny.reports.example.com"
MONTH_SITE = "kolkata.reports.example.com"
WEEKLY, MONTHLY = "ny-owner@example.com", "kolkata-owner@example.com"


def period_now(frequency: str, timezone: str) -> ReportPeriod:
    """The period `tally reports send` reports on now, for a site in `timezone`."""
    return last_period(frequency, local_date(datetime.now(UTC), zone(timezone)), timezone)  # type: ignore[arg-type]


def week_events() -> list:
    """A visit at 00:30 on the week's Monday and one at 23:00 on its Sunday (Monday in UTC);
    the week before: one at 23:30 on its Sunday (already the week's Monday in UTC)."""
    week, ny = period_now("weekly", NEW_YORK), zone(NEW_YORK)
    start, end = local_midnight(week.first, ny), local_midnight(week.last + timedelta(days=1), ny)
    return [
        page_view(WEEK_SITE, "a", start + timedelta(minutes=30), "/", referrer_domain="google.com"),
        page_view(WEEK_SITE, "b", end - timedelta(hours=1), "/pricing"),
        page_view(WEEK_SITE, "c", start - timedelta(minutes=30), "/"),
    ]


def month_events() -> list:
    """A visit at 00:30 on the month's 1st (the last day of the month before, in UTC) and one at
    noon on its last day; the month before: one on its 15th."""
    month, kolkata = period_now("monthly", KOLKATA), zone(KOLKATA)
    return [
        page_view(MONTH_SITE, "m1", local_midnight(month.first, kolkata) + timedelta(minutes=30), "/"),
        page_view(MONTH_SITE, "m2", local_midnight(month.last, kolkata) + timedelta(hours=12), "/docs"),
        page_view(
            MONTH_SITE,
            "m0",
            local_midnight(month.previous_first, kolkata) + timedelta(days=14, hours=12),
            "/",
        ),
    ]


@pytest.fixture(scope="module")
def store(dashboard_settings: Settings) -> Client:
    client = connect(dashboard_settings)
    add_site(client, WEEK_SITE, NEW_YORK)
    add_site(client, MONTH_SITE, KOLKATA)
    rows, columns = archive_rows(week_events() + month_events())
    client.insert("events", rows, column_names=columns)
    return client


@pytest.fixture(scope="module")
def mails(dashboard_settings: Settings, inbox: tuple[Inbox, int], store: Client) -> dict[str, EmailMessage]:
    """The reports the subscribers received, by recipient."""
    env = os.environ | dashboard_settings.environment() | {
        "TALLY_SMTP_HOST": "127.0.0.1",
        "TALLY_SMTP_PORT": str(inbox[1]),
        "TALLY_SMTP_STARTTLS": "false",
        "TALLY_SMTP_FROM": "reports@tally.example.com",
        "TALLY_DASHBOARD_SOURCE": "raw",
    }  # fmt: skip
    for args in ([WEEK_SITE, WEEKLY, "--weekly"], [MONTH_SITE, MONTHLY, "--monthly"]):
        assert run_tally(env, "reports", "subscribe", *args, timeout=120).returncode == 0
    sent = run_tally(env, "reports", "send", timeout=120)
    assert sent.returncode == 0, sent.stderr
    received = [email.message_from_bytes(raw, policy=default) for raw in inbox[0].messages]
    return {str(mail["To"]): mail for mail in received if mail["To"] in (WEEKLY, MONTHLY)}


def api_numbers(settings: Settings, site: str, period: ReportPeriod) -> dict:
    start, end = period.span
    stats = build_app(settings).server.test_client()
    answer = stats.get(
        "/api/v1/stats/aggregate",
        query_string={"site": site, "source": "raw", "from": f"{start:%Y-%m-%dT%H:%M:%SZ}",
                      "to": f"{end:%Y-%m-%dT%H:%M:%SZ}"},
        headers={"Authorization": f"Bearer {settings.resolved_api_key()}"},
    )  # fmt: skip
    assert answer.status_code == 200, answer.get_json()
    return answer.get_json()


def chart_bars(mail: EmailMessage, days: int) -> list[bool]:
    """Per day of the chart: whether it has a bar (the bar colour just above the baseline)."""
    chart = Image.open(io.BytesIO(part(mail, "image/png").get_content())).convert("RGB")
    assert chart.size == (CHART_WIDTH, CHART_HEIGHT)
    slot = CHART_WIDTH / days
    return [chart.getpixel((int((day + 0.5) * slot), CHART_HEIGHT - 2)) == BAR_COLOUR for day in range(days)]


@pytest.mark.parametrize(
    ("recipient", "site", "frequency", "timezone"),
    [(WEEKLY, WEEK_SITE, "weekly", NEW_YORK), (MONTHLY, MONTH_SITE, "monthly", KOLKATA)],
)
def test_report_covers_the_sites_local_week_or_month(
    mails: dict[str, EmailMessage], dashboard_settings: Settings, recipient: str, site: str,
    frequency: str, timezone: str,
) -> None:  # fmt: skip
    period = period_now(frequency, timezone)
    mail = mails[recipient]
    word = {"weekly": "week", "monthly": "month"}[frequency]
    assert mail["Subject"] == f"{site}: your {word} of {period.first} to {period.last}"
    numbers = api_numbers(dashboard_settings, site, period)
    assert (numbers["visitors"], numbers["pageviews"]) == (2, 2)  # both edge visits, not the one before

    html = part(mail, "text/html").get_content()
    for metric in display.METRICS:
        shown = re.search(rf'data-metric="{metric.key}">([^<]*)<', html)
        assert shown and shown[1] == display.metric_value(metric, numbers[metric.key]), metric.key
    assert re.search(rf'data-change="visitors">↑ 100% vs the previous {word}<', html)  # 1 visitor before
    assert f"({timezone})" in html

    days = (period.last - period.first).days + 1
    text = part(mail, "text/plain").get_content().replace("\r\n", "\n")
    assert f"Visitors per day ({timezone}):\n  {period.first}: 1\n" in text
    assert f"  {period.last}: 1\n" in text
    assert text.count(": 0\n") == days - 2  # every other local day of the period is empty
    assert chart_bars(mail, days) == [True] + [False] * (days - 2) + [True]


def test_a_week_is_due_at_the_sites_monday_midnight(store: Client) -> None:
    """A New York week has not ended at 04:59 UTC on Monday (23:59 on Sunday there); at 05:00 it has."""
    monday = period_now("weekly", NEW_YORK).first + timedelta(days=7)
    midnight = local_midnight(monday, zone(NEW_YORK))
    subscribe(store, WEEK_SITE, "due-check@example.com", "weekly")
    try:
        before = [
            p for s, p in due(store, midnight - timedelta(minutes=1)) if s.email == "due-check@example.com"
        ]
        after = [p for s, p in due(store, midnight) if s.email == "due-check@example.com"]
    finally:  # leaves nothing due for the other tests' senders
        unsubscribe(store, WEEK_SITE, "due-check@example.com")
    assert [p.last for p in before] == [monday - timedelta(days=8)]
    assert [p.last for p in after] == [monday - timedelta(days=1)]
