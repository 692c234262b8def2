"""The planner (stats/planner.py) and the sessions compiler (stats/sessions_sql.py) against the real
ClickHouse engine: over generated traffic (visits across midnight, gaps around the session gap,
engaged and unengaged bounces, UTMs) whose `sessions` rows storage/rollup_backfill.py builds as
the stream jobs do, plus a stale version of one visit and a tombstoned visit (what the stream
jobs leave when a visit grows), every query drawn from the catalogue that the planner answers
from `sessions` (wholly or partly) answers as the archive compiler does and as the independent
Python count (tests/fixtures/stats_reference.py).
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from clickhouse_connect.driver.client import Client
from hypothesis import HealthCheck, assume, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from stats import planner, raw_sql, sessions_sql
from stats.query import Condition, Filter, Logic, Query
from storage import queries as reports
from storage.client import connect
from storage.goals import add_goal, list_goals, make_goal
from storage.queries import contract as report
from storage.queries import raw as raw_queries
from storage.queries.contract import StatsQuery
from storage.queries.visit_events import with_visit_events
from storage.rollup_backfill import backfill_rollups
from storage.sites import add_site
from storage.tables import SESSIONS
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures import stats_reference
from tests.fixtures.events import archive_rows, engagement_event, page_view

pytestmark = pytest.mark.integration

SITE = "stats-planner.example.com"
DAY = datetime(2026, 11, 10, tzinfo=UTC)
RANGE = (DAY, DAY + timedelta(days=1))
PATHS = ["/", "/pricing", "/blog/a", "/Docs"]
SOURCES = ["", "twitter.com", "google.com"]
MEDIUMS = ["", "social", "Email"]
GAPS_S = [10, 120, 1799.999, 1800, 1800.001, 2700]


def generated_traffic(seed: int = 3131) -> list[PageViewEvent]:
    """Visitors around both midnights of DAY, page views at gaps around the session gap, each
    carrying a source, UTM source, medium and campaign (a visit takes its first page view's),
    engagement events (engaged or not) and Signups, some before any page view (in no visit)."""
    rng = random.Random(seed)
    events = []
    for number in range(70):
        visitor = f"v{number}"
        moment = DAY - timedelta(hours=3) + timedelta(milliseconds=rng.randrange(30 * 3600 * 1000))
        if number % 5 == 0:  # minutes before one of the range's midnights
            midnight = DAY + timedelta(days=number % 2)
            moment = midnight - timedelta(milliseconds=rng.randrange(1, 20 * 60 * 1000))
        client = {"country": rng.choice(["DE", "US"]), "screen_width": rng.choice([390, 1920])}
        if rng.random() < 0.15:
            events.append(page_view(SITE, visitor, moment - timedelta(minutes=1), "/", name="Ping", **client))
        for _ in range(rng.randint(1, 4)):
            source = {
                "referrer_domain": rng.choice(SOURCES),
                "utm_source": rng.choice(["", "", "news"]),
                "utm_medium": rng.choice(MEDIUMS),
                "utm_campaign": rng.choice(["", "autumn"]),
            }
            events.append(page_view(SITE, visitor, moment, rng.choice(PATHS), **client, **source))
            if rng.random() < 0.3:
                engaged = rng.choice([3_000, 12_000])
                events.append(engagement_event(SITE, visitor, moment + timedelta(seconds=5), "/", engaged))
            if rng.random() < 0.2:
                signup = moment + timedelta(seconds=7)
                events.append(page_view(SITE, visitor, signup, "/pricing", name="Signup", **client))
            moment += timedelta(seconds=rng.choice(GAPS_S))
    return events


# Custom events whose path no page view has: one in a visit starting in the range (the archive
# keeps that visit under `event:page is /files`, `paths` does not: the planner must read the
# archive), one the next afternoon, after every visit of the range has ended (no visit of the
# range holds it: `sessions` still answers `event:page is /late-only`).
DOWNLOAD_AT = DAY + timedelta(hours=10)
EDGES = [
    page_view(SITE, "downloader", DOWNLOAD_AT, "/blog/a"),
    page_view(SITE, "downloader", DOWNLOAD_AT + timedelta(minutes=1), "/files", name="Download"),
    page_view(SITE, "late", DAY + timedelta(days=1, hours=14), "/blog/a"),
    page_view(SITE, "late", DAY + timedelta(days=1, hours=14, minutes=1), "/late-only", name="Download"),
]
TRAFFIC = generated_traffic() + EDGES

# What the stream jobs leave besides the newest rows: an older version of a visit (batch 3, wrong
# numbers, superseded by its true version written again by batch 5) and a visit that grew a new
# start (its old key tombstoned by batch 2). Merged or not, the newest version is the true one.
_COLUMNS = [
    "site", "session_start", "visitor_id", "session_end", "pageviews", "entry_path", "exit_path",
    "referrer_domain", "utm_medium", "paths", "is_deleted", "batch_id",
]  # fmt: skip
_TRUE_VERSION = f"""
SELECT * FROM {SESSIONS}
WHERE site = {{site:String}} AND toUnixTimestamp64Milli(session_start) = {{start_ms:Int64}}
  AND visitor_id = {{visitor:String}} AND batch_id = 0
"""


def _stale_and_tombstoned(visit: stats_reference.Visit) -> list[list[object]]:
    start, visitor, ghost = visit.start, visit.views[0].visitor_id, DAY + timedelta(hours=12)
    return [
        [SITE, start, visitor, start, 9, "/stale", "/stale", "stale.example", "social", ["/stale"], 0, 3],
        [SITE, ghost, "ghost", ghost, 1, "/", "/", "twitter.com", "social", ["/"], 0, 1],
        [SITE, ghost, "ghost", ghost, 1, "/", "/", "twitter.com", "social", ["/"], 1, 2],
    ]


@pytest.fixture(scope="module")
def store(dashboard_settings: Settings) -> Client:
    client = connect(dashboard_settings)
    rows, columns = archive_rows(TRAFFIC)
    client.insert("events", rows, column_names=columns)
    add_site(client, SITE)
    backfill_rollups(client, SITE, (DAY - timedelta(days=1)).date(), (DAY + timedelta(days=2)).date())
    visits = stats_reference.visits_of(TRAFFIC, timedelta(seconds=1800)).values()
    visit = next(v for v in visits if v and RANGE[0] <= v.start < RANGE[1])
    # the true version again first (batch 5): a merge with the stale one (batch 3) keeps it too
    start_ms = round(visit.start.timestamp() * 1000)  # a DateTime64 parameter drops the milliseconds
    true_version = {"site": SITE, "start_ms": start_ms, "visitor": visit.views[0].visitor_id}
    found = client.query(_TRUE_VERSION, parameters=true_version)
    batch = found.column_names.index("batch_id")
    again = [[5 if index == batch else value for index, value in enumerate(row)] for row in found.result_rows]
    assert len(again) == 1
    client.insert(SESSIONS, again, column_names=list(found.column_names))
    for row in _stale_and_tombstoned(visit):  # one part each: no insert merges them
        client.insert(SESSIONS, [row], column_names=_COLUMNS)
    return client


# --- the property: planner(agg) == raw_sql == the Python count ----------------------------------

VISIT_DIMENSIONS = [
    "visit:source", "visit:entry_page", "visit:exit_page", "visit:utm_source", "visit:utm_medium",
    "visit:utm_campaign", "visit:channel",
]  # fmt: skip
TIME_DIMENSIONS = ["time:day", "time:hour"]
VISIT_METRICS = ["visits", "bounce_rate", "visit_duration", "views_per_visit"]
VALUES = {
    "event:page": [*PATHS, "/files", "/late-only"],
    "visit:source": SOURCES,
    "visit:entry_page": PATHS,
    "visit:exit_page": PATHS,
    "visit:utm_source": ["", "news"],
    "visit:utm_medium": MEDIUMS,
    "visit:utm_campaign": ["", "autumn"],
    "visit:channel": ["Direct", "Organic Social", "Email", "Organic Search"],
}
OPERATORS = ["is", "is_not", "contains", "contains_not", "matches", "matches_not", "matches_wildcard"]


def _operand(operator: str, value: str) -> str:
    if operator.startswith("matches_wildcard"):
        return value[:3] + "*" if value else "*"
    if operator.startswith("matches"):
        return "^" + value[:4]
    return value


def conditions(dimension: str) -> st.SearchStrategy[Condition]:
    return st.builds(
        lambda operator, chosen, sensitive: Condition(
            operator, dimension, tuple(_operand(operator, value) for value in chosen), sensitive
        ),
        st.sampled_from(OPERATORS),
        st.lists(st.sampled_from(VALUES[dimension]), min_size=1, max_size=2, unique=True),
        st.booleans(),
    )


leaf = st.sampled_from(VISIT_DIMENSIONS).flatmap(conditions)
page = conditions("event:page")
leaf_or_page = st.one_of(leaf, page)
FILTERS: st.SearchStrategy[Filter | None] = st.one_of(
    st.none(),
    leaf,
    page,
    st.builds(lambda a, b: Logic("or", (a, b)), leaf_or_page, leaf_or_page),
    st.builds(lambda a, b: Logic("and", (a, Logic("not", (b,)))), leaf_or_page, leaf_or_page),
    # one page view must pass both: and(page is X, page is Y) is no visit, not X's and Y's
    st.builds(lambda a, b: Logic("and", (a, b)), page, st.one_of(page, leaf)),
    st.builds(lambda a: Logic("not", (a,)), page),
)


@st.composite
def queries(draw: st.DrawFn) -> Query:
    """Visit metrics (sometimes with event metrics) by up to two visit, time or page dimensions
    (the page alone, or with a visit or time dimension), under a visit-property or page filter,
    in UTC or Berlin; only those the planner answers from `sessions`."""
    dimensions = draw(st.lists(st.sampled_from(VISIT_DIMENSIONS + TIME_DIMENSIONS), max_size=2, unique=True))
    if sum(name.startswith("time:") for name in dimensions) > 1:
        dimensions = dimensions[:1]
    by_page = draw(st.booleans())
    if by_page:  # each visit under each page of its events passing the filter
        dimensions = dimensions[:1]
        dimensions.insert(draw(st.integers(0, len(dimensions))), "event:page")
    metrics = draw(st.lists(st.sampled_from(VISIT_METRICS), min_size=1, max_size=4, unique=True))
    if draw(st.integers(0, 5 if by_page else 3)) == 0:  # a part from the archive, where it needs no visit
        dimensions = [name for name in dimensions if name.startswith("time:") or name == "event:page"][:1]
        metrics.insert(draw(st.integers(0, len(metrics))), draw(st.sampled_from(["visitors", "pageviews"])))
        filters = None
    else:
        filters = draw(FILTERS)
    timezone = draw(st.sampled_from(["UTC", "UTC", "Europe/Berlin"]))
    query = Query(SITE, *RANGE, tuple(metrics), tuple(dimensions), filters, timezone=timezone, source="agg")
    assume(planner.plan(query).sessions)
    return query


def _rows(rows: list[raw_sql.Row]) -> list[tuple]:
    return [(row.dimensions, row.metrics) for row in rows]


def _uses_channel(query: Query) -> bool:
    return "visit:channel" in query.dimensions or "visit:channel" in repr(query.filters)


@hypothesis_settings(
    max_examples=80,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
@given(query=queries())
def test_answers_from_sessions_equal_the_archives_and_the_python_count(store: Client, query: Query) -> None:
    planned = planner.answer(store, query)
    archive = raw_sql.answer(store, replace(query, source="raw"))
    assert _rows(planned.rows) == _rows(archive), query  # the same rows, in the same order
    assert planned.source == planner.plan(query, other_events=planner.other_events(store, query)).source
    if query.timezone == "UTC" and not _uses_channel(query):  # the Python count has neither
        assert {row.dimensions: row.metrics for row in planned.rows} == stats_reference.answer(TRAFFIC, query)


@st.composite
def tagged_queries(draw: st.DrawFn) -> Query:
    """Event metrics by up to two visit, page or country dimensions (or a time bucket, unfiltered)
    under a visit-property or page filter: those whose events the planner tags with their
    visits' properties from `sessions` (sessions_sql.tags_events)."""
    dimensions = draw(
        st.lists(st.sampled_from([*VISIT_DIMENSIONS, "event:page", "visit:country"]), max_size=2, unique=True)
    )
    filters = draw(FILTERS)
    if filters is None and draw(st.booleans()):
        dimensions = [draw(st.sampled_from(TIME_DIMENSIONS)), *dimensions[:1]]
    metrics = draw(
        st.lists(
            st.sampled_from(["visitors", "pageviews", "events", "percentage"]),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    timezone = draw(st.sampled_from(["UTC", "UTC", "Europe/Berlin"]))
    query = Query(SITE, *RANGE, tuple(metrics), tuple(dimensions), filters, timezone=timezone, source="agg")
    assume(sessions_sql.tags_events(query) and not planner.plan(query).sessions)
    return query


@hypothesis_settings(
    max_examples=30,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
@given(query=tagged_queries())
def test_event_metrics_by_visit_properties_tag_events_from_sessions_as_the_archive_counts(
    store: Client, query: Query
) -> None:
    """Visitors, page views, events and percentage by and under visit properties, each event
    tagged with its visit's from `sessions` (no visit sessionised but the visitors active after
    the range): the archive compiler's rows, and the independent Python count's."""
    assert not planner.late_or_doubtful(store, query)
    planned = planner.answer(store, query)
    archive = raw_sql.answer(store, replace(query, source="raw"))
    assert _rows(planned.rows) == _rows(archive), query
    if query.timezone == "UTC" and not _uses_channel(query):
        assert {row.dimensions: row.metrics for row in planned.rows} == stats_reference.answer(TRAFFIC, query)


@st.composite
def joined_queries(draw: st.DrawFn) -> Query:
    """Visit metrics with event metrics by up to two visit or page dimensions under a
    visit-property or page filter: the visits from `sessions`, the events tagged from it."""
    query = draw(tagged_queries())
    visit_metrics = draw(st.lists(st.sampled_from(VISIT_METRICS), min_size=1, max_size=2, unique=True))
    metrics = tuple(name for name in query.metrics if name != "percentage") or ("visitors",)
    joined = replace(query, metrics=(*metrics, *visit_metrics))
    assume(planner.plan(joined).archive_tagged)
    return joined


@hypothesis_settings(
    max_examples=25,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
@given(query=joined_queries())
def test_visit_and_event_metrics_by_visit_properties_join_sessions_and_tagged_events(
    store: Client, query: Query
) -> None:
    """e.g. visitors and visits by source x page under a UTM filter: the visit metrics from
    `sessions`, the event metrics from the events tagged with their visits' properties; the
    archive compiler's rows and the Python count's."""
    planned = planner.answer(store, query)
    archive = raw_sql.answer(store, replace(query, source="raw"))
    assert _rows(planned.rows) == _rows(archive), query
    if query.timezone == "UTC" and not _uses_channel(query):
        assert {row.dimensions: row.metrics for row in planned.rows} == stats_reference.answer(TRAFFIC, query)


@st.composite
def visitor_queries(draw: st.DrawFn) -> Query:
    """Visitors (with up to two visit metrics) by up to two of the page and visit properties,
    under a visit-property or page filter, over the day or a span across its first midnight:
    those whose visitors come from `sessions`' paths, the custom events' table and the archive's
    page views of the visits across the range's edges or a UTC midnight
    (sessions_sql.counts_visitors)."""
    dimensions = draw(st.lists(st.sampled_from([*VISIT_DIMENSIONS, "event:page"]), max_size=2, unique=True))
    visit_metrics = draw(st.lists(st.sampled_from(VISIT_METRICS), max_size=2, unique=True))
    span = draw(st.sampled_from([RANGE, (DAY - timedelta(hours=2), DAY + timedelta(hours=20))]))
    metrics = ("visitors", *visit_metrics)
    query = Query(SITE, *span, metrics, tuple(dimensions), draw(FILTERS), source="agg")
    assume(sessions_sql.counts_visitors(replace(query, metrics=("visitors",))))
    return query


@hypothesis_settings(
    max_examples=40,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
@given(query=visitor_queries())
def test_visitors_by_page_and_visit_properties_come_from_sessions_paths_as_the_archive_counts(
    store: Client, monkeypatch: pytest.MonkeyPatch, query: Query
) -> None:
    """e.g. visitors by source x page: from the pages of the visits inside the range and one UTC
    day, the custom events' table and the archive's page views of the other visits' visitors,
    never the range's events tagged one by one; the archive compiler's rows and the Python
    count's, with visits across both midnights, Signups on pages their visits never viewed and
    custom events in no visit."""
    monkeypatch.setattr(planner, "_tagged", _archive_not_read)
    planned = planner.answer(store, query)
    assert planned.source == "agg"
    archive = raw_sql.answer(store, replace(query, source="raw"))
    assert _rows(planned.rows) == _rows(archive), query
    if not _uses_channel(query):
        assert {row.dimensions: row.metrics for row in planned.rows} == stats_reference.answer(TRAFFIC, query)


@pytest.mark.parametrize(
    "filters",
    [
        Condition("is", "visit:source", ("google.com",)),  # only the passing visits are joined
        Condition("contains", "visit:utm_medium", ("ocia",), case_sensitive=False),
        Condition("is_not", "visit:source", ("google.com",)),  # '' passes: events in no visit count
        Condition("matches", "visit:entry_page", ("^/(blog|)",)),  # may match ''
        Logic(
            "and", (Condition("is", "visit:utm_medium", ("social",)), Condition("is", "event:page", ("/",)))
        ),
        Logic(
            "or",
            (Condition("is", "visit:source", ("twitter.com",)), Condition("is", "visit:country", ("DE",))),
        ),
    ],
)
def test_events_in_no_visit_count_under_a_visit_condition_they_pass(store: Client, filters: Filter) -> None:
    """Custom events before any page view are in no visit (their visit properties ''): under a
    condition '' passes they count, as the archive counts them; under one it fails they do not."""
    query = Query(SITE, *RANGE, ("visitors", "events"), ("event:page",), filters, source="agg")
    assert sessions_sql.tags_events(query)
    planned = planner.answer(store, query)
    assert planned.rows and _rows(planned.rows) == _rows(raw_sql.answer(store, replace(query, source="raw")))


def test_bounce_rate_by_source_and_entry_page_under_a_medium_filter_is_from_sessions(store: Client) -> None:
    query = Query(
        SITE, *RANGE, ("bounce_rate", "visits", "visit_duration"), ("visit:source", "visit:entry_page"),
        Condition("is", "visit:utm_medium", ("social",)), source="agg", limit=5, offset=2,
    )  # fmt: skip
    planned = planner.answer(store, query)
    assert planned.source == "agg"
    assert planned.rows and _rows(planned.rows) == _rows(raw_sql.answer(store, replace(query, source="raw")))


def _from_sessions(store: Client, query: Query) -> list[raw_sql.Row]:
    """What `sessions` alone answers for the visit metrics of `query` (no check)."""
    counts = raw_sql._rows(store, sessions_sql.compile_sessions(query), lambda kind: True)
    return raw_sql.merged(query, raw_sql.answer_columns(query), counts)


def test_bounce_rate_and_visits_by_day_under_a_page_filter_are_from_sessions_paths(store: Client) -> None:
    docs = Condition("contains", "event:page", ("doc",), case_sensitive=False)
    either = Logic("or", (Condition("is", "event:page", ("/blog/a",)), docs))
    metrics = ("visits", "bounce_rate", "visit_duration", "views_per_visit")
    query = Query(SITE, *RANGE, metrics, ("time:day",), either, source="agg")
    assert not planner.other_events(store, query)
    planned = planner.answer(store, query)
    assert planned.source == "agg" and planned.rows
    assert _rows(planned.rows) == _rows(raw_sql.answer(store, replace(query, source="raw")))
    assert {row.dimensions: row.metrics for row in planned.rows} == stats_reference.answer(TRAFFIC, query)


def test_a_visit_kept_by_a_custom_event_on_a_page_it_never_viewed_is_counted_from_sessions(
    store: Client,
) -> None:
    """`paths` holds page views only: the Download on /files keeps its visit in the archive's
    count, not in `paths`'; the check on goal_events_minute finds it, and `sessions` reads the
    custom events at /files too (custom_events_by_page)."""
    query = Query(
        SITE, *RANGE, ("visits", "bounce_rate"), (), Condition("is", "event:page", ("/files",)), source="agg"
    )
    archive = raw_sql.answer(store, replace(query, source="raw"))
    assert [row.metrics for row in archive] == [{"visits": 1, "bounce_rate": 100}]  # one page view
    assert _rows(_from_sessions(store, query)) != _rows(archive)  # the edge is real
    assert planner.other_events(store, query)
    planned = planner.answer(store, query)
    assert planned.source == "agg" and _rows(planned.rows) == _rows(archive)
    assert {row.dimensions: row.metrics for row in planned.rows} == stats_reference.answer(TRAFFIC, query)


def test_not_a_page_keeps_a_visit_whose_custom_event_is_on_another_page(store: Client) -> None:
    """`not (page is /blog/a)`: the downloader viewed /blog/a alone, its Download on /files passes
    (raw_sql's rule: one event passing the whole filter); `paths` cannot tell, the custom events
    can (the check takes `not` as its negation: a custom event off /blog/a could pass)."""
    query = Query(
        SITE, *RANGE, ("visits", "views_per_visit"), ("time:hour",),
        Logic("not", (Condition("is", "event:page", ("/blog/a",)),)), source="agg",
    )  # fmt: skip
    archive = raw_sql.answer(store, replace(query, source="raw"))
    assert _rows(_from_sessions(store, query)) != _rows(archive)
    planned = planner.answer(store, query)
    assert planned.source == "agg" and _rows(planned.rows) == _rows(archive)
    assert {row.dimensions: row.metrics for row in planned.rows} == stats_reference.answer(TRAFFIC, query)


def test_a_custom_event_after_the_ranges_visits_ended_leaves_the_page_filter_to_sessions(
    store: Client,
) -> None:
    query = Query(SITE, *RANGE, ("visits",), (), Condition("is", "event:page", ("/late-only",)), source="agg")
    assert not planner.other_events(store, query)
    planned = planner.answer(store, query)
    assert (
        planned.source == "agg" and planned.rows == raw_sql.answer(store, replace(query, source="raw")) == []
    )


def test_bounce_rate_by_page_counts_a_visit_under_the_page_of_its_custom_event_from_sessions(
    store: Client,
) -> None:
    """By `event:page` a visit counts under each page of its events: the downloader's visit under
    /blog/a (its page view, in `paths`) and under /files (its Download, not in `paths`): the
    check finds the custom events, and `sessions` reads their pages (custom_events_by_page)."""
    query = Query(SITE, *RANGE, ("bounce_rate", "visits"), ("event:page",), source="agg")
    archive = raw_sql.answer(store, replace(query, source="raw"))
    assert {row.dimensions: row.metrics for row in archive}[("/files",)] == {"bounce_rate": 100, "visits": 1}
    assert _rows(_from_sessions(store, query)) != _rows(archive)  # `paths` alone misses /files
    assert planner.other_events(store, query)
    planned = planner.answer(store, query)
    assert planned.source == "agg" and _rows(planned.rows) == _rows(archive)
    assert {row.dimensions: row.metrics for row in planned.rows} == stats_reference.answer(TRAFFIC, query)


def test_visits_and_bounce_rate_by_source_and_page_under_a_page_filter_are_from_sessions(
    store: Client,
) -> None:
    not_blog = Logic("not", (Condition("contains", "event:page", ("blog",)),))
    query = Query(
        SITE, *RANGE, ("visits", "bounce_rate"), ("visit:source", "event:page"), not_blog, source="agg"
    )
    planned = planner.answer(store, query)
    assert planned.source == "agg" and planned.rows
    assert all(row.dimensions[1] != "/blog/a" for row in planned.rows)
    assert _rows(planned.rows) == _rows(raw_sql.answer(store, replace(query, source="raw")))
    assert {row.dimensions: row.metrics for row in planned.rows} == stats_reference.answer(TRAFFIC, query)


def test_visitors_and_bounce_rate_by_page_join_sessions_and_the_archives_flat_events(store: Client) -> None:
    query = Query(SITE, *RANGE, ("visitors", "bounce_rate", "pageviews"), ("event:page",), source="agg")
    assert planner.plan(query).archive_flat
    planned = planner.answer(store, query)
    assert planned.source == "raw"  # the event metrics are the archive's
    assert _rows(planned.rows) == _rows(raw_sql.answer(store, replace(query, source="raw")))
    assert {row.dimensions: row.metrics for row in planned.rows} == stats_reference.answer(TRAFFIC, query)


def test_an_asked_raw_source_reads_the_archive(store: Client) -> None:
    query = Query(SITE, *RANGE, ("visits",), ("visit:source",), source="raw")
    assert planner.answer(store, query).source == "raw"


def test_late_events_in_the_range_send_the_query_to_the_archive(store: Client) -> None:
    """Page views the stream jobs never counted touch the range: `sessions` misses them."""
    next_day = (DAY + timedelta(days=1), DAY + timedelta(days=2))  # the property's range stays clean
    store.insert(
        "late_events",
        [["activity", SITE, next_day[0] + timedelta(hours=6), 1, 3]],
        column_names=["query_name", "site", "window_start", "batch_id", "events"],
    )
    query = Query(SITE, *next_day, ("visits", "bounce_rate"), ("visit:source",), source="agg")
    answered = planner.answer(store, query)
    assert answered.source == "raw"
    assert _rows(answered.rows) == _rows(raw_sql.answer(store, replace(query, source="raw")))


# --- the dashboard's filtered session breakdown (storage.queries.session_breakdown) -------------


def _archive_not_read(*_: object) -> None:
    raise AssertionError("the archive was read")


@pytest.mark.parametrize(
    ("by", "filters", "where"),
    [
        ("referrer_domain", {"utm_medium": "social"}, None),
        (
            "entry_path",
            {},
            report.Logic(
                "or",
                (
                    report.Condition("is", "referrer_domain", ("twitter.com",)),
                    report.Condition("contains", "utm_medium", ("mai",)),
                ),
            ),
        ),
        (
            "exit_path",
            {"referrer_domain": "google.com"},
            report.Logic("not", (report.Condition("is", "entry_path", ("/",)),)),
        ),
        ("utm_campaign", {}, report.Condition("is_not", "referrer_domain", ("google.com",))),
        ("utm_medium", {}, report.Condition("matches_not", "exit_path", ("^/blog",))),
    ],
)
def test_filtered_session_breakdowns_by_visit_properties_are_read_from_sessions(
    store: Client, monkeypatch: pytest.MonkeyPatch, by: str, filters: dict, where: object
) -> None:
    """Under filters on visit properties alone, source agg reads `sessions` (the archive is not
    read) and answers the archive's rows to the unit."""
    q = StatsQuery(SITE, *RANGE, filters=filters, where=where)
    archive = reports.session_breakdown(store, q, by, 50, source="raw")
    assert reports.sessions_answer(store, q, by) and archive
    monkeypatch.setattr(raw_queries, "session_breakdown", _archive_not_read)
    assert reports.session_breakdown(store, q, by, 50, source="agg") == archive


def test_a_session_breakdown_under_an_event_filter_still_reads_the_archive(store: Client) -> None:
    q = StatsQuery(SITE, *RANGE, filters={"country": "DE"})
    assert not reports.sessions_answer(store, q, "referrer_domain")
    q = StatsQuery(SITE, *RANGE, where=report.Condition("is", "path", ("/",)))
    assert not reports.sessions_answer(store, q, "referrer_domain")
    # Under a page filter a breakdown counts the visits' matching page views, which `paths` cannot.
    q = StatsQuery(SITE, *RANGE, filters={"path": "/blog/a"})
    assert not reports.sessions_answer(store, q, "referrer_domain")
    assert reports.sessions_answer(store, q, page_views=False)


@pytest.mark.parametrize(
    "filters",
    [
        {"path": "/blog/a"},
        {"path": "/Docs", "utm_medium": "social"},
        {"referrer_domain": "twitter.com"},
        {"utm_medium": "Email", "path": "/blog/a"},
        # Signups on /pricing, Pings on / and a Download on /files happen inside visits of the
        # range: raw keeps those visits under the page filter, `paths` (page views) alone would not.
        {"path": "/pricing"},
        {"path": "/"},
        {"path": "/pricing", "utm_medium": "social"},
        {"path": "/files"},
        {"utm_source": "news"},
        {"referrer_domain": "google.com", "utm_medium": "social"},
        {"utm_campaign": "autumn"},
    ],
)
@pytest.mark.parametrize(
    "span",
    [
        RANGE,
        (DAY + timedelta(hours=9, minutes=17), DAY + timedelta(hours=21, minutes=3)),
        (DAY - timedelta(hours=2), DAY + timedelta(days=1, hours=2)),  # visits across a midnight inside
    ],
    ids=["day", "inside-a-day", "across-midnights"],
)
def test_filtered_aggregates_read_visits_from_sessions_and_a_page_alone_from_the_rollups(
    store: Client, monkeypatch: pytest.MonkeyPatch, filters: dict, span: tuple[datetime, datetime]
) -> None:
    """The Overview's top metrics under a filter: visits, bounce rate and duration from
    `sessions` (a page filter from `paths`), page views and visitors of a page filter alone from
    the rollups' row of that page, and under visit filters alone from `sessions` and the visits
    across the range's start or end (visits across both midnights, and across the hours of a range
    inside the day); the archive's numbers to the unit."""
    q = StatsQuery(SITE, *span, filters=filters)
    archive = reports.aggregate(store, q, source="raw")
    assert reports.sessions_answer(store, q, page_views=False) and archive["sessions"]
    monkeypatch.setattr(raw_queries, "aggregate", _archive_not_read)
    if list(filters) == ["path"] or "path" not in filters:
        monkeypatch.setattr(raw_queries, "page_totals", _archive_not_read)
    assert reports.aggregate(store, q, source="agg") == archive


@pytest.mark.parametrize("interval", ["minute", "hour", "day"])
@pytest.mark.parametrize("page", ["/pricing", "/blog/a", "/files"])
def test_a_timeseries_filtered_by_a_page_alone_is_read_from_the_rollups(
    store: Client, monkeypatch: pytest.MonkeyPatch, interval: str, page: str
) -> None:
    """The Overview's chart under a page filter: page views and visitors per bucket from the
    rollups' rows of that page (a range starting mid-hour, so edge minutes are read too)."""
    q = StatsQuery(
        SITE, DAY + timedelta(hours=9, minutes=17), DAY + timedelta(hours=13), filters={"path": page}
    )
    archive = reports.timeseries(store, q, interval, source="raw")  # type: ignore[arg-type]
    monkeypatch.setattr(raw_queries, "timeseries", _archive_not_read)
    assert reports.timeseries(store, q, interval, source="agg") == archive  # type: ignore[arg-type]
    assert any(point.pageviews for point in archive) == (page != "/files")


@pytest.mark.parametrize("interval", ["hour", "day"])
@pytest.mark.parametrize(
    ("filters", "where", "timezone"),
    [
        ({"utm_medium": "social"}, None, "UTC"),
        ({}, report.Logic("not", (report.Condition("contains", "entry_path", ("blog",)),)), "Europe/Berlin"),
        ({"path": "/pricing"}, None, "UTC"),
    ],
)
def test_filtered_session_timeseries_is_read_from_sessions(
    store: Client, monkeypatch: pytest.MonkeyPatch, interval: str, filters: dict, where: object, timezone: str
) -> None:
    q = StatsQuery(SITE, *RANGE, filters=filters, where=where, timezone=timezone)
    archive = reports.session_timeseries(store, q, interval, source="raw")  # type: ignore[arg-type]
    assert reports.sessions_answer(store, q, page_views=False) and any(point.sessions for point in archive)
    monkeypatch.setattr(raw_queries, "session_timeseries", _archive_not_read)
    assert reports.session_timeseries(store, q, interval, source="agg") == archive  # type: ignore[arg-type]


def _never_sessionising(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `client` fail a query that sessionises the archive for a visit filter (the members of
    the passing visits: storage/queries/session_filters.py)."""
    query = client.query

    def checked(sql: str, *args: object, **kwargs: object) -> object:
        assert " AS members" not in sql, "the archive was sessionised for a visit filter"
        return query(sql, *args, **kwargs)

    monkeypatch.setattr(client, "query", checked)


# Visit filters (and their mixes with event filters) under which the flat reports count the
# events of the passing visits read through `sessions` (storage/queries/visit_events.py).
VISIT_EVENT_FILTERS = [
    ({"referrer_domain": "google.com"}, None),
    ({"utm_medium": "social"}, None),
    ({"entry_path": "/"}, None),
    ({"exit_path": "/pricing"}, None),
    ({"referrer_domain": "twitter.com", "path": "/blog/a"}, None),
    ({"utm_source": "news", "country": "DE"}, None),
    ({"utm_campaign": "autumn", "goal": "Signup"}, None),
    ({}, report.Condition("is_not", "referrer_domain", ("google.com",))),
    (
        {"utm_medium": "Email"},
        report.Logic(
            "and",
            (
                report.Condition("is", "country", ("US",)),
                report.Condition("contains", "entry_path", ("blog",)),
            ),
        ),
    ),
]


@pytest.mark.parametrize(("filters", "where"), VISIT_EVENT_FILTERS)
@pytest.mark.parametrize(
    "span",
    [RANGE, (DAY + timedelta(hours=9, minutes=17), DAY + timedelta(hours=21, minutes=3))],
    ids=["day", "inside-a-day"],
)
def test_flat_reports_under_visit_filters_read_the_visits_from_sessions(
    store: Client,
    monkeypatch: pytest.MonkeyPatch,
    filters: dict,
    where: object,
    span: tuple[datetime, datetime],
) -> None:
    """The Overview's chart, top pages, countries and screen sizes, goals, custom events, their
    properties and the pages' engagement under a visit filter count the events of the passing
    visits: read through `sessions` (the archive is not sessionised), the archive's numbers to the
    unit, over a day and over a range inside it (visits across its start and end)."""
    if "goal" in filters and "Signup" not in {goal.name for goal in list_goals(store, SITE)}:
        add_goal(store, make_goal(SITE, event_name="Signup"))
    q = StatsQuery(SITE, *span, filters=filters, where=where)
    asks = {
        "chart": lambda source: reports.timeseries(store, q, "hour", source=source),
        "pages": lambda source: reports.breakdown(store, q, "path", 50, source=source),
        "countries": lambda source: reports.breakdown(store, q, "country", 50, source=source),
        "screens": lambda source: reports.breakdown(store, q, "screen_size", 50, source=source),
        "goals": lambda source: reports.goals(store, q, source=source),
        "events": lambda source: reports.custom_events(store, q, 50, source=source),
        "keys": lambda source: reports.property_keys(store, q, 50, source=source),
        "engagement": lambda source: reports.engagement(store, q, PATHS, source=source),
    }
    archive = {name: ask("raw") for name, ask in asks.items()}
    assert span != RANGE or sum(point.pageviews for point in archive["chart"]) > 0  # some to count
    _never_sessionising(store, monkeypatch)
    assert {name: ask("agg") for name, ask in asks.items()} == archive


def test_visit_filters_the_sessions_do_not_hold_still_sessionise_the_archive(store: Client) -> None:
    """The channel (the site's rules), and a visit condition under an `or` with an event one,
    leave the query to the archive; late page views in the day before the range too."""
    q = StatsQuery(SITE, *RANGE, filters={"channel": "Direct"})
    assert with_visit_events(store, q) is None
    either = report.Logic(
        "or",
        (
            report.Condition("is", "referrer_domain", ("google.com",)),
            report.Condition("is", "country", ("DE",)),
        ),
    )
    assert with_visit_events(store, StatsQuery(SITE, *RANGE, where=either)) is None
    moved = with_visit_events(
        store, StatsQuery(SITE, *RANGE, filters={"referrer_domain": "x", "country": "DE"})
    )
    assert moved is not None and moved.filters == {"country": "DE"} and moved.visit_events is not None


def test_visits_written_before_paths_send_what_reads_the_new_columns_to_the_archive(store: Client) -> None:
    """Rows the stream jobs wrote before migrations 0062 / 0063 read '' and [] in the new columns
    until `tally replay`: over a range holding one, a page or utm_content filter reads the archive;
    what reads older columns still reads `sessions`."""
    day = (DAY + timedelta(days=3), DAY + timedelta(days=4))
    views = [
        page_view(SITE, "before", day[0] + timedelta(hours=9, minutes=m), p) for m, p in ((0, "/"), (1, "/x"))
    ]
    rows, columns = archive_rows(views)
    store.insert("events", rows, column_names=columns)
    backfill_rollups(store, SITE, day[0].date(), day[1].date())
    store.command(  # the visit as the old jar wrote it: no paths
        f"ALTER TABLE {SESSIONS} UPDATE paths = [] WHERE site = {{site:String}} AND visitor_id = 'before' "
        "SETTINGS mutations_sync = 2",
        parameters={"site": SITE},
    )
    page = Query(SITE, *day, ("visits",), (), Condition("is", "event:page", ("/x",)), source="agg")
    content = Query(SITE, *day, ("visits",), ("visit:utm_content",), source="agg")
    source = Query(SITE, *day, ("visits",), ("visit:source",), source="agg")
    for query in (page, content):
        answered = planner.answer(store, query)
        assert answered.source == "raw", query  # "agg" without the check: 0 visits under the page
        assert _rows(answered.rows) == _rows(raw_sql.answer(store, replace(query, source="raw")))
    assert [row.metrics["visits"] for row in planner.answer(store, page).rows] == [1]
    assert planner.answer(store, source).source == "agg"
    # visitors by the page read `paths` too: the range's events tagged one by one instead
    visitors = Query(SITE, *day, ("visitors",), ("visit:source", "event:page"), source="agg")
    answered = planner.answer(store, visitors)
    assert answered.source == "raw" and ((("", "/x"), {"visitors": 1}) in _rows(answered.rows))
    assert _rows(answered.rows) == _rows(raw_sql.answer(store, replace(visitors, source="raw")))
