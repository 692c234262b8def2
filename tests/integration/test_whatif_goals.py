"""`tally whatif goals` (issue 21): a site's goals now and as proposed, side by side, at query
time (goals apply when a report is read: no replay). The proposed side's numbers from the agg
source equal the raw source's and a plain-Python count of the events this test wrote; --apply
makes the proposed goals the site's, recorded as one definitions version.

Real ClickHouse engine, a database of its own; two days of random traffic inserted into
`events`, whose materialized views feed the goal tables the agg source reads.
"""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fnmatch import fnmatchcase
from uuid import uuid4

import pytest

from storage import definitions, queries
from storage import goals as goal_store
from storage.client import connect
from storage.goals import Goal
from storage.queries import StatsQuery
from storage.queries.contract import GoalRow
from storage.queries.whatif import compare_goals
from storage.schema import apply_migrations
from storage.sites import add_site
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.clickhouse import Endpoint
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

SITE = "goals.whatif.example.com"
DAY = datetime(2026, 11, 10, tzinfo=UTC)
RANGE = (DAY, DAY + timedelta(days=2))
PATHS = ["/", "/pricing", "/pricing/team", "/pricing/a/b", "/old/x", "/docs"]


def traffic(rng: random.Random) -> list[PageViewEvent]:
    """Page views and custom events of 60 visitor ids over two days (an id on both days is two
    visitors), some purchases with revenue in EUR or USD, some engagement events."""
    events = []
    for number in range(300):
        visitor, day = f"w{number % 60}", rng.randrange(2)
        moment = DAY + timedelta(days=day, hours=8, minutes=rng.randrange(600), seconds=rng.randrange(60))
        events.append(page_view(SITE, visitor, moment, rng.choice(PATHS)))
        roll = rng.random()
        if roll < 0.15:
            events.append(page_view(SITE, visitor, moment, name="Signup"))
        elif roll < 0.3:
            currency = rng.choice(["EUR", "USD", ""])
            amount = f"{rng.randrange(100, 10000) / 100}" if currency else ""
            events.append(
                page_view(
                    SITE, visitor, moment, name="Purchase", revenue_amount=amount, revenue_currency=currency
                )
            )
        elif roll < 0.35:
            events.append(page_view(SITE, visitor, moment, name="engagement", props={"sd": "40"}))
    return events


EVENTS = traffic(random.Random(21))


def expected(goal: Goal) -> GoalRow:
    """The goal's numbers counted in Python from EVENTS (a visitor is a (UTC day, id))."""

    def matches(event: PageViewEvent) -> bool:
        if goal.kind == "page":
            return event.name == "pageview" and fnmatchcase(event.path, goal.page_pattern)
        return event.name == goal.event_name

    site_visitors = {(e.ts.date(), e.visitor_id) for e in EVENTS if e.name == "pageview"}
    converted = [e for e in EVENTS if matches(e)]
    visitors = {(e.ts.date(), e.visitor_id) for e in converted}
    paid = [e for e in converted if goal.currency and e.revenue_currency == goal.currency]
    return GoalRow(
        goal.name,
        goal.kind,
        len(visitors),
        len(converted),
        round(len(visitors) / len(site_visitors), 4),
        goal.currency,
        sum((Decimal(e.revenue_amount) for e in paid), Decimal(0)),
        len(paid),
    )


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint) -> Settings:
    settings = Settings(
        home=tmp_path_factory.mktemp("whatif-goals-home"),
        clickhouse_url=clickhouse_endpoint.url,
        clickhouse_password=clickhouse_endpoint.password,
        clickhouse_database=f"tally_whatif_goals_{uuid4().hex[:8]}",
    )
    apply_migrations(settings)
    client = connect(settings)
    add_site(client, SITE)
    for goal in (goal_store.make_goal(SITE, "Signup"), goal_store.make_goal(SITE, page_pattern="/old/*")):
        goal_store.add_goal(client, goal)
    rows, columns = archive_rows(EVENTS)
    client.insert("events", rows, column_names=columns)
    return settings


PROPOSED = [
    goal_store.make_goal(SITE, "Purchase", currency="EUR"),
    goal_store.make_goal(SITE, page_pattern="/pricing/*"),
]


def test_proposed_goals_agg_equals_raw_equals_a_count_of_the_events(settings: Settings) -> None:
    client = connect(settings)
    q = StatsQuery(SITE, *RANGE)
    comparison = compare_goals(client, q, PROPOSED, ["Signup"], source="agg")
    proposed = sorted([*PROPOSED, goal_store.find_goal(client, SITE, "Visit /old/*")], key=lambda g: g.name)
    assert comparison.proposed == [expected(goal) for goal in proposed]
    assert comparison.proposed == queries.goals_of(client, q, proposed, "raw")
    assert comparison.current == [expected(goal) for goal in goal_store.list_goals(client, SITE)]
    assert comparison.names() == ["Purchase", "Signup", "Visit /old/*", "Visit /pricing/*"]
    assert all(row.events for row in comparison.proposed)  # the traffic reaches every goal
    assert [goal.name for goal in goal_store.list_goals(client, SITE)] == ["Signup", "Visit /old/*"]


def test_a_proposal_that_cannot_be_made_says_why(settings: Settings) -> None:
    client = connect(settings)
    with pytest.raises(goal_store.InvalidGoal, match="has no goal 'Nope'"):
        compare_goals(client, StatsQuery(SITE, *RANGE), [], ["Nope"])
    with pytest.raises(goal_store.InvalidGoal, match="already has a goal 'Signup'"):
        compare_goals(client, StatsQuery(SITE, *RANGE), [goal_store.make_goal(SITE, "Signup")], [])


def test_the_cli_prints_both_sides_and_apply_records_one_version(settings: Settings) -> None:
    env = os.environ | settings.environment()
    client = connect(settings)
    first = definitions.current(client, settings).number
    args = ["whatif", "goals", SITE, "--add", "Purchase", "--currency", "eur", "--add-page", "/pricing/*"]
    args += ["--remove", "Signup", "--from", "2026-11-10", "--to", "2026-11-11"]
    answer = run_tally(env, *args, timeout=120)
    assert answer.returncode == 0, answer.stderr
    lines = {line.split("\t")[0]: line.split("\t")[1:] for line in answer.stdout.splitlines() if "\t" in line}
    signup, purchase = expected(goal_store.make_goal(SITE, "Signup")), expected(PROPOSED[0])
    assert (
        lines["Signup"]
        == [f"{signup.visitors}", f"{signup.events}", f"{signup.conversion_rate * 100:.1f}%", "—"] + ["—"] * 4
    )
    assert lines["Purchase"][:4] == ["—"] * 4
    assert lines["Purchase"][4:] == [
        f"{purchase.visitors}",
        f"{purchase.events}",
        f"{purchase.conversion_rate * 100:.1f}%",
        f"{purchase.revenue_total:.2f} EUR",
    ]
    assert lines["Visit /old/*"][:4] == lines["Visit /old/*"][4:]
    assert definitions.current(client, settings).number == first  # nothing applied yet

    applied = run_tally(env, *args, "--apply", timeout=120)
    assert applied.returncode == 0, applied.stderr
    assert f"definitions version {first + 1}" in applied.stdout
    assert [goal.name for goal in goal_store.list_goals(client, SITE)] == [
        "Purchase",
        "Visit /old/*",
        "Visit /pricing/*",
    ]
    version = definitions.current(client, settings)
    assert version.number == first + 1
    assert version.note == f"goals on {SITE}: +Purchase +Visit /pricing/* -Signup"
    listed = run_tally(env, "definitions", timeout=120)
    assert listed.returncode == 0, listed.stderr
    line = listed.stdout.splitlines()[version.number - 1].split("\t")
    assert line[:2] == [str(version.number), "current"]
    assert line[-1] == f"goals on {SITE}: +Purchase +Visit /pricing/* -Signup"


@pytest.mark.parametrize(
    ("args", "expected_error"),
    [
        (["--period", "30x", "--add", "A"], "--period: '30x' is not a number of days like 30d"),
        ([], "--add, --add-page or --remove: name the goals proposed"),
        (["--remove", "Nope"], "has no goal 'Nope'"),
        (["--add-page", "no-slash"], "page pattern 'no-slash'"),
    ],
)
def test_mistakes_answer_in_one_line(settings: Settings, args: list[str], expected_error: str) -> None:
    answer = run_tally(os.environ | settings.environment(), "whatif", "goals", SITE, *args, timeout=120)
    assert answer.returncode != 0
    assert expected_error in answer.stderr
    assert len(answer.stderr.strip().splitlines()) == 1, answer.stderr
