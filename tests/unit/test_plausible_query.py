"""Plausible's queries read into Tally's terms, without ClickHouse: date ranges, filters as
Tally's expressions (and their SQL: user text only in parameters), v1 filters and wildcards.

tests/integration/test_plausible_api.py checks the answers against the engine.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from dashboard.http_api.plausible import v1 as plausible_v1
from dashboard.http_api.plausible.query import QueryError, filters, time_range
from storage.queries import Condition, Logic, StatsQuery
from storage.queries.contract import expression_sql

NOW = datetime(2026, 11, 11, 12, tzinfo=UTC)  # a Wednesday


def day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("date_range", "start", "end"),
    [
        ("day", "2026-11-11", "2026-11-12"),
        ("7d", "2026-11-04", "2026-11-11"),  # the 7 days before today, today left out
        ("30d", "2026-10-12", "2026-11-11"),
        ("1d", "2026-11-10", "2026-11-11"),
        ("45d", "2026-09-27", "2026-11-11"),
        ("month", "2026-11-01", "2026-12-01"),
        ("6mo", "2026-05-01", "2026-11-01"),  # the 6 whole months before this one
        ("12mo", "2025-11-01", "2026-11-01"),
        ("3mo", "2026-08-01", "2026-11-01"),
        ("year", "2026-01-01", "2027-01-01"),
        ("all", "2026-03-02", "2026-11-12"),
        (["2026-11-01", "2026-11-03"], "2026-11-01", "2026-11-04"),
        (
            ["2026-11-01T10:00:00+01:00", "2026-11-01T10:59:59+01:00"],
            "2026-11-01T09:00:00",
            "2026-11-01T10:00:00",
        ),
    ],
)
def test_date_ranges_in_utc(date_range: str | list[str], start: str, end: str) -> None:
    assert time_range(date_range, None, NOW, date(2026, 3, 2)) == (day(start), day(end))


def test_date_moves_relative_ranges() -> None:
    assert time_range("month", "2026-02-10", NOW, None) == (day("2026-02-01"), day("2026-03-01"))


@pytest.mark.parametrize(
    "date_range",
    ["24h", "realtime", "0d", "5001d", "101mo", "7D", "7d\n", "-7d", ["2026-11-02", "2026-11-01"], ["x", "y"],
     ["2026-11-01"]],
)  # fmt: skip
def test_unsupported_ranges_are_refused(date_range: str | list[str]) -> None:
    with pytest.raises(QueryError, match="Invalid date_range"):
        time_range(date_range, None, NOW, None)


def test_filters_become_one_expression_and_a_goal() -> None:
    chosen = filters(
        [
            ["is", "event:goal", ["Signup"]],
            ["is_not", "visit:source", ["google.com"]],
            ["or", [["contains", "event:page", ["/blog"]], ["not", ["is", "visit:device", ["Mobile"]]]]],
            ["matches", "event:props:plan", ["^pro"]],
        ]
    )
    assert chosen.goal == "Signup"
    assert chosen.visits == Condition("is_not", "referrer_domain", ("google.com",))
    assert chosen.where == Logic(
        "and",
        (
            Logic(
                "or",
                (
                    Condition("contains", "path", ("/blog",)),
                    Logic("not", (Condition("is", "screen_size", ("Mobile",)),)),
                ),
            ),
            Condition("matches", "props.plan", ("^pro",)),
        ),
    )


def test_user_text_reaches_sql_only_as_parameters() -> None:
    evil = "x') OR 1=1 --"
    where = Logic(
        "or", (Condition("is", "path", (evil,)), Condition("matches_not", f"props.{evil}", (evil,)))
    )
    sql, parameters = expression_sql(where)
    assert evil not in sql
    assert sql == (
        "(has({where_0:Array(String)}, path) OR NOT (mapContains(props, {where_2:String}) AND "
        "arrayExists(pattern -> match(props[{where_2:String}], pattern), {where_1:Array(String)})))"
    )
    assert parameters == {"where_0": [evil], "where_1": [evil], "where_2": evil}
    q = StatsQuery("s", NOW, NOW.replace(hour=13), where=where)
    assert " AND (has(" in q.filter_sql() and q.parameters()["where_2"] == evil and q.filtered


@pytest.mark.parametrize(
    ("pattern", "regex"),
    [("/blog/**", "^/blog/.*$"), ("/blog/*/comments", "^/blog/[^/]*/comments$"), ("/a.b", "^/a\\.b$")],
)
def test_v1_wildcards(pattern: str, regex: str) -> None:
    assert plausible_v1.wildcard_regex(pattern) == regex


def test_v1_filters_as_v2() -> None:
    assert plausible_v1.v1_filters("event:page==/blog/**|/;visit:country!=DE;event:page~doc") == [
        ["matches", "event:page", ["^/blog/.*$", "^/$"]],
        ["is_not", "visit:country", ["DE"]],
        ["contains", "event:page", ["doc"]],
    ]
