"""The Funnel tab's steps as a site owner writes them: one a line, a page when it starts with /."""

from __future__ import annotations

import pytest

from dashboard.funnel import parse_steps
from storage.queries import FunnelStep, UnsupportedQuery


def test_lines_starting_with_a_slash_are_pages_the_others_events() -> None:
    assert parse_steps("  /product/*\n\nSignup \n/thanks\n") == [
        FunnelStep("page", "/product/*"),
        FunnelStep("event", "Signup"),
        FunnelStep("page", "/thanks"),
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("/only-one", "2 to 8 steps, not 1"),
        ("\n".join(f"/p{i}" for i in range(9)), "2 to 8 steps, not 9"),
        ("/x\nengagement", "step 2: 'engagement' is no custom event"),
        ("/x\n/" + "*" * 11, "step 2: a page pattern has at most 10 wildcards"),
    ],
)
def test_steps_tally_cannot_use_are_refused_naming_the_step(text: str, problem: str) -> None:
    with pytest.raises(UnsupportedQuery, match=problem):
        parse_steps(text)
