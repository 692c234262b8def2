"""Goals, custom events, properties and revenue (issue 16): known answers on generated traffic,
and the `agg` source (migration 0022's materialized views on the archive) equal to `raw`.

Real ClickHouse engine (the session's endpoint). One day of traffic on a registered site:
10 visitors with a page view each; Signup events (one visitor twice) with a `plan` property;
Purchase events with revenue in the goal's currency, in another currency and without; page
views under /checkout/ and two near misses of the pattern; an engagement event (never a custom
event); the next day one returning visitor id (another visitor: a visitor is a (day, id)).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from clickhouse_connect.driver.client import Client

from archiver.rows import archive_row, insert_rows
from storage import goals as goal_store
from storage import queries
from storage.client import connect
from storage.queries import StatsQuery
from storage.schema import apply_migrations
from storage.sites import add_site
from storage.tables import SYNTHETIC_PARTITION
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.clickhouse import Endpoint
from tests.fixtures.events import PATHS, archive_rows, page_view

pytestmark = pytest.mark.integration

SITE = "goals.queries.example.com"
OTHER_SITE = "other.goals.queries.example.com"
RANDOM_SITE = "random.goals.queries.example.com"
RETRIED_SITE = "retried.goals.queries.example.com"
DAY = datetime(2026, 11, 12, tzinfo=UTC)


def at(minute: int, day: int = 0) -> datetime:
    return DAY + timedelta(days=day, hours=10, minutes=minute, seconds=7)


def event(visitor: str, name: str, minute: int, day: int = 0, **fields: object) -> PageViewEvent:
    return page_view(SITE, visitor, at(minute, day), name=name, **fields)


def known_traffic() -> list[PageViewEvent]:
    events = [page_view(SITE, f"v{i}", at(i), "/") for i in range(10)]
    events += [
        event("v0", "Signup", 1, props={"plan": "pro"}),
        event("v0", "Signup", 30, props={"plan": "pro"}),
        event("v1", "Signup", 2, props={"plan": "free"}),
        event("v2", "Signup", 3, props={"plan": "pro", "seats": "5"}),
        event("v3", "Purchase", 4, revenue_amount="10.5", revenue_currency="EUR"),
        event("v4", "Purchase", 5, revenue_amount="19.50", revenue_currency="EUR"),
        event("v4", "Purchase", 6, revenue_amount="5", revenue_currency="USD"),
        event("v5", "Purchase", 7),
        page_view(SITE, "v6", at(8), "/checkout/cart"),
        page_view(SITE, "v6", at(9), "/checkout/pay"),
        page_view(SITE, "v7", at(10), "/checkout/a/b"),
        page_view(SITE, "v8", at(11), "/checkout"),
        page_view(SITE, "v9", at(12), "/checkoutx/a"),
        event("v0", "engagement", 13, props={"sd": "80"}),
        # the next day: the same id is another visitor
        page_view(SITE, "v0", at(1, day=1), "/"),
        event("v0", "Signup", 2, day=1, props={"plan": "pro"}),
        page_view(OTHER_SITE, "v0", at(1), "/"),
        page_view(OTHER_SITE, "v0", at(2), "/", name="Signup", props={"plan": "pro"}),
    ]
    return events


def random_traffic(rng: random.Random) -> list[PageViewEvent]:
    """Varied traffic on RANDOM_SITE for agg = raw: page views and custom events over two days."""
    events = []
    for number in range(400):
        day, visitor = rng.randrange(2), f"r{number % 90}"
        moment = DAY + timedelta(days=day, hours=6, minutes=rng.randrange(600), seconds=rng.randrange(60))
        path = rng.choice([*PATHS, "/checkout/x", "/checkout/y/z"])
        events.append(page_view(RANDOM_SITE, visitor, moment, path))
        if rng.random() < 0.4:
            name = rng.choice(["Signup", "Purchase", "Download"])
            revenue = {}
            if name == "Purchase" and rng.random() < 0.8:
                amount, currency = f"{rng.randrange(1, 10000) / 100}", rng.choice(["EUR", "USD"])
                revenue = {"revenue_amount": amount, "revenue_currency": currency}
            props = {"plan": rng.choice(["pro", "free", "team"])} if rng.random() < 0.7 else {}
            events.append(page_view(RANDOM_SITE, visitor, moment, name=name, props=props, **revenue))
    return events


RANDOM = random_traffic(random.Random(16))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint) -> Iterator[Client]:
    settings = Settings(
        home=tmp_path_factory.mktemp("goals-home"),
        clickhouse_url=clickhouse_endpoint.url,
        clickhouse_password=clickhouse_endpoint.password,
    )
    apply_migrations(settings)
    client = connect(settings)
    for site in (SITE, RANDOM_SITE):
        add_site(client, site)
        for goal in (
            goal_store.make_goal(site, "Signup"),
            goal_store.make_goal(site, "Purchase", currency="eur"),
            goal_store.make_goal(site, page_pattern="/checkout/*"),
        ):
            goal_store.add_goal(client, goal)
    rows, columns = archive_rows(known_traffic() + RANDOM)
    client.insert("events", rows, column_names=columns)
    yield client


FIRST_DAY = (DAY, DAY + timedelta(days=1))
BOTH_DAYS = (DAY, DAY + timedelta(days=2))


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_goals_known_answers(store: Client, source: queries.Source) -> None:
    rows = {row.goal: row for row in queries.goals(store, StatsQuery(SITE, *FIRST_DAY), source)}
    signup, purchase, checkout = rows["Signup"], rows["Purchase"], rows["Visit /checkout/*"]
    assert (signup.events, signup.visitors, signup.conversion_rate) == (4, 3, 0.3)
    assert (purchase.events, purchase.visitors, purchase.conversion_rate) == (4, 3, 0.3)
    # only the EUR amounts count towards the EUR goal
    assert (purchase.currency, purchase.revenue_total, purchase.revenue_events) == ("EUR", Decimal("30"), 2)
    assert purchase.revenue_average == Decimal(15)
    # /checkout/cart, /checkout/pay (one visitor), /checkout/a/b; not /checkout nor /checkoutx/a
    assert (checkout.events, checkout.visitors, checkout.conversion_rate) == (3, 2, 0.2)
    assert (signup.revenue_total, signup.currency) == (Decimal(0), "")
    # over both days v0 of the second day is another visitor: 11 visitors, 4 converted on Signup
    both = {row.goal: row for row in queries.goals(store, StatsQuery(SITE, *BOTH_DAYS), source)}
    assert (both["Signup"].events, both["Signup"].visitors, both["Signup"].conversion_rate) == (5, 4, 0.3636)


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_custom_events_and_properties_known_answers(store: Client, source: queries.Source) -> None:
    q = StatsQuery(SITE, *FIRST_DAY)
    assert queries.custom_events(store, q, 10, source) == [
        queries.EventRow("Purchase", 4, 3),
        queries.EventRow("Signup", 4, 3),
    ]  # no engagement event, no page view
    assert queries.properties(store, q, "plan", source=source) == [
        queries.EventRow("pro", 3, 2),
        queries.EventRow("free", 1, 1),
    ]
    assert queries.properties(store, q, "plan", goal="Signup", source=source) == [
        queries.EventRow("pro", 3, 2),
        queries.EventRow("free", 1, 1),
    ]
    assert queries.properties(store, q, "plan", goal="Purchase", source=source) == []
    assert queries.properties(store, q, "seats", source=source) == [queries.EventRow("5", 1, 1)]
    assert queries.properties(store, q, "sd", source=source) == []  # engagement events' keys
    assert queries.property_keys(store, q, 10, source) == ["plan", "seats"]
    # A site's custom properties (storage/custom_properties.py): only those, of the keys sent.
    assert queries.property_keys(store, q, 10, source, only=["seats", "never-sent"]) == ["seats"]


RANGES = {
    "both days": BOTH_DAYS,
    "first day": FIRST_DAY,
    "an afternoon": (DAY + timedelta(hours=12, minutes=17), DAY + timedelta(days=1, hours=3)),
    "one minute": (DAY + timedelta(hours=9, minutes=3), DAY + timedelta(hours=9, minutes=4)),
}


def reports(client: Client, q: StatsQuery, source: queries.Source) -> dict[str, object]:
    return {
        "goals": queries.goals(client, q, source),
        "custom events": queries.custom_events(client, q, 100, source),
        "plan": queries.properties(client, q, "plan", source=source),
        "plan of Signup": queries.properties(client, q, "plan", goal="Signup", source=source),
        "keys": queries.property_keys(client, q, 10, source),
    }


@pytest.mark.parametrize("name", list(RANGES))
def test_agg_equals_raw_and_an_independent_count(store: Client, name: str) -> None:
    q = StatsQuery(RANDOM_SITE, *RANGES[name])
    raw, agg = reports(store, q, "raw"), reports(store, q, "agg")
    assert agg == raw
    expected = independent_goal_numbers(RANDOM, q)
    for row in raw["goals"]:
        found = (row.events, row.visitors, row.revenue_total, row.revenue_events)
        assert found == expected[row.goal], row.goal
        site_visitors = expected["site visitors"]
        assert row.conversion_rate == (round(row.visitors / site_visitors, 4) if site_visitors else 0.0)


def independent_goal_numbers(events: list[PageViewEvent], q: StatsQuery) -> dict:
    """The goals' numbers computed in Python from the events (no ClickHouse)."""
    from storage.page_patterns import matches

    chosen = [e for e in events if e.site == q.site and q.start <= e.ts < q.end]
    goals = {
        "Signup": lambda e: e.name == "Signup",
        "Purchase": lambda e: e.name == "Purchase",
        "Visit /checkout/*": lambda e: e.name == "pageview" and matches("/checkout/*", e.path),
    }
    found: dict = {
        "site visitors": len({(e.ts.date(), e.visitor_id) for e in chosen if e.name == "pageview"})
    }
    for name, test in goals.items():
        hits = [e for e in chosen if test(e)]
        paid = [e for e in hits if name == "Purchase" and e.revenue_currency == "EUR"]
        found[name] = (
            len(hits),
            len({(e.ts.date(), e.visitor_id) for e in hits}),
            sum((Decimal(e.revenue_amount) for e in paid), Decimal(0)),
            len(paid),
        )
    return found


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_goal_and_property_filters_restrict_every_report(store: Client, source: queries.Source) -> None:
    signed_up = StatsQuery(SITE, *FIRST_DAY, filters={"goal": "Signup"})
    # v0, v1, v2 converted on Signup: their page views, and all their events
    assert queries.aggregate(store, signed_up, source)["visitors"] == 3
    assert queries.aggregate(store, signed_up, source)["pageviews"] == 3
    assert queries.breakdown(store, signed_up, "path", 10, source) == [queries.BreakdownRow("/", 3, 3)]
    rows = {row.goal: row for row in queries.goals(store, signed_up, source)}
    assert (rows["Signup"].visitors, rows["Signup"].conversion_rate) == (3, 1.0)
    assert rows["Purchase"].visitors == 0
    pro = StatsQuery(SITE, *FIRST_DAY, filters={"props.plan": "pro"})
    assert queries.custom_events(store, pro, 10, source) == [queries.EventRow("Signup", 3, 2)]
    assert queries.aggregate(store, pro, source)["pageviews"] == 0  # page views carry no plan
    both = StatsQuery(SITE, *FIRST_DAY, filters={"goal": "Signup", "props.plan": "free"})
    assert queries.properties(store, both, "plan", source=source) == [queries.EventRow("free", 1, 1)]


@pytest.mark.parametrize(
    ("filters", "named"),
    [
        ({"goal": "Nothing"}, "has no goal 'Nothing'"),
        ({"props.": "x"}, "cannot filter by ['props.']"),
        ({"plan": "pro"}, "cannot filter by ['plan']"),
    ],
)
def test_bad_filters_are_named(store: Client, filters: dict[str, str], named: str) -> None:
    with pytest.raises(queries.UnsupportedQuery, match=re.escape(named)):
        queries.aggregate(store, StatsQuery(SITE, *FIRST_DAY, filters=filters))


def test_property_breakdown_of_an_unknown_goal_is_refused(store: Client) -> None:
    with pytest.raises(queries.UnsupportedQuery, match=r"goal: .*has no goal 'Nothing'"):
        queries.properties(store, StatsQuery(SITE, *FIRST_DAY), "plan", goal="Nothing")


def test_the_migration_backfills_what_the_archive_already_holds(
    tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint
) -> None:
    """An archive from before migration 0022: applying it fills the aggregates from `events`."""
    settings = Settings(
        home=tmp_path_factory.mktemp("goals-backfill-home"),
        clickhouse_url=clickhouse_endpoint.url,
        clickhouse_password=clickhouse_endpoint.password,
        clickhouse_database="goals_backfill",
    )
    apply_migrations(settings)
    client = connect(settings)
    add_site(client, RANDOM_SITE)
    goal_store.add_goal(client, goal_store.make_goal(RANDOM_SITE, "Signup"))
    goal_store.add_goal(client, goal_store.make_goal(RANDOM_SITE, page_pattern="/checkout/*"))
    rows, columns = archive_rows(RANDOM)
    client.insert("events", rows, column_names=columns)
    # As if the events had been archived before 0022 existed: its aggregates empty, it unapplied.
    for table in ("goal_events_from_events", "goal_props_from_events"):
        client.command(f"DROP VIEW {table}")
    for table in ("goal_events_minute", "goal_props_minute"):
        client.command(f"TRUNCATE TABLE {table}")
    client.command("DELETE FROM schema_migrations WHERE version = '0022_goals'")
    assert apply_migrations(settings) == ["0022_goals"]
    q = StatsQuery(RANDOM_SITE, *BOTH_DAYS)
    assert reports(client, q, "agg") == reports(client, q, "raw")
    assert queries.goals(client, q, "agg")[0].events > 0


@pytest.fixture(scope="module")
def retried_batches(store: Client) -> str:
    """Two batches whose Signup rows aggregate to identical blocks (same visitor, minute, path:
    only the event ids differ), and the archiver's retry of the second (same deduplication
    token: its first try landed, its answer was lost)."""
    add_site(store, RETRIED_SITE)
    goal_store.add_goal(store, goal_store.make_goal(RETRIED_SITE, "Signup"))
    first, second = (
        page_view(RETRIED_SITE, "r", at(1), name="Signup", props={"plan": "pro"}) for _ in range(2)
    )
    insert_rows(store, [archive_row(first, SYNTHETIC_PARTITION, 0)], deduplication_token="goals-batch-1")
    for _ in range(2):
        insert_rows(store, [archive_row(second, SYNTHETIC_PARTITION, 1)], deduplication_token="goals-batch-2")
    return RETRIED_SITE


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_a_retried_archive_insert_counts_once_and_identical_batches_both(
    store: Client, retried_batches: str, source: queries.Source
) -> None:
    q = StatsQuery(retried_batches, *FIRST_DAY)
    (signup,) = queries.goals(store, q, source)
    assert (signup.events, signup.visitors) == (2, 1)
    (pro,) = queries.properties(store, q, "plan", source=source)
    assert (pro.value, pro.events, pro.visitors) == ("pro", 2, 1)
