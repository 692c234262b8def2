"""Page path patterns, as goals and funnel steps name pages: `/checkout/*`, `/blog/*/comments`.

`*` stands for any run of characters (slashes included); every other character is itself.
A pattern becomes an anchored RE2 regular expression for ClickHouse's `match`, passed as a
query parameter: the user's text is escaped character by character, never spliced into SQL,
and RE2 runs in linear time whatever the pattern.
"""

from __future__ import annotations

import re

from tally.refusal import Refused

MAX_PATTERN_LENGTH = 500
MAX_WILDCARDS = 10


class BadPattern(Refused):
    """A page pattern Tally cannot use; the message says why."""


def validate_pattern(pattern: str) -> str:
    """The pattern, stripped, or BadPattern with the reason."""
    pattern = pattern.strip()
    if not pattern.startswith("/"):
        raise BadPattern("a page pattern starts with /, e.g. /checkout/*")
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise BadPattern(f"a page pattern has at most {MAX_PATTERN_LENGTH} characters")
    if not pattern.isprintable():
        raise BadPattern("a page pattern cannot hold control characters")
    if pattern.count("*") > MAX_WILDCARDS:
        raise BadPattern(f"a page pattern has at most {MAX_WILDCARDS} wildcards (*)")
    return pattern


def pattern_regex(pattern: str) -> str:
    """The anchored RE2 expression matching the paths `pattern` names."""
    pattern = validate_pattern(pattern)
    return "(?s)^" + ".*".join(re.escape(part) for part in pattern.split("*")) + "$"


def matches(pattern: str, path: str) -> bool:
    """Whether `path` is one of the pages `pattern` names (the same rule in Python)."""
    return (
        re.fullmatch(
            pattern_regex(pattern),
            path,
        )
        is not None
    )
