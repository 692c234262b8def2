"""Which filters of a report move onto the visits read through `sessions`
(storage/queries/visit_events.py split): visit conditions the table holds go to the visits,
event conditions stay on the events, and a mix it cannot separate leaves the query alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from storage.queries.contract import Condition, Logic, StatsQuery
from storage.queries.visit_events import split

HELD = {"referrer_domain", "utm_medium", "entry_path", "exit_path"}
DAY = datetime(2026, 11, 10, tzinfo=UTC)


def _query(filters: dict[str, str] | None = None, where: object = None) -> StatsQuery:
    return StatsQuery("split.example.com", DAY, DAY + timedelta(days=1), filters=filters or {}, where=where)  # type: ignore[arg-type]


def test_dict_filters_part_into_visit_and_event_ones() -> None:
    parts = split(_query({"referrer_domain": "google.com", "path": "/a", "goal": "Signup"}), HELD)
    assert parts is not None
    assert parts.visit_filters == {"referrer_domain": "google.com"}
    assert parts.event_filters == {"path": "/a", "goal": "Signup"}
    assert parts.visit_where is None and parts.event_where is None


def test_a_top_level_and_parts_by_operand() -> None:
    source = Condition("is", "referrer_domain", ("google.com",))
    country = Condition("is", "country", ("DE",))
    entry = Condition("contains", "entry_path", ("blog",))
    parts = split(_query(where=Logic("and", (source, country, entry))), HELD)
    assert parts is not None
    assert parts.visit_where == Logic("and", (source, entry))
    assert parts.event_where == country
    assert parts.visit_filters == {} and parts.event_filters == {}


def test_what_cannot_be_parted_is_left_to_the_archive() -> None:
    source = Condition("is", "referrer_domain", ("google.com",))
    country = Condition("is", "country", ("DE",))
    assert split(_query(where=Logic("or", (source, country))), HELD) is None  # a visit and an event
    assert split(_query({"channel": "Direct"}), HELD) is None  # not held: the site's rules
    assert split(_query({"utm_term": "x"}), HELD) is None  # a visit property not held
    assert split(_query({"country": "DE"}), HELD) is None  # nothing to move
    assert split(_query(where=Logic("not", (source,))), HELD) is not None  # a visit condition whole
