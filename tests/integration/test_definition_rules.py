"""What a definitions version holds (issue 21): the contents of the sites' goals, exclusions and
channel rules,
every rule change recorded as a new current version, and a rollback that restores them (and
exchanges no table when only rules differ). Real ClickHouse engine, a database of its own (the
versions are global to a database); events inserted into `events`, whose views feed the goal
tables the agg source reads."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from importlib import metadata
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client

from dashboard.app import build_app
from ops.local import whatif
from storage import channel_rules, definitions
from storage import exclusions as exclusion_store
from storage import goals as goal_store
from storage.client import connect
from storage.queries.whatif import side_tables_exist
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.clickhouse import Endpoint, own_database_settings
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

SITE = "rules.example.com"
LATER_SITE = "later.rules.example.com"
DAY = datetime(2026, 11, 10, tzinfo=UTC)
RANGE = {"site": SITE, "from": "2026-11-10", "to": "2026-11-11"}


def at(minutes: int) -> datetime:
    return DAY + timedelta(hours=9, minutes=minutes)


EVENTS = [
    *(page_view(SITE, visitor, at(n), "/") for n, visitor in enumerate("abcdef")),
    page_view(SITE, "a", at(10), "/", name="Signup"),
    page_view(SITE, "b", at(11), "/", name="Signup"),
    page_view(SITE, "c", at(12), "/old/page"),
    page_view(SITE, "d", at(13), "/", name="Download"),
]


@pytest.fixture
def settings(tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint) -> Settings:
    """A database of its own per test: versions are global to one."""
    settings = own_database_settings(tmp_path_factory.mktemp("rules-home"), clickhouse_endpoint, "rules")
    client = connect(settings)
    add_site(client, SITE)
    rows, columns = archive_rows(EVENTS)
    client.insert("events", rows, column_names=columns)
    return settings


def goal_names(client: Client, site: str = SITE) -> list[str]:
    return [goal.name for goal in goal_store.list_goals(client, site)]


def api_goals(settings: Settings) -> list[dict[str, Any]]:
    api = build_app(settings, clock=lambda: DAY + timedelta(days=1)).server.test_client()
    headers = {"Authorization": f"Bearer {settings.resolved_api_key()}"}
    response = api.get("/api/v1/stats/goals", query_string={**RANGE, "source": "agg"}, headers=headers)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def test_nothing_is_recorded_before_version_one_and_version_one_holds_the_contents(
    settings: Settings,
) -> None:
    client = connect(settings)
    goal_store.add_goal(client, goal_store.make_goal(SITE, "Signup", currency="eur"))
    assert definitions.list_versions(client) == []
    first = definitions.current(client, settings)
    assert first.number == 1
    assert first.definitions.rules["goals"] == {
        SITE: [
            {"name": "Signup", "kind": "event", "event_name": "Signup", "page_pattern": "", "currency": "EUR"}
        ]
    }
    assert first.definitions.rules["exclusions"] == {SITE: []}
    assert first.definitions.rules["channel_rules"] == {SITE: []}
    assert first.definitions.unrecorded() == []
    assert set(first.definitions.rule_fingerprints()) == {
        "channels", "bot_rules", "goals", "exclusions", "channel_rules"
    }  # fmt: skip
    pinned = metadata.version("crawler-user-agents")
    assert first.definitions.fingerprints["bot_rules"] == f"crawler-user-agents {pinned}"


def test_every_goal_and_exclusion_change_is_a_current_version_naming_it(settings: Settings) -> None:
    client = connect(settings)
    definitions.current(client, settings)
    goal_store.add_goal(client, goal_store.make_goal(SITE, "Signup"))
    goal_store.add_goal(client, goal_store.make_goal(SITE, page_pattern="/old/*"))
    goal_store.remove_goal(client, SITE, "Visit /old/*")
    exclusion_store.add_exclusions(client, exclusion_store.make_exclusions(SITE, ["10.1.2.3/8"], [], ["de"]))
    exclusion_store.remove_exclusions(client, exclusion_store.make_exclusions(SITE, [], [], ["DE"]))
    versions = definitions.list_versions(client)
    assert [v.note for v in versions[1:]] == [
        f"goal added on {SITE}: Signup",
        f"goal added on {SITE}: Visit /old/*",
        f"goal removed on {SITE}: Visit /old/*",
        f"exclusion added on {SITE}: country DE, ip 10.0.0.0/8",
        f"exclusion removed on {SITE}: country DE",
    ]
    assert definitions.current(client, settings).number == versions[-1].number == 6
    assert versions[-1].definitions.rules["exclusions"] == {SITE: [{"kind": "ip", "value": "10.0.0.0/8"}]}
    assert [g["name"] for g in versions[-1].definitions.rules["goals"][SITE]] == ["Signup"]
    # a rule change keeps the replayed definitions
    assert {v.definitions.replayed()["session_gap_s"] for v in versions} == {settings.session_gap_s}


def test_rollback_restores_the_goals_and_their_numbers_without_exchanging_tables(settings: Settings) -> None:
    client = connect(settings)
    for goal in (goal_store.make_goal(SITE, "Download"), goal_store.make_goal(SITE, page_pattern="/old/*")):
        goal_store.add_goal(client, goal)
    definitions.current(client, settings)  # version 1: Download, Visit /old/*
    goal_store.add_goal(client, goal_store.make_goal(SITE, "Signup"))  # version 2 (N)
    at_n = api_goals(settings)
    assert [(row["goal"], row["visitors"], row["events"]) for row in at_n] == [
        ("Download", 1, 1),
        ("Signup", 2, 2),
        ("Visit /old/*", 1, 1),
    ]
    goal_store.remove_goal(client, SITE, "Visit /old/*")  # version 3 (N + 1)
    assert [row["goal"] for row in api_goals(settings)] == ["Download", "Signup"]
    sessions = client.query("SELECT count() FROM sessions").result_rows[0][0]
    lines: list[str] = []

    assert whatif.rollback(settings, lines.append) == 2
    assert goal_names(client) == ["Download", "Signup", "Visit /old/*"]
    assert api_goals(settings) == at_n
    assert definitions.current(client, settings).number == 2
    # rules only: no table exchanged, no side tables made, the derived tables untouched
    assert lines == ["whatif: version 2 has the same replayed definitions: no table exchanged"]
    assert not side_tables_exist(client, 2) and not side_tables_exist(client, 3)
    assert client.query("SELECT count() FROM sessions").result_rows[0][0] == sessions


def test_channel_rule_changes_are_versions_and_a_rollback_restores_the_rules_and_the_breakdown(
    settings: Settings,
) -> None:
    client = connect(settings)
    definitions.current(client, settings)  # version 1: no rules
    partner = page_view(SITE, "p", at(30), "/", referrer_domain="news.partner.io")
    rows, columns = archive_rows([partner])
    client.insert("events", rows, column_names=columns)
    channel_rules.add_rule(client, SITE, channel_rules.make_rule("partner.io", "Partners"))  # version 2
    channel_rules.add_rule(client, SITE, channel_rules.make_rule("newsletter", "Email"))  # version 3
    at_three = channels_of(settings)
    assert at_three["Partners"] == 1
    channel_rules.remove_rule(client, SITE, "partner.io")  # version 4
    assert "Partners" not in channels_of(settings) and channels_of(settings)["Referral"] == 1
    versions = definitions.list_versions(client)
    assert [v.note for v in versions[1:]] == [
        f"channel rule added on {SITE}: source 'partner.io' -> Partners",
        f"channel rule added on {SITE}: source 'newsletter' -> Email",
        f"channel rule removed on {SITE}: source 'partner.io'",
    ]
    assert definitions.changes(versions[2].definitions, versions[3].definitions) == [
        f"channel_rules on {SITE}: -partner.io=Partners"
    ]
    assert versions[2].definitions.rules["channel_rules"] == {
        SITE: [["partner.io", "", "Partners"], ["newsletter", "", "Email"]]
    }

    assert whatif.rollback(settings, lambda line: None) == 3
    assert channel_rules.list_rules(client, SITE) == [
        channel_rules.make_rule("partner.io", "Partners"),
        channel_rules.make_rule("newsletter", "Email"),
    ]
    assert channels_of(settings) == at_three


def channels_of(settings: Settings) -> dict[str, int]:
    """The stats API's channel breakdown for the day: visitors by channel."""
    api = build_app(settings, clock=lambda: DAY + timedelta(days=1)).server.test_client()
    headers = {"Authorization": f"Bearer {settings.resolved_api_key()}"}
    asked = {**RANGE, "by": "channel", "source": "agg"}
    response = api.get("/api/v1/stats/breakdown", query_string=asked, headers=headers)
    assert response.status_code == 200, response.get_json()
    return {row["value"]: row["visitors"] for row in response.get_json()}


def test_a_site_registered_after_the_version_keeps_its_goals_on_rollback(settings: Settings) -> None:
    client = connect(settings)
    definitions.current(client, settings)  # version 1: no goals, SITE only
    add_site(client, LATER_SITE)
    goal_store.add_goal(client, goal_store.make_goal(SITE, "Signup"))  # version 2
    goal_store.add_goal(client, goal_store.make_goal(LATER_SITE, "Signup"))  # version 3
    exclusion_store.add_exclusions(client, exclusion_store.make_exclusions(SITE, [], ["/admin/*"], []))  # 4
    whatif.rollback(settings, lambda line: None)  # to 3: the exclusion goes
    assert exclusion_store.list_exclusions(client, SITE) == []
    definitions.switch_to(client, 1, "test: straight back to version 1")
    definitions.restore_rules(client, definitions.get(client, 1).definitions)
    assert goal_names(client) == []
    assert goal_names(client, LATER_SITE) == ["Signup"]  # version 1 does not name it


def test_a_version_made_before_contents_were_kept_reads_and_rolls_back_its_replayed_definitions(
    settings: Settings,
) -> None:
    client = connect(settings)
    old = {"session_gap_s": settings.session_gap_s, "engaged_bounce_ms": settings.engaged_bounce_ms}
    old |= {
        "watermark_s": settings.watermark_s,
        "rules": {"channels": "abc", "goals": "def", "exclusions": "0"},
    }
    client.insert(
        definitions.VERSIONS,
        [[1, json.dumps(old), "before contents"]],
        column_names=["version", "definitions", "note"],
    )
    first = definitions.current(client, settings)
    assert first.definitions.rules == {}
    assert first.definitions.unrecorded() == ["goals", "exclusions", "channel_rules"]
    assert first.definitions.rule_fingerprints() == {"channels": "abc", "goals": "def", "exclusions": "0"}
    goal_store.add_goal(client, goal_store.make_goal(SITE, "Signup"))  # version 2
    lines: list[str] = []
    assert whatif.rollback(settings, lines.append) == 1
    unrecorded = "goals, exclusions, channel_rules"
    assert lines[-1] == f"whatif: version 1's rules were not recorded ({unrecorded}): they stay as they are"
    assert goal_names(client) == ["Signup"]


def test_a_goal_redefined_under_its_name_and_an_exclusion_added_over_the_api_are_versions(
    settings: Settings,
) -> None:
    client = connect(settings)
    goal_store.add_goal(client, goal_store.make_goal(SITE, "Signup"))
    definitions.current(client, settings)
    goal_store.apply_goals(client, SITE, [goal_store.make_goal(SITE, "Signup", currency="EUR")], ["Signup"])
    assert [goal.currency for goal in goal_store.list_goals(client, SITE)] == ["EUR"]
    redefined = definitions.current(client, settings)
    assert redefined.note == f"goals on {SITE}: +Signup -Signup"
    assert definitions.changes(definitions.get(client, 1).definitions, redefined.definitions) == [
        f"goals on {SITE}: ~Signup"
    ]
    api = build_app(settings).server.test_client()
    headers = {"Authorization": f"Bearer {settings.resolved_api_key()}"}
    answer = api.post(
        "/api/v1/exclusions",
        query_string={"site": SITE},
        json={"kind": "path", "value": "/admin/*"},
        headers=headers,
    )
    assert answer.status_code == 201, answer.get_json()
    version = definitions.current(client, settings)
    assert (version.number, version.note) == (3, f"exclusion added on {SITE}: path /admin/*")
    assert version.definitions.rules["exclusions"][SITE] == [{"kind": "path", "value": "/admin/*"}]
