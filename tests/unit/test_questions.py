"""The one question builder (storage/queries/questions.py): every door's StatsQuery is built there,
with the definitions and zone given, and a saved segment reads as Plausible's parser reads it when
the segment is saved (dashboard/segments.py checks it with that parser)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dashboard.segments import checked
from storage.queries import Condition, Logic, UnsupportedQuery, questions
from tally.settings import PROJECT_ROOT

START, END = datetime(2026, 11, 2, 23, tzinfo=UTC), datetime(2026, 11, 9, 23, tzinfo=UTC)
DOORS = ("dashboard", "ops", "alerts")


@dataclass(frozen=True)
class Read:
    session_gap_s: int = 600
    engaged_bounce_ms: int = 5_000


def test_no_door_builds_a_stats_query_of_its_own() -> None:
    """`StatsQuery(...)` is called in storage/queries/questions.py, never in a door's package."""
    built = []
    for package in DOORS:
        for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Call) and name_of(node.func) == "StatsQuery":
                    built.append(f"{Path(path).relative_to(PROJECT_ROOT)}:{node.lineno}")
    assert built == []


def name_of(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def test_a_question_carries_the_definitions_and_zone_and_its_comparison_only_moves_the_range() -> None:
    q = questions.question(
        "a.example.com", START, END, Read(), timezone="Europe/Berlin", filters={"path": "/"}
    )
    assert (q.session_gap_s, q.engaged_bounce_ms, q.timezone, q.filters) == (
        600,
        5_000,
        "Europe/Berlin",
        {"path": "/"},
    )
    before = questions.over(q, (START - (END - START), START))
    assert before == q.__class__(**{**q.__dict__, "start": START - (END - START), "end": START})
    built_in = questions.question("a.example.com", START, END)
    assert (built_in.session_gap_s, built_in.engaged_bounce_ms) == (1800, 10_000)


SEGMENTS: list[list[Any]] = [
    [["is", "event:page", ["/pricing"]]],
    [["is", "visit:country", ["DE", "CH"]], ["contains", "event:page", ["/blog"]]],
    [["is", "visit:source", ["twitter.com"]], ["is_not", "visit:device", ["Mobile"]]],
    [["or", [["is", "event:page", ["/a"]], ["matches", "event:page", ["^/b/[0-9]+$"]]]]],
    [["not", ["is", "visit:browser", ["Firefox"]]], ["is", "event:props:plan", ["pro"]]],
    [["is", "event:goal", ["Signup"]], ["is", "visit:channel", ["Organic Search"]]],
    [["is", "event:goal", ["Visit /pricing"]]],
    [
        ["is", "visit:utm_campaign", ["launch"]],
        ["is", "visit:entry_page", ["/"]],
        ["is", "visit:os", ["Linux"]],
    ],
]


@pytest.mark.parametrize("items", SEGMENTS, ids=lambda items: str(items)[:60])
def test_a_segment_reads_as_plausibles_parser_reads_it_when_saved(items: list[Any]) -> None:
    saved = checked(items)  # Plausible's parser: the events' conditions, then the visits'
    applied = questions.segment_filters(items)
    assert applied.goal == saved.goal
    assert conditions(applied.where) == conditions(saved.where)


def conditions(expression: Condition | Logic | None) -> set[Condition | Logic]:
    """The top-level conditions joined by and (their order is not the meaning)."""
    if expression is None:
        return set()
    if isinstance(expression, Logic) and expression.operator == "and":
        return {item for operand in expression.operands for item in conditions(operand)}
    return {expression}


@pytest.mark.parametrize(
    ("items", "named"),
    [
        (
            [["is", "visit:city", ["Berlin"]]],
            'segment filter ["is", "visit:city", ["Berlin"]]: visit:city is not',
        ),
        ([["is", "event:goal", ["A"]], ["is", "event:goal", ["B"]]], "one goal per segment"),
        ([["or", [["is", "event:goal", ["A"]]]]], "event:goal is not a filter Tally applies"),
        ([["matches", "event:page", ["("]]], "not an RE2 regular expression: '('"),
        ([["is", "event:page", "/pricing"]], 'segment filter ["is", "event:page", "/pricing"]: not a filter'),
    ],
)
def test_a_segment_tally_cannot_apply_is_refused_naming_the_filter(items: list[Any], named: str) -> None:
    with pytest.raises(UnsupportedQuery) as refused:
        questions.segment_filters(items)
    assert named in str(refused.value)


def test_a_segment_joins_the_filters_already_in_force() -> None:
    q = questions.question("a.example.com", START, END, filters={"segment": "Launch", "country": "DE"})
    page = Condition("is", "path", ("/pricing",))
    joined = questions.with_segment(q, questions.SegmentFilters(page, "Signup"))
    assert (joined.filters, joined.where) == ({"country": "DE", "goal": "Signup"}, page)
    source = Condition("is", "referrer_domain", ("twitter.com",))
    twice = questions.with_segment(joined, questions.SegmentFilters(source, None))
    assert twice.where == Logic("and", (page, source))
