"""The stats engine's query model (stats/query.py): what it refuses, naming the field, and
Plausible's page globs."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from stats.query import Behaviour, Condition, InvalidQuery, Logic, Query, validate, wildcard_regex

START = datetime(2026, 11, 10, tzinfo=UTC)


def query(**changes: object) -> Query:
    fields = {
        "site": "example.com",
        "start": START,
        "end": START + timedelta(days=1),
        "metrics": ("visitors",),
    }
    return Query(**(fields | changes))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"metrics": ("visitors", "foo")}, "metrics[1]: unknown metric 'foo'"),
        (
            {"metrics": ("conversion_rate",)},
            "metrics[0]: 'conversion_rate' is not answered by the stats engine",
        ),
        ({"metrics": ("visits", "visits")}, "metrics[1]: 'visits' is asked twice"),
        ({"dimensions": ("event:page", "event:nope")}, "dimensions[1]: unknown dimension 'event:nope'"),
        ({"dimensions": ("time:day", "time:hour")}, "dimensions: at most one time dimension"),
        ({"dimensions": ("event:goal",)}, "dimensions[0]: 'event:goal' is answered by its own report, alone"),
        (
            {"metrics": ("exit_rate",)},
            "metrics[0]: exit_rate needs the one dimension event:page or visit:exit_page",
        ),
        ({"filters": Condition("is", "time:day", ("x",))}, "filters: cannot filter by 'time:day'"),
        (
            {"filters": Condition("contains", "event:goal", ("x",))},
            "filters: a goal is filtered by is or is_not",
        ),
        (
            {"filters": Behaviour("has_done", Behaviour("has_done", Condition("is", "event:page", ("/",))))},
            "filters: has_done cannot hold another has_done / has_not_done",
        ),
        ({"filters": Logic("not", ())}, "filters: `not` needs one filter"),
        ({"filters": Condition("matches", "event:page", ("(",))}, "filters: not an RE2 regular expression"),
        (
            {"order_by": (("pageviews", True),)},
            "order_by[0]: 'pageviews' is not a queried metric or dimension",
        ),
        ({"end": START}, "date_range: the end must be after the start"),
        ({"timezone": "Mars/Olympus"}, "timezone: "),
    ],
)
def test_a_refusal_names_the_field(changes: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidQuery) as refused:
        validate(query(**changes))
    assert str(refused.value).startswith(message)


def test_more_than_five_patterns_are_refused() -> None:
    globs = Condition("matches_wildcard", "event:page", tuple(f"/p{i}/*" for i in range(6)))
    with pytest.raises(InvalidQuery, match=r"^filters: at most 5 patterns"):
        validate(query(filters=globs))


@pytest.mark.parametrize(
    ("glob", "path", "matched"),
    [
        ("/blog/*", "/blog/a", True),
        ("/blog/*", "/blog/a/b", True),  # Plausible's `*` is any run of characters, as `**`
        ("/blog/**", "/blog/a/b", True),
        ("/blog", "/blog/a", False),  # anchored at both ends
        ("/a|/b", "/b", True),  # `|` separates alternatives
        ("/a.b", "/axb", False),  # everything else is itself
        ("/(x)", "/(x)", True),
    ],
)
def test_wildcards_are_plausibles_globs(glob: str, path: str, matched: bool) -> None:
    assert bool(re.search(wildcard_regex(glob), path)) is matched
