"""The bounds on regular expressions in filters (storage/queries/contract.py, check_patterns),
without a store: what every door refuses before a pattern reaches ClickHouse."""

from __future__ import annotations

import pytest

from storage.queries import Condition, Logic, UnsupportedQuery, check_patterns, validate_expression
from storage.queries.contract import MAX_PATTERN_LENGTH, MAX_PATTERNS


def matches(*patterns: str) -> Condition:
    return Condition("matches", "path", patterns)


@pytest.mark.parametrize(
    "pattern", ["^/blog/[a-z0-9-]+/?$", "(?i)^/(en|de|fr)/docs/.*", "/pricing", "[a-z]{1,50}[0-9]{1,50}"]
)
def test_patterns_people_write_pass(pattern: str) -> None:
    validate_expression(matches(pattern))


@pytest.mark.parametrize(
    ("pattern", "said"),
    [
        (".{1,1000}x", "too costly"),
        ("((a|b|c|d)?){200}x", "too costly"),
        ("/" + "a" * MAX_PATTERN_LENGTH, "characters"),
        ("(a{1,1000}){1,1000}", "not an RE2"),
        ("(?P<x>a)(?P=x)", "not an RE2"),  # a backreference: RE2 has none
    ],
)
def test_costly_or_invalid_patterns_are_refused(pattern: str, said: str) -> None:
    with pytest.raises(UnsupportedQuery, match=said):
        validate_expression(matches(pattern))


def test_patterns_are_counted_over_the_whole_query() -> None:
    check_patterns(matches(*[f"^/p{i}" for i in range(MAX_PATTERNS)]))
    nested = Logic("or", (matches("^/a", "^/b", "^/c"), Logic("not", (matches("^/d", "^/e", "^/f"),))))
    with pytest.raises(UnsupportedQuery, match=f"at most {MAX_PATTERNS} regular expressions"):
        validate_expression(nested)
    # event filters and visit filters of one request together (the Plausible parser's two trees)
    with pytest.raises(UnsupportedQuery, match="not 6"):
        check_patterns(matches("^/a", "^/b", "^/c"), Condition("matches_not", "utm_source", ("x", "y", "z")))
    check_patterns(None, Condition("contains", "path", tuple("abcdefgh")))  # contains runs no pattern
