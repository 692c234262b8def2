"""Funnels from the archive (storage.queries.funnel) on the real ClickHouse engine, checked
against an independent computation here: plain Python over the same events — sessionise
each visitor's events, fold each session over the steps — on hand-built cases with known
answers and on generated traffic."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest
from clickhouse_connect.driver.client import Client

from storage import goals as goal_store
from storage import queries
from storage.client import connect
from storage.queries import FunnelStep, StatsQuery
from storage.sites import add_site
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.events import archive_rows, page_view
from tests.fixtures.funnel_truth import expected_funnel

pytestmark = pytest.mark.integration

SITE = "funnels.example.com"
GENERATED_SITE = "funnels-generated.example.com"
DAY = datetime(2026, 11, 10, tzinfo=UTC)
T0 = DAY + timedelta(hours=9)
GAP = timedelta(seconds=queries.SESSION_GAP_S)

PRODUCT, SIGNUP, THANKS = (
    FunnelStep("page", "/product/*"),
    FunnelStep("event", "Signup"),
    FunnelStep("page", "/thanks"),
)
CHECKOUT = [PRODUCT, SIGNUP, THANKS]


def view(visitor: str, at: datetime, path: str, **fields: object) -> PageViewEvent:
    return page_view(SITE, visitor, at, path, **fields)


def custom(visitor: str, at: datetime, name: str, **fields: object) -> PageViewEvent:
    return page_view(SITE, visitor, at, "/", name=name, **fields)


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)


LATE = DAY + timedelta(hours=23, minutes=50)
# Two events in the same millisecond are ordered by event_id (as text): these ids decide it.
FIRST_ID, SECOND_ID = UUID(int=1), UUID(int=2)

EVENTS = [
    # all three steps, in order, from Germany
    view("done", T0, "/product/a", country="DE"),
    custom("done", T0 + minutes(5), "Signup"),
    view("done", T0 + minutes(6), "/thanks"),
    # out of order: the sign-up before the product page counts for nothing
    custom("backwards", T0, "Signup"),
    view("backwards", T0 + minutes(1), "/product/a"),
    # repeated steps: two product pages, then the sign-up
    view("repeat", T0, "/product/a"),
    view("repeat", T0 + minutes(1), "/product/b"),
    view("repeat", T0 + minutes(2), "/product/a"),
    custom("repeat", T0 + minutes(3), "Signup"),
    # split by the gap: the sign-up 31 minutes later is another session (which has no step 1)
    view("split", T0, "/product/a"),
    custom("split", T0 + GAP + minutes(1), "Signup"),
    # exactly the gap continues the session
    view("edge", T0, "/product/a"),
    custom("edge", T0 + GAP, "Signup"),
    # engagement events are not part of a session: they do not bridge the gap
    view("engaged", T0, "/product/a"),
    custom("engaged", T0 + minutes(20), "engagement"),
    custom("engaged", T0 + minutes(40), "Signup"),
    # a custom event does bridge it
    view("bridged", T0, "/product/a"),
    custom("bridged", T0 + minutes(20), "Scroll"),
    custom("bridged", T0 + minutes(40), "Signup"),
    # across midnight: the session starts on DAY and counts there, reaching /thanks the next day
    view("night", LATE, "/product/a"),
    custom("night", LATE + minutes(15), "Signup"),
    view("night", LATE + minutes(25), "/thanks"),
    # the same millisecond: ordered by event_id, the sign-up (lower id) comes first
    custom("tie", T0, "Signup", event_id=FIRST_ID),
    view("tie", T0, "/product/a", event_id=SECOND_ID),
    # a page view of /thanks without the product page: no step 1, no later step
    view("thanks-only", T0, "/thanks"),
    # a page step is a page view: a custom event sent from /product/x does not match it
    page_view(SITE, "event-on-product", T0, "/product/x", name="Click"),
]


@pytest.fixture(scope="module")
def archive(dashboard_settings: Settings) -> Client:
    client = connect(dashboard_settings)
    rows, columns = archive_rows([*EVENTS, *GENERATED])
    client.insert("events", rows, column_names=columns)
    return client


def day_query(site: str = SITE, days: int = 1, **filters: str) -> StatsQuery:
    return StatsQuery(site, DAY, DAY + timedelta(days=days), filters=filters)


def answered(
    client: Client, q: StatsQuery, steps: Sequence[FunnelStep], source: queries.Source = "raw"
) -> list[tuple[int, int]]:
    return [(row.visitors, row.sessions) for row in queries.funnel(client, q, steps, source=source).steps]


# --- known answers -----------------------------------------------------------------------------


def test_checkout_funnel_counts_each_case_as_defined(archive: Client) -> None:
    report = queries.funnel(archive, day_query(), CHECKOUT)
    # step 1: done, backwards, repeat, split, edge, engaged, bridged, night, tie (9 sessions);
    # step 2: done, repeat, edge, bridged, night (not backwards, split, engaged, tie);
    # step 3: done, night.
    assert [(row.visitors, row.sessions) for row in report.steps] == [(9, 9), (5, 5), (2, 2)]
    assert [(row.dropoff, row.dropoff_rate, row.conversion_rate) for row in report.steps] == [
        (0, 0.0, 1.0),
        (4, round(4 / 9, 4), round(5 / 9, 4)),
        (3, 0.6, round(2 / 9, 4)),
    ]
    assert report.source == "raw"
    assert answered(archive, day_query(), CHECKOUT) == expected_funnel(EVENTS, day_query(), CHECKOUT)


def test_an_event_matching_two_steps_advances_one_at_a_time(archive: Client) -> None:
    twice = [PRODUCT, PRODUCT]
    # two product page views reach step 2 (repeat, done has one, backwards one, …)
    assert answered(archive, day_query(), twice) == expected_funnel(EVENTS, day_query(), twice)
    assert answered(archive, day_query(), twice)[1] == (1, 1)  # only "repeat" viewed two


def test_session_crossing_midnight_counts_on_the_day_it_starts(archive: Client) -> None:
    next_day = StatsQuery(SITE, DAY + timedelta(days=1), DAY + timedelta(days=2))
    assert answered(archive, next_day, CHECKOUT) == [(0, 0), (0, 0), (0, 0)]
    evening = StatsQuery(SITE, LATE, DAY + timedelta(days=1))
    assert answered(archive, evening, CHECKOUT) == [(1, 1), (1, 1), (1, 1)]


def test_filters_keep_sessions_with_a_matching_page_view(archive: Client) -> None:
    assert answered(archive, day_query(country="DE"), CHECKOUT) == [(1, 1), (1, 1), (1, 1)]
    only_thanks = day_query(path="/thanks")  # sessions that saw /thanks: done, night, thanks-only
    assert answered(archive, only_thanks, CHECKOUT) == expected_funnel(EVENTS, only_thanks, CHECKOUT)
    assert answered(archive, only_thanks, CHECKOUT) == [(2, 2), (2, 2), (2, 2)]


def test_a_goal_filter_keeps_the_sessions_of_converted_visitors(archive: Client) -> None:
    """The dashboard's goal filter reaches the Funnel tab too: sessions with a page view of a
    visitor who converted on the goal. Every session reaching /thanks is one of those."""
    add_site(archive, SITE)
    if "Visit /thanks" not in {goal.name for goal in goal_store.list_goals(archive, SITE)}:
        goal_store.add_goal(archive, goal_store.make_goal(SITE, page_pattern="/thanks"))
    # two days: the night session reaches /thanks after midnight, and a conversion counts in range
    converted = answered(archive, day_query(days=2, goal="Visit /thanks"), CHECKOUT)
    everyone = answered(archive, day_query(days=2), CHECKOUT)
    assert converted[2] == everyone[2] and converted[2][0] > 0
    assert all(mine <= all_ for mine, all_ in zip(converted, everyone, strict=True))


def test_empty_range_reaches_nothing(archive: Client) -> None:
    q = StatsQuery(SITE, DAY - timedelta(days=30), DAY - timedelta(days=29))
    report = queries.funnel(archive, q, CHECKOUT)
    assert [(r.visitors, r.sessions, r.dropoff, r.dropoff_rate, r.conversion_rate) for r in report.steps] == [
        (0, 0, 0, 0.0, 0.0)
    ] * 3


def test_agg_answers_funnels_from_the_stored_days(archive: Client) -> None:
    report = queries.funnel(archive, day_query(), CHECKOUT, source="agg")
    assert report.source == "agg"
    assert [(r.visitors, r.sessions) for r in report.steps] == [(9, 9), (5, 5), (2, 2)]
    again = queries.funnel(archive, day_query(), CHECKOUT, source="agg")
    assert again.days.stored_days == 1 and again.days.computed_days == 0
    assert again.steps == report.steps


def test_patterns_and_names_are_parameters_not_sql(archive: Client) -> None:
    hostile = [FunnelStep("page", "/product/' OR 1=1 --*"), FunnelStep("event", "x') OR ('1'='1")]
    assert answered(archive, day_query(), hostile) == [(0, 0), (0, 0)]


@pytest.mark.parametrize(
    ("steps", "problem"),
    [
        ([PRODUCT], "2 to 8 steps"),
        ([PRODUCT] * 9, "2 to 8 steps"),
        ([PRODUCT, FunnelStep("page", "  ")], "step 2: empty page"),
        ([PRODUCT, FunnelStep("page", "product")], "step 2: a page pattern starts with /"),
        ([PRODUCT, FunnelStep("event", "x" * 121)], "step 2: an event name has at most 120"),
        ([PRODUCT, FunnelStep("event", "engagement")], "step 2: 'engagement' is no custom event"),
        ([PRODUCT, FunnelStep("event", "pageview")], "step 2: 'pageview' is no custom event"),
        ([PRODUCT, FunnelStep("goal", "x")], "step 2: a step is a page or an event"),  # type: ignore[arg-type]
    ],
)
def test_bad_steps_are_refused_naming_the_step(
    archive: Client, steps: list[FunnelStep], problem: str
) -> None:
    with pytest.raises(queries.UnsupportedQuery, match=problem):
        queries.funnel(archive, day_query(), steps)


# --- generated traffic ---------------------------------------------------------------------------

PAGES = ["/", "/pricing", "/product/a", "/product/b", "/product/c/reviews", "/cart", "/checkout", "/thanks"]
NAMES = ["Signup", "AddToCart", "Purchase", "engagement"]
COUNTRIES = ["DE", "US", "FR"]


def generated_traffic(seed: int = 16, visitors: int = 300) -> list[PageViewEvent]:
    """Three days of visitors with one to three visits each, pages and custom events mixed,
    gaps from seconds to over the session gap, some sessions running past midnight and some
    events in the same millisecond."""
    rng = random.Random(seed)
    events = []
    for index in range(visitors):
        visitor = f"g{index}"
        country = rng.choice(COUNTRIES)
        at = DAY - timedelta(hours=2) + timedelta(minutes=rng.uniform(0, 3 * 24 * 60))
        for _ in range(rng.randint(1, 30)):
            if rng.random() < 0.65:
                event = page_view(GENERATED_SITE, visitor, at, rng.choice(PAGES), country=country)
            else:
                event = page_view(GENERATED_SITE, visitor, at, rng.choice(PAGES), name=rng.choice(NAMES))
            events.append(event)
            at += rng.choice(
                [timedelta(0), timedelta(seconds=rng.uniform(1, 600)), GAP, GAP + minutes(rng.uniform(0, 90))]
            )
    return events


GENERATED = generated_traffic()


def page(pattern: str) -> FunnelStep:
    return FunnelStep("page", pattern)


def event(name: str) -> FunnelStep:
    return FunnelStep("event", name)


FUNNELS = [
    [page("/product/*"), page("/cart"), page("/checkout"), event("Purchase")],
    [page("/*"), page("/product/*"), page("/product/*"), event("AddToCart")],
    [event("Signup"), page("/pricing")],
    [page("/product/*/reviews"), event("AddToCart"), event("AddToCart"), page("/cart"),
     page("/checkout"), event("Purchase"), page("/thanks"), page("/")],
]  # fmt: skip


@pytest.mark.parametrize("steps", FUNNELS, ids=["checkout", "repeated", "event-first", "eight-steps"])
@pytest.mark.parametrize(
    "q",
    [
        day_query(GENERATED_SITE),
        day_query(GENERATED_SITE, days=3),
        day_query(GENERATED_SITE, days=3, country="DE"),
        day_query(GENERATED_SITE, days=2, country="US", path="/pricing"),
        StatsQuery(GENERATED_SITE, DAY + timedelta(hours=13, minutes=7), DAY + timedelta(days=1, hours=2)),
        # a site in Berlin: its days start at 23:00 UTC, so every range has two mid-day edges
        StatsQuery(GENERATED_SITE, DAY - timedelta(hours=1), DAY + timedelta(days=2, hours=-1)),
    ],
    ids=["one-day", "three-days", "filtered", "two-filters", "odd-hours", "berlin-days"],
)
@pytest.mark.parametrize("source", ["raw", "agg"])
def test_generated_traffic_matches_the_independent_computation(
    archive: Client, steps: list[FunnelStep], q: StatsQuery, source: queries.Source
) -> None:
    expected = expected_funnel(GENERATED, q, steps)
    assert expected[0][0] > 0 or q.filters  # the traffic reaches the funnel at all
    assert answered(archive, q, steps, source) == expected
    assert answered(archive, q, steps, source) == expected  # agg: from the days stored just now
