"""Email reports as a site owner sets them up (the real CLI, the real store) and as a subscriber
receives them: a real SMTP server (aiosmtpd) on 127.0.0.1 takes the mail, the test parses it
and checks its numbers against the stats API's for the same week."""

from __future__ import annotations

import email
import os
import re
from datetime import UTC, date, datetime, timedelta
from email.message import EmailMessage
from email.policy import default

import pytest

from dashboard import display
from dashboard.app import build_app
from storage.client import connect
from storage.report_subscriptions import last_period
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.events import archive_rows, page_view
from tests.fixtures.ports import free_port
from tests.fixtures.smtp_inbox import Inbox
from tests.integration.test_cli_errors import one_line_error

pytestmark = pytest.mark.integration

SITE = "reports.example.com"
OWNER = "owner@example.com"


def week_events(first: date) -> list:
    """Last week: a 3-page visit of 2 minutes from news.ycombinator.com on Tuesday, two bounces on
    Thursday (one from google.com); the week before: one bounce."""
    tuesday = datetime.combine(first + timedelta(days=1), datetime.min.time(), tzinfo=UTC) + timedelta(
        hours=9
    )
    thursday = tuesday + timedelta(days=2)
    return [
        page_view(SITE, "a", tuesday, "/", referrer_domain="news.ycombinator.com"),
        page_view(
            SITE, "a", tuesday + timedelta(minutes=1), "/pricing", referrer_domain="news.ycombinator.com"
        ),
        page_view(SITE, "a", tuesday + timedelta(minutes=2), "/docs", referrer_domain="news.ycombinator.com"),
        page_view(SITE, "b", thursday, "/pricing", referrer_domain="google.com"),
        page_view(SITE, "c", thursday + timedelta(hours=1), "/"),
        page_view(SITE, "d", tuesday - timedelta(days=7), "/"),
    ]


@pytest.fixture(scope="module")
def env(dashboard_settings: Settings, inbox: tuple[Inbox, int]) -> dict[str, str]:
    client = connect(dashboard_settings)
    rows, columns = archive_rows(week_events(last_period("weekly", datetime.now(UTC).date()).first))
    client.insert("events", rows, column_names=columns)
    add_site(client, SITE)
    return (
        os.environ
        | dashboard_settings.environment()
        | {
            "TALLY_SMTP_HOST": "127.0.0.1",
            "TALLY_SMTP_PORT": str(inbox[1]),
            "TALLY_SMTP_STARTTLS": "false",
            "TALLY_SMTP_FROM": "reports@tally.example.com",
            "TALLY_DASHBOARD_SOURCE": "raw",
        }
    )


def tally(env: dict[str, str], *args: str) -> str:
    answer = run_tally(env, *args, timeout=120)
    assert answer.returncode == 0, answer.stderr
    return answer.stdout


def site_messages(inbox: Inbox) -> list[EmailMessage]:
    """The messages the inbox received about SITE (their subject names it first)."""
    mails = (email.message_from_bytes(raw, policy=default) for raw in inbox.messages)
    return [mail for mail in mails if mail["Subject"].startswith(f"{SITE}: ")]


def part(mail: EmailMessage, content_type: str) -> EmailMessage:
    return next(p for p in mail.walk() if p.get_content_type() == content_type)


def test_subscribe_send_once_and_the_numbers_are_the_apis(
    env: dict[str, str], inbox: tuple[Inbox, int], dashboard_settings: Settings
) -> None:
    assert "receives the weekly report" in tally(env, "reports", "subscribe", SITE, OWNER, "--weekly")
    tally(env, "reports", "subscribe", SITE, "team@example.com", "--monthly")
    assert tally(env, "reports", "list", SITE).splitlines() == [
        f"{SITE}\t{OWNER}\tweekly",
        f"{SITE}\tteam@example.com\tmonthly",
    ]
    # The store is the suite's: other tests' subscriptions may be due too, so count this site's.
    sent = tally(env, "reports", "send")
    assert sent.count(f"report of {SITE} ") == 2 and len(site_messages(inbox[0])) == 2
    assert f"of {SITE} " not in tally(env, "reports", "send")  # the same period: once
    assert len(site_messages(inbox[0])) == 2

    weekly = next(m for m in site_messages(inbox[0]) if m["To"] == OWNER)
    period = last_period("weekly", datetime.now(UTC).date())
    assert weekly["Subject"] == f"{SITE}: your week of {period.first} to {period.last}"
    stats = build_app(dashboard_settings).server.test_client()
    auth = {"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"}
    week = {"site": SITE, "source": "raw", "from": f"{period.first}T00:00:00Z",
            "to": f"{period.last + timedelta(days=1)}T00:00:00Z"}  # fmt: skip
    numbers = stats.get("/api/v1/stats/aggregate", query_string=week, headers=auth).get_json()
    assert (numbers["visitors"], numbers["pageviews"], numbers["sessions"]) == (3, 5, 3)

    html = part(weekly, "text/html").get_content()
    for metric in display.METRICS:
        shown = re.search(rf'data-metric="{metric.key}">([^<]*)<', html)
        assert shown and shown[1] == display.metric_value(metric, numbers[metric.key]), metric.key
    assert re.search(r'data-change="visitors">↑ 200% vs the previous week<', html)  # 1 visitor before
    pages = stats.get("/api/v1/stats/breakdown", query_string=week | {"by": "path"}, headers=auth).get_json()
    shown_pages = re.findall(r'<tr data-row="path"><td[^>]*>([^<]*)</td><td[^>]*>(\d+)</td>', html)
    assert shown_pages == [(row["value"], str(row["visitors"])) for row in pages[:5]]
    assert "news.ycombinator.com" in html and "google.com" in html

    text = part(weekly, "text/plain").get_content()
    assert "Unique visitors: 3 (↑ 200% vs the previous week)" in text
    assert "Bounce rate: 67%" in text

    chart = part(weekly, "image/png")
    assert chart.get_content().startswith(b"\x89PNG\r\n\x1a\n")
    assert f'src="cid:{chart["Content-ID"].strip("<>")}"' in html  # inline: nothing fetched
    assert "http://" not in html and "https://" not in html


def test_unsubscribe(env: dict[str, str]) -> None:
    tally(env, "reports", "subscribe", SITE, "leaving@example.com", "--weekly")
    assert "no longer receives the weekly report" in tally(
        env, "reports", "unsubscribe", SITE, "leaving@example.com"
    )
    assert "leaving@example.com" not in tally(env, "reports", "list", SITE)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["reports", "subscribe", SITE, "not-an-address", "--weekly"], "not an email address"),
        (["reports", "subscribe", SITE, OWNER], "--weekly or --monthly"),
        (["reports", "subscribe", "nowhere.example.com", OWNER, "--weekly"], "is not registered"),
        (["reports", "unsubscribe", SITE, "nobody@example.com"], "receives no report"),
    ],
)
def test_mistakes_get_one_line(env: dict[str, str], args: list[str], named: str) -> None:
    assert named in one_line_error(run_tally(env, *args, timeout=120))


def test_smtp_server_down_gets_one_line(env: dict[str, str]) -> None:
    tally(env, "reports", "subscribe", SITE, "later@example.com", "--weekly")
    down = env | {"TALLY_SMTP_PORT": str(free_port())}
    assert "the SMTP server at 127.0.0.1" in one_line_error(run_tally(down, "reports", "send", timeout=120))
    unset = env | {"TALLY_SMTP_HOST": ""}
    assert "TALLY_SMTP_HOST" in one_line_error(run_tally(unset, "reports", "send", timeout=120))
