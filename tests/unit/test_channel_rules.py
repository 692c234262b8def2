"""Channel rules without a store: validation naming the field, and what a what-if proposes
(storage/channel_rules.py)."""

from __future__ import annotations

import re

import pytest

from storage.channel_rules import InvalidChannelRule, make_rule, propose
from storage.channels import ChannelRule, domain_pattern, rules_parameters

CURRENT = [
    ChannelRule("partner.io", "Affiliates"),
    ChannelRule("newsletter", "Newsletter", "email"),
    ChannelRule("newsletter", "News"),
]


def test_a_rule_replaces_its_source_and_medium_in_place_or_is_appended() -> None:
    proposed = propose(
        CURRENT, [make_rule("newsletter", "Email"), make_rule("blog.example.org", "Blogs")], []
    )
    assert proposed == (
        ChannelRule("partner.io", "Affiliates"),
        ChannelRule("newsletter", "Newsletter", "email"),
        ChannelRule("newsletter", "Email"),  # in place: still checked after the email one
        ChannelRule("blog.example.org", "Blogs"),
    )


def test_drop_removes_a_sources_rules_of_every_medium() -> None:
    assert propose(CURRENT, [], ["NEWSLETTER"]) == (ChannelRule("partner.io", "Affiliates"),)


def test_names_are_normalised() -> None:
    assert make_rule(" Partner.IO ", "paid search", " CPC ") == ChannelRule(
        "partner.io", "Paid Search", "cpc"
    )


@pytest.mark.parametrize(
    ("source", "channel", "medium", "field"),
    [
        ("", "X", "", "source:"),
        ("a b.io", "X", "", "source:"),
        (".io", "X", "", "source:"),
        ("a.io'--", "X", "", "source:"),
        ("a\\.io", "X", "", "source:"),
        ("a.io", " ", "", "channel:"),
        ("a.io", "x" * 41, "", "channel:"),
        ("a.io", "X", "\x00", "medium:"),
    ],
)
def test_bad_values_name_their_field(source: str, channel: str, medium: str, field: str) -> None:
    with pytest.raises(InvalidChannelRule, match=f"^{field}"):
        make_rule(source, channel, medium)


def test_a_rules_pattern_matches_as_the_built_in_lists_do() -> None:
    pattern = rules_parameters((make_rule("partner", "P"),))["channel_rules_patterns"][0]
    assert pattern == domain_pattern(("partner",))
    for source, holds in [
        ("partner", True), ("partner.io", True), ("www.partner.co.uk", True),
        ("notpartner.io", False), ("partner.example.org", False), ("partnerx", False),
    ]:  # fmt: skip
        assert bool(re.match(pattern, source)) is holds, source
