"""Page patterns (storage/page_patterns.py): `*` is any run of characters, the rest literal."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from storage.page_patterns import BadPattern, matches, pattern_regex


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("/checkout/*", "/checkout/", True),
        ("/checkout/*", "/checkout/pay/card", True),
        ("/checkout/*", "/checkout", False),
        ("/checkout", "/checkout/", False),
        ("/blog/*/comments", "/blog/a/b/comments", True),
        ("/a.b", "/axb", False),  # regex syntax in a pattern is literal
        ("/(x|y)+", "/(x|y)+", True),
        ("/(x|y)+", "/xx", False),
        ("/*", "/any\nthing", True),
    ],
)
def test_pattern_names_pages(pattern: str, path: str, expected: bool) -> None:
    assert matches(pattern, path) is expected


@pytest.mark.parametrize("pattern", ["", "checkout", "/" + "a" * 600, "/a\x00", "/" + "*/" * 11])
def test_unusable_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(BadPattern):
        pattern_regex(pattern)


@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs")), max_size=40))
def test_a_pattern_without_wildcards_matches_only_itself(tail: str) -> None:
    literal = ("/" + tail.replace("*", "")).rstrip()  # a pattern is taken stripped
    assume(literal.isprintable())
    assert matches(literal, literal)
    assert not matches(literal, literal + "x")
