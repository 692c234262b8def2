"""Funnels from stored per-day results (source=agg, storage/queries/funnel_days.py) on the real
ClickHouse engine: the same numbers as raw and as the Python computation, also after a late
event lands in a day already stored (computed again, never served stale), with today and a goal
filter computed live, yesterday computed again only when today continues one of its sessions,
and a definition's days never served to another."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from clickhouse_connect.driver.client import Client

from storage import goals as goal_store
from storage import queries
from storage.client import connect
from storage.queries import FunnelReport, FunnelStep, StatsQuery
from storage.sites import add_site
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.events import archive_rows, page_view
from tests.fixtures.funnel_truth import expected_funnel

pytestmark = pytest.mark.integration

SITE = "funnel-days.example.com"
# Sites with the same traffic for the tests that count what was stored: theirs alone.
STORED_SITE, LATE_SITE = "funnel-days-stored.example.com", "funnel-days-late.example.com"
YESTERDAY_SITE = "funnel-days-yesterday.example.com"
DAY = datetime(2026, 11, 3, tzinfo=UTC)
STEPS = [FunnelStep("page", "/product/*"), FunnelStep("event", "Signup"), FunnelStep("page", "/thanks")]
THREE_DAYS = StatsQuery(SITE, DAY, DAY + timedelta(days=3))
AFTER_THE_DAYS = DAY + timedelta(days=20)  # every day of the range closed


def at(day: int, hour: float) -> datetime:
    return DAY + timedelta(days=day, hours=hour)


def visit(site: str, visitor: str, start: datetime, *steps: str) -> list[PageViewEvent]:
    """One session: a step a few minutes apart, a path for a page view, a name for an event."""
    return [
        page_view(site, visitor, start + timedelta(minutes=4 * i), step)
        if step.startswith("/")
        else page_view(site, visitor, start + timedelta(minutes=4 * i), "/", name=step)
        for i, step in enumerate(steps)
    ]


def traffic(site: str) -> list[PageViewEvent]:
    return [
        *visit(site, "a", at(0, 9), "/product/1", "Signup", "/thanks"),
        *visit(site, "b", at(0, 23.8), "/product/2", "Signup"),  # runs past midnight into day 1
        *visit(site, "c", at(1, 12), "/product/1"),
        *visit(site, "d", at(1, 23.9), "/product/3"),  # the late event below continues this session
        *visit(site, "e", at(2, 8), "/product/1", "Signup", "/thanks"),
        *visit(site, "f", at(2, 15), "/"),
        *visit(site, "g", at(3, 1), "/product/1", "Signup"),  # after the range
    ]


EVENTS = traffic(SITE)
# Arrives after days 0-2 were stored: d's session (day 1) reaches the sign-up after midnight.
LATE = visit(LATE_SITE, "d", at(1, 23.9) + timedelta(minutes=20), "Signup")


@pytest.fixture(scope="module")
def store(dashboard_settings: Settings) -> Client:
    client = connect(dashboard_settings)
    insert(client, [*EVENTS, *traffic(STORED_SITE), *traffic(LATE_SITE), *traffic(YESTERDAY_SITE)])
    return client


def insert(client: Client, events: Sequence[PageViewEvent]) -> None:
    rows, columns = archive_rows(list(events))
    client.insert("events", rows, column_names=columns)


def agg(client: Client, q: StatsQuery, now: datetime = AFTER_THE_DAYS) -> FunnelReport:
    return queries.funnel(client, q, STEPS, source="agg", now=now)


def counts(report: FunnelReport) -> list[tuple[int, int]]:
    return [(row.visitors, row.sessions) for row in report.steps]


def raw(client: Client, q: StatsQuery) -> list[tuple[int, int]]:
    return counts(queries.funnel(client, q, STEPS, source="raw"))


def test_days_are_stored_once_then_read(store: Client) -> None:
    q = replace(THREE_DAYS, site=STORED_SITE)
    first = agg(store, q)
    assert first.days.computed_days == 3 and first.days.stored_days == 0 and first.days.live == []
    second = agg(store, q)
    assert second.days.computed_days == 0 and second.days.stored_days == 3
    assert counts(first) == counts(second) == raw(store, q) == expected_funnel(traffic(STORED_SITE), q, STEPS)
    assert counts(second) == [(5, 5), (3, 3), (2, 2)]  # b reaches the sign-up after midnight


def test_a_late_event_recomputes_the_days_it_touches_on_both_sources(store: Client) -> None:
    q = replace(THREE_DAYS, site=LATE_SITE)
    before = agg(store, q)  # days 0-2 stored
    insert(store, LATE)  # lands on day 2: changes what days 1 and 2 (and 3) were computed from
    after = agg(store, q)
    assert after.days.computed_days == 2 and after.days.stored_days == 1  # day 0 still holds
    events = [*traffic(LATE_SITE), *LATE]
    assert counts(after) == raw(store, q) == expected_funnel(events, q, STEPS)
    assert counts(before)[1] == (3, 3) and counts(after)[1] == (4, 4)  # d now reaches the sign-up
    assert agg(store, q).days.computed_days == 0  # stored again, under the new fingerprint


@pytest.mark.parametrize(
    "q",
    [
        StatsQuery(SITE, at(0, 23.5), at(2, 12)),  # mid-day edges on both sides
        StatsQuery(SITE, at(-1, 23), at(2, 23)),  # Europe/Berlin's days: local midnight is 23:00 UTC
        StatsQuery(SITE, at(0, 10), at(0, 23.9)),  # inside one day: all live
    ],
    ids=["mid-day", "berlin", "within-a-day"],
)
def test_edges_are_computed_live_and_add_up_with_the_stored_days(store: Client, q: StatsQuery) -> None:
    report = agg(store, q)
    assert counts(report) == raw(store, q) == expected_funnel(EVENTS, q, STEPS)
    assert report.days.live and all(start < end for start, end in report.days.live)


def test_today_is_computed_live_and_yesterday_stored(store: Client) -> None:
    q = StatsQuery(SITE, at(-1, 0), at(4, 0))
    report = agg(store, q, now=at(2, 10))  # today is day 2: its events still come
    assert report.days is not None
    assert (report.days.stored_from, report.days.stored_to) == ("2026-11-02", "2026-11-04")
    assert report.days.live == [[at(2, 0).isoformat(), at(4, 0).isoformat()]]
    assert counts(report) == raw(store, q)


def test_yesterday_is_computed_again_only_when_today_continues_one_of_its_sessions(store: Client) -> None:
    q, today = StatsQuery(YESTERDAY_SITE, DAY, at(2, 0)), at(2, 10)
    first = agg(store, q, now=today)
    assert first.days is not None and first.days.computed_days == 2
    insert(store, [page_view(YESTERDAY_SITE, "z", at(2, 9), "/product/1")])  # a visitor of today only
    unrelated = agg(store, q, now=today)
    assert unrelated.days is not None and (unrelated.days.stored_days, unrelated.days.computed_days) == (2, 0)
    carried_over = visit(YESTERDAY_SITE, "d", at(1, 23.9) + timedelta(minutes=20), "Signup")
    insert(store, carried_over)  # after midnight, d's session of yesterday reaches the sign-up
    after = agg(store, q, now=today)
    assert after.days is not None and (after.days.stored_days, after.days.computed_days) == (1, 1)
    events = [*traffic(YESTERDAY_SITE), *carried_over]
    assert counts(after) == raw(store, q) == expected_funnel(events, q, STEPS)
    assert counts(first)[1] == (2, 2) and counts(after)[1] == (3, 3)


def test_a_filtered_funnel_keeps_days_of_its_own(store: Client) -> None:
    filtered = StatsQuery(SITE, DAY, DAY + timedelta(days=3), filters={"path": "/thanks"})
    agg(store, THREE_DAYS)
    report = agg(store, filtered)
    assert report.days.stored_days == 0 and report.days.computed_days == 3  # not the unfiltered days
    assert counts(report) == raw(store, filtered) == [(2, 2), (2, 2), (2, 2)]


def test_a_goal_filter_is_computed_live(store: Client) -> None:
    """Converted visitors are those who converted anywhere in the range, which no single day knows."""
    add_site(store, SITE)
    if "Visit /thanks" not in {goal.name for goal in goal_store.list_goals(store, SITE)}:
        goal_store.add_goal(store, goal_store.make_goal(SITE, page_pattern="/thanks"))
    q = StatsQuery(SITE, DAY, DAY + timedelta(days=3), filters={"goal": "Visit /thanks"})
    report = agg(store, q)
    assert report.days.stored_days == report.days.computed_days == 0
    assert report.days.live == [[DAY.isoformat(), (DAY + timedelta(days=3)).isoformat()]]
    assert counts(report) == raw(store, q)
