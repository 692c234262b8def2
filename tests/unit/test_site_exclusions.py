"""Exclusion rules as the collector applies them (collector/exclusions.py)."""

from __future__ import annotations

import random

import pytest

from collector.exclusions import compile_rules, glob_matches
from storage.exclusions import InvalidExclusion, make_exclusions
from storage.page_patterns import matches


def test_path_globs_match_exactly_what_goal_patterns_match() -> None:
    rng = random.Random(20)
    for _ in range(20_000):
        pattern = "/" + "".join(rng.choice("ab*/") for _ in range(rng.randint(0, 7)))
        path = "/" + "".join(rng.choice("ab/") for _ in range(rng.randint(0, 9)))
        assert glob_matches(tuple(pattern.split("*")), path) == matches(pattern, path), (pattern, path)


def test_each_kind_of_exclusion_names_its_rule() -> None:
    rules = compile_rules(
        make_exclusions("example.com", ["10.0.0.0/8", "2001:db8::/32"], ["/admin/*"], ["de"])
    )["example.com"]
    assert rules.rule_matching("10.1.2.3", "/", "") == "ip"
    assert rules.rule_matching("2001:db8::9", "/", "") == "ip"
    assert rules.rule_matching("11.0.0.1", "/admin/x", "") == "path"
    assert rules.rule_matching("11.0.0.1", "/", "DE") == "country"
    assert rules.rule_matching("11.0.0.1", "/administration", "FR") is None
    assert rules.rule_matching("::ffff:1.2.3.4", "/", "") is None


def test_values_are_stored_in_one_spelling() -> None:
    made = make_exclusions("www.Example.com", ["10.1.2.3/8", "2001:DB8::/32"], [" /a "], ["de", "DE"])
    assert [(e.site, e.kind, e.value) for e in made] == [
        ("example.com", "country", "DE"),
        ("example.com", "ip", "10.0.0.0/8"),
        ("example.com", "ip", "2001:db8::/32"),
        ("example.com", "path", "/a"),
    ]


@pytest.mark.parametrize(
    ("ips", "paths", "countries", "named"),
    [(["nope"], [], [], "--ip"), ([], ["x"], [], "--path"), ([], [], ["DEU"], "--country")],
)
def test_bad_values_name_their_option(
    ips: list[str], paths: list[str], countries: list[str], named: str
) -> None:
    with pytest.raises(InvalidExclusion, match=named):
        make_exclusions("example.com", ips, paths, countries)
