"""The planner's decision (stats/planner.py plan): which source answers each metric, from the
query alone, without ClickHouse."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from stats import catalogue, sessions_sql
from stats.planner import Plan, plan
from stats.query import Behaviour, Condition, Logic, Query

START = datetime(2026, 11, 10, tzinfo=UTC)
MEDIUM = Condition("is", "visit:utm_medium", ("social",))


def query(metrics: tuple[str, ...], dimensions: tuple[str, ...] = (), filters=None, source="agg") -> Query:
    return Query("example.com", START, START + timedelta(days=1), metrics, dimensions, filters, source=source)


def test_visit_metrics_by_and_under_visit_properties_come_from_sessions() -> None:
    asked = query(("bounce_rate", "visits"), ("visit:source", "visit:entry_page"), MEDIUM)
    assert plan(asked) == Plan(sessions=("bounce_rate", "visits"))
    assert plan(asked).source == "agg"


def test_channel_time_and_logic_over_visit_properties_come_from_sessions() -> None:
    either = Logic("or", (MEDIUM, Logic("not", (Condition("contains", "visit:exit_page", ("/blog",)),))))
    asked = query(("visit_duration", "views_per_visit"), ("visit:channel", "time:hour"), either)
    assert plan(asked).source == "agg"


def test_a_raw_source_or_late_events_read_the_archive() -> None:
    asked = query(("visits",), ("visit:source",))
    assert plan(replace(asked, source="raw")) == Plan(archive=("visits",))
    assert plan(asked, late_events=True) == Plan(archive=("visits",))


@pytest.mark.parametrize(
    ("dimensions", "filters"),
    [
        (("visit:country",), None),  # event scope: a visit may have several countries
        (("event:page", "visit:country"), None),
        (("event:page",), Condition("is", "visit:browser", ("Chrome",))),
        (("event:props:plan",), None),
        ((), Logic("or", (MEDIUM, Condition("is", "visit:browser", ("Chrome",))))),
        ((), Behaviour("has_done", MEDIUM)),
    ],
)
def test_what_sessions_does_not_hold_reads_the_archive(dimensions: tuple, filters: object) -> None:
    assert plan(query(("visits", "bounce_rate"), dimensions, filters)).source == "raw"
    assert not plan(query(("visits", "bounce_rate"), dimensions, filters)).sessions


PRICING = Condition("is", "event:page", ("/pricing",))


@pytest.mark.parametrize(
    "filters",
    [
        PRICING,
        Condition("matches_wildcard", "event:page", ("/blog*",), case_sensitive=False),
        Logic("and", (PRICING, Logic("not", (MEDIUM,)))),
        Logic("or", (MEDIUM, Condition("contains_not", "event:page", ("/docs",)))),
        Logic("and", (PRICING, Condition("is", "event:page", ("/",)))),  # one page view with both: none
    ],
)
def test_page_filters_come_from_sessions_paths_and_custom_events_when_one_could_pass_them(
    filters: object,
) -> None:
    """The page is read from `sessions.paths` (page views only); when an event besides page views
    in the visits could pass the filter (the planner's check), `sessions` reads the custom events
    too (custom_events_by_page)."""
    asked = query(("visits", "bounce_rate"), ("time:day",), filters)
    assert plan(asked) == Plan(sessions=("visits", "bounce_rate"))
    assert plan(asked, other_events=True) == Plan(sessions=("visits", "bounce_rate"), custom_events=True)


def test_the_other_events_check_concerns_page_filters_only() -> None:
    asked = query(("visits",), ("visit:source",), MEDIUM)
    assert plan(asked, other_events=True) == Plan(sessions=("visits",))


def test_visits_written_before_paths_send_only_what_reads_the_new_columns_to_the_archive() -> None:
    """Rows from before migrations 0062 / 0063 read '' / [] in the columns added then."""
    by_content = query(("visits",), ("visit:utm_content",))
    by_page = query(("visits",), ("time:day",), PRICING)
    by_source = query(("visits",), ("visit:source",), MEDIUM)
    for asked in (by_content, by_page):
        assert plan(asked, rows_before_paths=True) == Plan(archive=("visits",))
    assert plan(by_source, rows_before_paths=True) == Plan(sessions=("visits",))


@pytest.mark.parametrize(
    "filters",
    [
        Logic("and", (PRICING, Condition("is", "visit:country", ("DE",)))),  # event scope besides
        Behaviour("has_done", PRICING),
        Condition("is", "event:goal", ("Signup",)),
    ],
)
def test_a_page_filter_with_what_sessions_does_not_hold_reads_the_archive(filters: object) -> None:
    assert plan(query(("visits",), (), filters)) == Plan(archive=("visits",))


@pytest.mark.parametrize(
    ("dimensions", "filters"),
    [
        (("event:page",), None),  # bounce rate by page
        (("visit:source", "event:page"), None),
        (("event:page", "time:day"), MEDIUM),
        (("event:page",), PRICING),
        (("event:page", "visit:channel"), Logic("or", (MEDIUM, Logic("not", (PRICING,))))),
    ],
)
def test_visit_metrics_by_page_come_from_sessions_paths_and_custom_events_when_one_could_have_a_page(
    dimensions: tuple, filters: object
) -> None:
    """A visit counts under each page of its events passing the filter: its page views' from
    `paths`; when an event besides page views could be in its visits (the planner's check), a
    custom event's page too (custom_events_by_page)."""
    asked = query(("visits", "bounce_rate"), dimensions, filters)
    assert plan(asked) == Plan(sessions=("visits", "bounce_rate"))
    assert plan(asked).source == "agg"
    assert plan(asked, other_events=True) == Plan(sessions=("visits", "bounce_rate"), custom_events=True)
    assert plan(asked, rows_before_paths=True) == Plan(archive=("visits", "bounce_rate"))


def test_event_metrics_by_page_join_sessions_where_the_archive_reads_them_flat() -> None:
    by_page = query(("visitors", "bounce_rate"), ("event:page",))
    assert plan(by_page) == Plan(sessions=("bounce_rate",), archive=("visitors",), archive_flat=True)
    assert plan(by_page).source == "raw"
    by_source_and_page = query(("visitors", "visits"), ("visit:source", "event:page"))
    assert plan(by_source_and_page) == Plan(sessions=("visits",), archive=("visitors",), archive_tagged=True)


def test_a_page_dimension_with_a_props_dimension_or_a_goal_filter_reads_the_archive() -> None:
    assert not plan(query(("visits",), ("event:page", "event:props:plan"))).sessions
    assert not plan(query(("visits",), ("event:page",), Condition("is", "event:goal", ("Signup",)))).sessions


def test_event_metrics_join_sessions_where_the_archive_reads_them_flat_or_tagged() -> None:
    by_day = query(("visitors", "bounce_rate"), ("time:day",))
    assert plan(by_day) == Plan(sessions=("bounce_rate",), archive=("visitors",), archive_flat=True)
    assert plan(by_day).source == "raw"
    by_source = query(("visitors", "bounce_rate"), ("visit:source",))  # its events tagged from `sessions`
    assert plan(by_source) == Plan(sessions=("bounce_rate",), archive=("visitors",), archive_tagged=True)
    by_country = query(("visitors", "bounce_rate"), ("visit:country",))  # a visit may have several
    assert plan(by_country) == Plan(archive=("visitors", "bounce_rate"))
    assert plan(query(("visitors", "pageviews"))) == Plan(archive=("visitors", "pageviews"))


@pytest.mark.parametrize(
    ("metrics", "dimensions", "filters", "counted"),
    [
        (("visitors",), ("visit:source", "event:page"), None, True),
        (("visitors",), ("visit:channel",), PRICING, True),
        (("visitors",), ("event:page",), MEDIUM, True),
        (("visitors",), (), Logic("or", (MEDIUM, PRICING)), True),
        (("visitors",), ("event:page",), PRICING, False),  # no visit property: the flat rows answer
        (("visitors",), ("event:page",), None, False),
        (("visitors", "pageviews"), ("visit:source",), None, False),  # `paths` holds no page view count
        (("percentage",), ("visit:source",), None, False),
        (("visitors",), ("time:day", "visit:source"), None, False),  # a visit's views may span buckets
        (("visitors",), ("visit:source", "visit:country"), None, False),  # event scope
        (("visitors",), ("visit:source",), Condition("is", "event:props:plan", ("pro",)), False),
        (("visitors",), ("visit:source",), Behaviour("has_done", PRICING), False),
    ],
)
def test_visitors_by_the_page_and_visit_properties_are_counted_from_sessions_paths(
    metrics: tuple, dimensions: tuple, filters: object, counted: bool
) -> None:
    assert sessions_sql.counts_visitors(query(metrics, dimensions, filters)) is counted


def test_exit_rate_reads_the_archive() -> None:
    assert not plan(query(("visits", "exit_rate"), ("visit:exit_page",))).sessions


def test_a_sessions_column_in_the_catalogue_makes_its_dimension_answerable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the planner answers is derived from the catalogue's sessions_column: a column added
    to `sessions` and named there needs no change in stats/."""
    asked = query(("visits",), ("visit:utm_term",), Condition("is", "visit:utm_term", ("shoes",)))
    for held, source in ((None, "raw"), ("utm_term", "agg")):
        entries = tuple(
            replace(entry, sessions_column=held) if entry.tally == "utm_term" else entry
            for entry in catalogue.DIMENSIONS
        )
        monkeypatch.setattr(catalogue, "DIMENSIONS", entries)
        assert plan(asked).source == source
