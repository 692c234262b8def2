"""Versioned definitions without a store: durations as typed on the command line, a version's
JSON, the environment told apart from the stored version, side-table suffixes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from storage.definitions import (
    Definitions,
    applied,
    changes,
    duration_ms,
    environment_differences,
    side_suffix,
)
from storage.queries.agg import side_tables
from tally.settings import Settings


@pytest.mark.parametrize(
    ("text", "ms"), [("20m", 1_200_000), ("90s", 90_000), ("1h", 3_600_000), ("500ms", 500), ("45", 45_000)]
)
def test_durations_read_as_typed(text: str, ms: int) -> None:
    assert duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "twenty", "20 minutes", "-5s", "1.5h"])
def test_anything_else_is_no_duration(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        duration_ms(text)


GOALS = {
    "a.example.com": [
        {"name": "Signup", "kind": "event", "event_name": "Signup", "page_pattern": "", "currency": ""}
    ]
}


def test_a_version_round_trips_through_json() -> None:
    rules = {"goals": GOALS, "exclusions": {"a.example.com": []}, "channel_rules": {"a.example.com": []}}
    version = Definitions(1200, 5000, 120, rules, {"channels": "abc"})
    assert Definitions.from_json(version.to_json()) == version
    assert version.unrecorded() == []


def test_a_version_made_before_contents_were_kept_reads_as_fingerprints_only() -> None:
    text = '{"session_gap_s": 1800, "engaged_bounce_ms": 0, "watermark_s": 120, "rules": {"goals": "ab12"}}'
    version = Definitions.from_json(text)
    assert version.rules == {} and version.rule_fingerprints() == {"goals": "ab12"}
    assert version.unrecorded() == ["goals", "exclusions", "channel_rules"]


def test_changes_between_versions_name_each_rule_and_definition() -> None:
    pricing = {"name": "Visit /pricing/*", "kind": "page", "event_name": "", "page_pattern": "/pricing/*"}
    older = Definitions(1800, 10_000, 120, {"goals": GOALS, "exclusions": {"a.example.com": []}})
    newer_goals = {"a.example.com": [{**pricing, "currency": ""}], "b.example.com": []}
    newer_exclusions = {"a.example.com": [{"kind": "ip", "value": "10.0.0.0/8"}]}
    newer = Definitions(1200, 5000, 120, {"goals": newer_goals, "exclusions": newer_exclusions})
    assert changes(older, newer) == [
        "session gap 30m -> 20m",
        "engaged bounce 10s -> 5s",
        "exclusions on a.example.com: +ip 10.0.0.0/8",
        "goals on a.example.com: +Visit /pricing/* -Signup",
    ]
    euro = {"a.example.com": [{**GOALS["a.example.com"][0], "currency": "EUR"}]}
    assert changes(older, Definitions(1800, 10_000, 120, {**older.rules, "goals": euro})) == [
        "goals on a.example.com: ~Signup"
    ]
    legacy = Definitions(1800, 10_000, 120, {}, {"goals": "ab12", "exclusions": "cd34"})
    assert changes(legacy, older) == [
        "exclusions: recorded from here on (before: a fingerprint only)",
        "goals: recorded from here on (before: a fingerprint only)",
    ]
    assert changes(legacy, replace(legacy, fingerprints={"goals": "ef56", "exclusions": "cd34"})) == [
        "goals changed (not recorded)"
    ]
    bots = replace(older, fingerprints={"bot_rules": "crawler-user-agents 1.67.0"})
    assert changes(bots, replace(bots, fingerprints={"bot_rules": "crawler-user-agents 1.68.0"})) == [
        "bot rules crawler-user-agents 1.67.0 -> crawler-user-agents 1.68.0"
    ]
    assert changes(older, bots) == []  # a version made before bot rules were recorded: no change said


def test_the_environment_that_differs_is_named_and_the_stored_version_applies() -> None:
    stored = Definitions(1200, 10_000, 120)
    settings = Settings(session_gap_s=600)
    assert environment_differences(settings, stored) == ["TALLY_SESSION_GAP_S=600 (current: 1200)"]
    assert applied(settings, stored).session_gap_s == 1200
    assert environment_differences(applied(settings, stored), stored) == []


def test_side_tables_are_named_by_their_version_and_nothing_else_passes() -> None:
    assert side_suffix(3) == "_v3"
    assert side_tables("_v3") == "_v3" and side_tables("") == ""
    for bad in ("_replay", "_v3; DROP TABLE events", "_v"):
        with pytest.raises(ValueError, match="side-table suffix"):
            side_tables(bad)
