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
from typing import Any

import pytest

from dashboard.app import build_app
from dashboard.http_api.answers import goal_json
from storage import definitions, queries, users
from storage import goals as goal_store
from storage.client import connect
from storage.goals import Goal
from storage.queries import StatsQuery
from storage.queries.contract import GoalRow
from storage.queries.whatif import compare_goals
from storage.sites import add_site
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.clickhouse import Endpoint, own_database_settings
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

SITE = "goals.whatif.example.com"
API_SITE = "api.goals.whatif.example.com"  # the API's tests change nothing there
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
    settings = own_database_settings(
        tmp_path_factory.mktemp("whatif-goals-home"), clickhouse_endpoint, "whatif_goals"
    )
    client = connect(settings)
    add_site(client, SITE)
    for goal in (goal_store.make_goal(SITE, "Signup"), goal_store.make_goal(SITE, page_pattern="/old/*")):
        goal_store.add_goal(client, goal)
    add_site(client, API_SITE)
    goal_store.add_goal(client, goal_store.make_goal(API_SITE, "Signup"))
    rows, columns = archive_rows([*EVENTS, page_view(API_SITE, "x", DAY + timedelta(hours=1), "/pricing/a")])
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


def whatif_api(settings: Settings, token: str, **params: object) -> Any:
    api = build_app(settings, clock=lambda: DAY + timedelta(days=3)).server.test_client()
    return api.get("/api/v1/whatif/goals", query_string=params, headers={"Authorization": f"Bearer {token}"})


def test_the_api_answers_both_sides_for_the_operator_and_a_site_admin_only(settings: Settings) -> None:
    client = connect(settings)
    params = {"site": API_SITE, "from": "2026-11-10", "to": "2026-11-12", "add_page": "/pricing/*"}
    answer = whatif_api(settings, settings.resolved_api_key(), **params, remove="Signup")
    assert answer.status_code == 200, answer.get_json()
    q = StatsQuery(API_SITE, *RANGE)
    expected_sides = compare_goals(
        client, q, [goal_store.make_goal(API_SITE, page_pattern="/pricing/*")], ["Signup"]
    )
    assert answer.get_json()["current"] == [goal_json(row) for row in expected_sides.current]
    assert answer.get_json()["proposed"] == [goal_json(row) for row in expected_sides.proposed]
    assert answer.get_json()["proposed"][0] | {"revenue": None} == {
        "goal": "Visit /pricing/*",
        "kind": "page",
        "visitors": 1,
        "events": 1,
        "conversion_rate": 1.0,
        "revenue": None,
    }
    # several goals at once: repeated parameters
    both = whatif_api(settings, settings.resolved_api_key(), **params | {"add": ["Purchase", "Download"]})
    assert [row["goal"] for row in both.get_json()["proposed"]] == [
        "Download",
        "Purchase",
        "Signup",
        "Visit /pricing/*",
    ]

    for role, status in (("viewer", 403), ("admin", 200)):
        email = f"{role}-whatif@example.com"
        token = users.create_invite(client, email, API_SITE, role)
        invite = users.find_invite(client, token)
        assert invite is not None
        users.accept_invite(client, token, invite, "a long enough password 21")
        key = users.create_key(client, email, [API_SITE])[1]
        assert whatif_api(settings, key, **params).status_code == status


@pytest.mark.parametrize(
    ("params", "status", "field"),
    [
        ({"remove": "Nope"}, 400, "remove"),
        ({"add": "Signup"}, 400, "add"),
        ({"add_page": "/x", "add": "Y"}, 200, ""),
        ({"add_page": "no-slash"}, 400, "add_page"),
        ({"add": "X", "currency": "euro"}, 400, "currency"),
        ({}, 400, "add"),
        ({"add": "X", "limit": "3"}, 400, "limit"),
        ({"add": "X", "from": "2026-11-12", "to": "2026-11-10"}, 400, "to"),
        ({"add": "X", "site": "nowhere.example.com"}, 404, "site"),
    ],
)
def test_api_mistakes_answer_the_field(
    settings: Settings, params: dict[str, str], status: int, field: str
) -> None:
    answer = whatif_api(settings, settings.resolved_api_key(), **({"site": API_SITE} | params))
    assert answer.status_code == status
    if status != 200:
        assert answer.get_json()["error"].startswith(f"{field}: ")
