"""Journeys (issue 35): known visits give the expected paths, next and previous, from a page or
the visit's entry/exit, pages grouped by a pattern, rare paths folded into "(other)"; agg (the
stream jobs' `sessions.journey`, migration 0071) equals raw (the archive sessionised) equals an
independent computation here, row for row.

The first test writes `sessions` with the SQL backfill (ClickHouse only, many questions); the
second sends the visits through Kafka to the stream jobs (Spark's activity query), waits for
their session rows and asks the same questions of them. Under filters on the visit's properties
(source, channel, UTMs, entry and exit page, country, browser…, dict filters and expressions), the
backfilled visits again: agg == raw == the definition computed here, filter by filter.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from clickhouse_connect.driver.client import Client
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from storage.channel_rules import add_rule, make_rule
from storage.client import connect
from storage.page_patterns import matches
from storage.queries import Condition, Expression, Logic, StatsQuery, UnsupportedQuery
from storage.queries.journeys import OTHER, JourneyQuestion, JourneyRow, journeys
from storage.rollup_backfill import backfill_rollups
from storage.sites import add_site
from stream_jobs.activity import QUERY_NAME
from stream_jobs.queries import start_queries
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.clickhouse import Endpoint, own_database_settings
from tests.fixtures.events import archive_rows, page_view
from tests.fixtures.spark import minutes_ago, produce, site_names, wait_for

pytestmark = pytest.mark.integration

GAP = timedelta(seconds=1800)
DAY = datetime(2026, 11, 14, tzinfo=UTC)

QUESTIONS = (
    JourneyQuestion(),
    JourneyQuestion(direction="previous"),
    JourneyQuestion(page="/", steps=3),
    JourneyQuestion(page="/", steps=1),
    JourneyQuestion(page="/pricing", direction="previous", steps=2),
    JourneyQuestion(page="/a", steps=5),
    JourneyQuestion(page="/blog/*", steps=2, patterns=("/blog/*",)),
    JourneyQuestion(page="/blog/*", direction="previous", steps=5, patterns=("/blog/*",)),
    JourneyQuestion(page="/", steps=2, min_visitors=2),
    JourneyQuestion(steps=4, patterns=("/blog/*", "/docs/*"), min_visitors=2),
    JourneyQuestion(steps=2, limit=3),  # ties at the cut: more visits, then the steps' order
    JourneyQuestion(page="/", steps=3, min_visitors=2, limit=1),
    JourneyQuestion(direction="previous", steps=5, limit=100),  # nothing folded
)


def known_visits(site: str, start: datetime) -> list[PageViewEvent]:
    """Visits whose journeys are written out beside them."""
    at = lambda minutes, ms=0: start + timedelta(minutes=minutes, milliseconds=ms)  # noqa: E731
    first, second = "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"
    return [
        # / → /a → /a → / → /b: ['/', '/a', '/', '/b'] (a reload is no step, a return is one)
        page_view(site, "folded", at(0), "/"),
        page_view(site, "folded", at(1), "/a"),
        page_view(site, "folded", at(2), "/a"),
        page_view(site, "folded", at(3), "/"),
        page_view(site, "folded", at(4), "/b"),
        # two visits of one visitor, 40 minutes apart: / → /pricing, then /pricing alone
        page_view(site, "twice", at(0), "/"),
        page_view(site, "twice", at(5), "/pricing"),
        page_view(site, "twice", at(45), "/pricing"),
        # two page views in one millisecond: the smaller event_id first (/a then /pricing)
        page_view(site, "tie", at(2, 500), "/pricing", event_id=second),
        page_view(site, "tie", at(2, 500), "/a", event_id=first),
        page_view(site, "tie", at(1), "/"),
        # a blog reader: /blog/x → /blog/y (one /blog/* node) → /docs/1 → /pricing
        page_view(site, "reader", at(3), "/blog/x"),
        page_view(site, "reader", at(4), "/blog/y"),
        page_view(site, "reader", at(6), "/docs/1"),
        page_view(site, "reader", at(7), "/pricing"),
        # another: / → /blog/z → / → /blog/x (the first / is the anchor from /)
        page_view(site, "other-reader", at(10), "/"),
        page_view(site, "other-reader", at(11), "/blog/z"),
        page_view(site, "other-reader", at(12), "/"),
        page_view(site, "other-reader", at(13), "/blog/x"),
        # a long visit: more than five steps after /
        *(page_view(site, "long", at(20 + n), f"/step/{n}" if n else "/") for n in range(8)),
        # a bounce on /
        page_view(site, "bounce", at(30), "/"),
        page_view(site, "bounce-too", at(31), "/"),
    ]


# --- the definition, independently --------------------------------------------------------


Visit = list[PageViewEvent]


def expected_journeys(
    events: list[PageViewEvent],
    site: str,
    question: JourneyQuestion,
    passes: Callable[[Visit], bool] = lambda visit: True,
) -> list[JourneyRow]:
    """The rows of the visits for which `passes` holds (all of them by default)."""
    by_visitor: defaultdict[str, list[PageViewEvent]] = defaultdict(list)
    for event in events:
        if event.site == site and event.name == "pageview":
            by_visitor[event.visitor_id].append(event)
    taken: defaultdict[tuple[str, ...], list[str]] = defaultdict(list)  # steps -> visitor per visit
    for visitor, views in by_visitor.items():
        views.sort(key=lambda e: (e.ts, str(e.event_id)))
        visit: list[PageViewEvent] = []
        for view in views:
            if visit and view.ts - visit[-1].ts > GAP:
                if passes(visit):
                    _follow(visit, visitor, question, taken)
                visit = []
            visit.append(view)
        if passes(visit):
            _follow(visit, visitor, question, taken)
    rows, other_visits, other_visitors = [], 0, set()
    ranked = sorted(taken.items(), key=lambda path: (-len(set(path[1])), -len(path[1]), path[0]))
    for rank, (steps, visitors) in enumerate(ranked, start=1):
        if len(set(visitors)) >= question.min_visitors and rank <= (question.limit or len(ranked)):
            rows.append(JourneyRow(steps, len(visitors), len(set(visitors))))
        else:
            other_visits += len(visitors)
            other_visitors |= set(visitors)
    if other_visits:
        rows.append(JourneyRow((OTHER,), other_visits, len(other_visitors)))
    return rows


def _follow(visit: list[PageViewEvent], visitor: str, question: JourneyQuestion, taken: dict) -> None:
    nodes: list[str] = []
    for view in visit:
        node = next((p for p in question.patterns if matches(p, view.path)), view.path)
        if not nodes or nodes[-1] != node:
            nodes.append(node)
    if question.page is None:
        anchor = 0 if question.direction == "next" else len(nodes) - 1
    elif question.page in nodes:
        anchor = nodes.index(question.page)
    else:
        return
    if question.direction == "next":
        steps = nodes[anchor : anchor + question.steps + 1]
    else:
        steps = nodes[max(0, anchor - question.steps) : anchor + 1]
    taken[tuple(steps)].append(visitor)


def backfilled_store(
    tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint, name: str, events: list
) -> Client:
    """A store of its own (`name`) holding `events` archived and DAY's sessions backfilled from them."""
    database = name.replace("-", "_")
    client = connect(own_database_settings(tmp_path_factory.mktemp(name), clickhouse_endpoint, database))
    rows, columns = archive_rows(events)
    client.insert("events", rows, column_names=columns)
    backfill_rollups(client, events[0].site, DAY.date(), DAY.date() + timedelta(days=1))
    return client


def test_the_expected_paths_are_written_out() -> None:
    events = known_visits("s", DAY)
    assert expected_journeys(events, "s", JourneyQuestion(page="/a", steps=2)) == [
        JourneyRow(("/a", "/", "/b"), 1, 1),
        JourneyRow(("/a", "/pricing"), 1, 1),
    ]
    grouped = JourneyQuestion(page="/blog/*", steps=2, patterns=("/blog/*",))
    assert expected_journeys(events, "s", grouped) == [
        JourneyRow(("/blog/*", "/", "/blog/*"), 1, 1),
        JourneyRow(("/blog/*", "/docs/1", "/pricing"), 1, 1),
    ]
    into_pricing = expected_journeys(
        events, "s", JourneyQuestion(page="/pricing", direction="previous", steps=2)
    )
    assert JourneyRow(("/", "/a", "/pricing"), 1, 1) in into_pricing
    assert JourneyRow(("/pricing",), 1, 1) in into_pricing  # the second visit of "twice" starts there


# --- agg == raw == the definition ----------------------------------------------------------


def answers(client: Client, q: StatsQuery, question: JourneyQuestion) -> tuple[list, list]:
    return journeys(client, q, question, "agg"), journeys(client, q, question, "raw")


def test_backfilled_sessions_journeys_agg_equals_raw_equals_the_definition(
    tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint
) -> None:
    site = "journeys.example.com"
    events = known_visits(site, DAY + timedelta(hours=10))
    client = backfilled_store(tmp_path_factory, clickhouse_endpoint, "journeys", events)
    stored = client.query(
        "SELECT journey FROM sessions FINAL WHERE site = {site:String} AND visitor_id = 'folded'",
        parameters={"site": site},
    ).result_rows
    assert stored == [(["/", "/a", "/", "/b"],)]
    q = StatsQuery(site, DAY, DAY + timedelta(days=1))
    for question in QUESTIONS:
        agg, raw = answers(client, q, question)
        expected = expected_journeys(events, site, question)
        assert expected, question
        assert agg == raw == expected, question
    folded = journeys(client, q, JourneyQuestion(page="/", steps=2, min_visitors=2))
    assert folded[-1].steps == (OTHER,) and folded[-1].visitors >= 2
    top = journeys(client, q, JourneyQuestion(steps=2, limit=3))
    every = journeys(client, q, JourneyQuestion(steps=2))
    assert [row.steps for row in top[:3]] == [row.steps for row in every[:3]]
    assert len(top) == 4 and top[-1].steps == (OTHER,)


def test_stream_jobs_journeys_agg_equals_raw_equals_the_definition(
    spark: SparkSession, stream_settings: Settings, running_queries: list[StreamingQuery]
) -> None:
    (site,) = site_names(1)
    start = minutes_ago(3 * 60)
    events = sorted(known_visits(site, start), key=lambda e: e.ts)
    running_queries.extend(start_queries(spark, stream_settings, [QUERY_NAME]))
    produce(stream_settings, events)
    client = connect(stream_settings)
    rows, columns = archive_rows(events)
    client.insert("events", rows, column_names=columns)
    q = StatsQuery(site, start - timedelta(hours=1), start + timedelta(hours=2))
    entries = JourneyQuestion(steps=5)
    expected = expected_journeys(events, site, entries)
    assert wait_for(lambda: journeys(client, q, entries, "agg"), expected) == expected
    for question in QUESTIONS:
        agg, raw = answers(client, q, question)
        assert agg == raw == expected_journeys(events, site, question), question


def test_visits_written_before_the_journey_column_are_answered_from_the_archive(
    tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint
) -> None:
    site = "journeys-old.example.com"
    events = known_visits(site, DAY + timedelta(hours=10))
    client = backfilled_store(tmp_path_factory, clickhouse_endpoint, "journeys-old", events)
    # As the jar before migration 0071 wrote them: every journey [] (a newer version of each)
    client.command(
        "INSERT INTO sessions SELECT * REPLACE ([] AS journey, batch_id + 1 AS batch_id) "
        "FROM sessions FINAL WHERE site = {site:String}",
        parameters={"site": site},
    )
    q = StatsQuery(site, DAY, DAY + timedelta(days=1))
    question = JourneyQuestion(page="/", steps=3)
    assert journeys(client, q, question, "agg") == expected_journeys(events, site, question)


# --- under filters on the visit's properties ------------------------------------------------

# Each visitor's properties on all its page views, and those of its first page view only (where it
# came from: later page views carry no referrer). "folded" moves from DE to AT after its entry: its
# visit's country is DE, its entry page view's. "twice" came from a newsletter on its first visit,
# directly on its second. Browser and OS names as the parser gave them (`Mac OS X` is Plausible's Mac).
ON_EVERY_VIEW = {
    "folded": {"country": "DE", "browser": "Chrome", "os": "Mac OS X", "device": "desktop",
               "screen_width": 1500, "language": "de"},
    "twice": {"country": "FR", "browser": "Safari", "os": "iOS", "device": "mobile", "screen_width": 390},
    "tie": {"country": "US", "browser": "Firefox", "os": "Android", "device": "mobile", "screen_width": 400},
    "reader": {"country": "US", "browser": "Chrome", "os": "Windows", "device": "desktop",
               "screen_width": 1200},
    "other-reader": {"country": "DE", "browser": "Chrome", "os": "Linux", "language": "en"},
    "long": {"country": "US", "device": "desktop"},
}  # fmt: skip
ON_ENTRY = {
    "folded": {"referrer_domain": "google.com"},
    "twice": {"utm_source": "newsletter", "utm_medium": "email", "utm_campaign": "launch"},
    "tie": {"referrer_domain": "example.org"},
    "reader": {"referrer_domain": "www.google.com", "utm_campaign": "launch", "utm_content": "banner",
               "utm_term": "analytics"},
}  # fmt: skip
SCREENS = (("Mobile", 576), ("Tablet", 992), ("Laptop", 1440))
# The channels of those sources (storage/channels.py's grouping, read by hand).
CHANNELS = {"google.com": "Organic Search", "www.google.com": "Organic Search", "example.org": "Referral"}


def with_properties(events: list[PageViewEvent]) -> list[PageViewEvent]:
    firsts = {}
    for event in sorted(events, key=lambda e: (e.ts, str(e.event_id))):
        firsts.setdefault(event.visitor_id, event.event_id)
    changed = []
    for event in events:
        fields = dict(ON_EVERY_VIEW.get(event.visitor_id, {}))
        if event.event_id == firsts[event.visitor_id]:
            fields |= ON_ENTRY.get(event.visitor_id, {})
        elif event.visitor_id == "folded":
            fields["country"] = "AT"
        changed.append(event.model_copy(update=fields))
    return changed


def properties(visit: Visit) -> dict[str, str]:
    """The visit's properties by the definition: its first page view's, the exit page its last's."""
    entry = visit[0]
    width = entry.screen_width  # Plausible's classes: Mobile < 576 px, Tablet < 992, Laptop < 1440
    screen = next((name for name, below in SCREENS if width < below), "Desktop") if width else ""
    medium = entry.utm_medium
    channel = "Email" if medium == "email" else CHANNELS.get(entry.referrer_domain, "Direct")
    return {
        "entry_path": entry.path, "exit_path": visit[-1].path, "referrer_domain": entry.referrer_domain,
        "utm_source": entry.utm_source, "utm_medium": medium, "utm_campaign": entry.utm_campaign,
        "utm_content": entry.utm_content, "utm_term": entry.utm_term, "country": entry.country,
        "device": entry.device, "browser": entry.browser, "os": {"Mac OS X": "Mac"}.get(entry.os, entry.os),
        "screen_size": screen, "language": entry.language, "channel": channel,
    }  # fmt: skip


def has(**wanted: str) -> Callable[[Visit], bool]:
    return lambda visit: all(properties(visit)[name] == value for name, value in wanted.items())


# (dict filters, expression, the visits passing them here)
FILTERED: list[tuple[dict[str, str], Expression | None, Callable[[Visit], bool]]] = [
    ({"referrer_domain": "google.com"}, None, has(referrer_domain="google.com")),
    ({"channel": "Organic Search"}, None, has(channel="Organic Search")),
    ({"channel": "Email"}, None, has(channel="Email")),  # "twice"'s first visit, not its second
    ({"utm_campaign": "launch", "utm_term": "analytics"}, None,
     has(utm_campaign="launch", utm_term="analytics")),
    ({"utm_source": "newsletter"}, None, has(utm_source="newsletter")),
    ({"entry_path": "/"}, None, has(entry_path="/")),
    ({"exit_path": "/pricing"}, None, has(exit_path="/pricing")),
    ({"country": "DE"}, None, has(country="DE")),
    ({"country": "AT"}, None, has(country="AT")),  # none: "folded" entered from DE
    ({"os": "Mac"}, None, has(os="Mac")),  # stored as Mac OS X
    ({"browser": "Chrome", "device": "desktop"}, None, has(browser="Chrome", device="desktop")),
    ({"screen_size": "Mobile"}, None, has(screen_size="Mobile")),
    ({"language": "de"}, None, has(language="de")),
    (
        {},
        Logic("or", (Condition("is", "country", ("FR",)),
                     Condition("contains", "referrer_domain", ("google",)))),
        lambda visit: has(country="FR")(visit) or "google" in properties(visit)["referrer_domain"],
    ),
    ({}, Condition("is_not", "channel", ("Direct",)), lambda visit: properties(visit)["channel"] != "Direct"),
    (
        {"country": "US"},
        Logic("not", (Condition("matches", "entry_path", ("^/blog/",)),)),
        lambda visit: has(country="US")(visit) and not properties(visit)["entry_path"].startswith("/blog/"),
    ),
    ({}, Condition("is", "os", ("Mac OS X",)), has(os="Mac")),  # an old name asked: Plausible's
]  # fmt: skip
FILTERED_QUESTIONS = (
    JourneyQuestion(steps=5),
    JourneyQuestion(page="/", steps=2),
    JourneyQuestion(page="/pricing", direction="previous", steps=3),
    JourneyQuestion(steps=3, patterns=("/blog/*",)),
)


@pytest.mark.slow  # 17 filters x 4 questions x 2 sources, a rule: 36-51 s on 2 shared cores (load 12)
def test_journeys_under_visit_filters_agg_equals_raw_equals_the_definition(
    tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint
) -> None:
    site = "journeys-filtered.example.com"
    events = with_properties(known_visits(site, DAY + timedelta(hours=10)))
    client = backfilled_store(tmp_path_factory, clickhouse_endpoint, "journeys-filtered", events)
    found = 0
    for filters, where, passes in FILTERED:
        q = StatsQuery(site, DAY, DAY + timedelta(days=1), filters=filters, where=where)
        for question in FILTERED_QUESTIONS:
            agg, raw = answers(client, q, question)
            expected = expected_journeys(events, site, question, passes)
            assert agg == raw == expected, (filters, where, question)
            found += bool(expected)
        everything = expected_journeys(events, site, JourneyQuestion(steps=5))
        if filters != {"country": "AT"}:  # each filter keeps some visits and drops others
            assert 0 < len(journeys(client, q, JourneyQuestion(steps=5))) < len(everything), filters
    assert found >= len(FILTERED) * 2
    # the site's own channel rules decide the channel filtered by, on both sources
    add_site(client, site)
    add_rule(client, site, make_rule("example.org", "Partners"))
    q = StatsQuery(site, DAY, DAY + timedelta(days=1), filters={"channel": "Partners"})
    expected = expected_journeys(events, site, JourneyQuestion(steps=5), has(referrer_domain="example.org"))
    assert expected and answers(client, q, JourneyQuestion(steps=5)) == (expected, expected)


@pytest.mark.parametrize(
    ("filters", "where", "named"),
    [
        ({"path": "/pricing"}, None, "path"),
        ({"goal": "Signup"}, None, "goal"),
        ({"props.plan": "pro"}, None, "props.plan"),
        ({"country": "DE"},
         Logic("or", (Condition("is", "country", ("DE",)), Condition("is", "path", ("/",)))), "path"),
        ({}, Condition("contains", "hostname", ("shop",)), "hostname"),
    ],
)  # fmt: skip
def test_a_filter_on_an_event_is_refused_naming_filters_and_it(
    filters: dict[str, str], where: Expression | None, named: str
) -> None:
    q = StatsQuery("journeys.example.com", DAY, DAY + timedelta(days=1), filters=filters, where=where)
    with pytest.raises(UnsupportedQuery) as refused:
        journeys(None, q, JourneyQuestion())  # type: ignore[arg-type]  # refused before the store is asked
    assert str(refused.value).startswith("filters: ") and repr(named) in str(refused.value)
    assert refused.value.field == "filters"
