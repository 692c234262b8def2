"""The stats engine's archive compiler (stats/raw_sql.py) against the real ClickHouse engine:
known answers for each formerly refused combination, and a property test drawing metrics x
dimensions (up to two) x filters from the catalogue over generated traffic, each answer equal to
an independent Python count (tests/fixtures/stats_reference.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from clickhouse_connect.driver.client import Client

from stats import raw_sql
from stats.query import Behaviour, Condition, Filter, InvalidQuery, Logic, Query
from storage.client import connect
from tally.settings import Settings
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

SITE = "stats-engine.example.com"
DAY = datetime(2026, 11, 10, tzinfo=UTC)
RANGE = (DAY, DAY + timedelta(days=1))


def at(hours: float) -> datetime:
    return DAY + timedelta(hours=hours)


M = timedelta(minutes=1)
# twitter: / then /pricing 2 min later (one visit of 120 s, no bounce); google: a one-page
# /pricing visit (a bounce); direct: / only, then a Signup (props plan=pro) and PRICING in capitals.
TW = {"referrer_domain": "twitter.com", "country": "DE", "screen_width": 390}
US = {"country": "US", "screen_width": 1920}
KNOWN = [
    page_view(SITE, "tw", at(9), "/", **TW),
    page_view(SITE, "tw", at(9) + 2 * M, "/pricing", **TW),
    page_view(SITE, "go", at(10), "/pricing", **{**US, "referrer_domain": "google.com"}),
    page_view(SITE, "di", at(11), "/", **US),
    page_view(SITE, "di", at(11) + M, "/", name="Signup", props={"plan": "pro"}, **US),
    page_view(SITE, "di", at(11) + 3 * M, "/PRICING/Plans", **US),
]


@pytest.fixture(scope="module")
def store(dashboard_settings: Settings) -> Client:
    client = connect(dashboard_settings)
    rows, columns = archive_rows(KNOWN)
    client.insert("events", rows, column_names=columns)
    return client


def ask(
    client: Client,
    metrics: tuple[str, ...],
    dimensions: tuple[str, ...] = (),
    filters: Filter | None = None,
    site: str = SITE,
    span: tuple[datetime, datetime] = RANGE,
) -> dict[tuple, dict[str, object]]:
    query = Query(site, *span, metrics, dimensions, filters)
    return {row.dimensions: row.metrics for row in raw_sql.answer(client, query)}


def test_visit_source_by_page_counts_each_visits_pages(store: Client) -> None:
    answer = ask(store, ("visitors", "pageviews"), ("visit:source", "event:page"))
    assert answer == {
        ("twitter.com", "/"): {"visitors": 1, "pageviews": 1},
        ("twitter.com", "/pricing"): {"visitors": 1, "pageviews": 1},
        ("google.com", "/pricing"): {"visitors": 1, "pageviews": 1},
        ("", "/"): {"visitors": 1, "pageviews": 1},
        ("", "/PRICING/Plans"): {"visitors": 1, "pageviews": 1},
    }


def test_bounce_rate_by_page_is_of_the_whole_visits_that_viewed_it(store: Client) -> None:
    answer = ask(store, ("visits", "bounce_rate", "visit_duration", "views_per_visit"), ("event:page",))
    assert answer[("/pricing",)] == {
        "visits": 2,
        "bounce_rate": 50,
        "visit_duration": 60,
        "views_per_visit": 1.5,
    }
    assert answer[("/",)] == {"visits": 2, "bounce_rate": 0, "visit_duration": 150, "views_per_visit": 2.0}


def test_visit_metrics_under_a_page_filter_are_the_whole_visits(store: Client) -> None:
    pricing = Condition("is", "event:page", ("/pricing",))
    answer = ask(store, ("visits", "bounce_rate", "visit_duration", "pageviews", "visitors"), (), pricing)
    assert answer == {
        (): {"visits": 2, "bounce_rate": 50, "visit_duration": 60, "pageviews": 2, "visitors": 2}
    }
    by_source = ask(store, ("visits",), ("visit:source",), pricing)
    assert by_source == {("twitter.com",): {"visits": 1}, ("google.com",): {"visits": 1}}


def test_day_by_country(store: Client) -> None:
    answer = ask(store, ("visitors", "visits"), ("time:day", "visit:country"))
    assert answer == {(DAY, "DE"): {"visitors": 1, "visits": 1}, (DAY, "US"): {"visitors": 2, "visits": 2}}


def test_has_done_keeps_the_visitors_who_did_the_event(store: Client) -> None:
    signed_up = Behaviour("has_done", Condition("is", "event:name", ("Signup",)))
    assert ask(store, ("visitors", "pageviews"), (), signed_up) == {(): {"visitors": 1, "pageviews": 2}}
    not_signed_up = Behaviour("has_not_done", Condition("is", "event:name", ("Signup",)))
    assert ask(store, ("visitors", "pageviews"), (), not_signed_up) == {(): {"visitors": 2, "pageviews": 3}}


def test_case_insensitive_contains_and_matches(store: Client) -> None:
    sensitive = Condition("contains", "event:page", ("PRICING",))
    insensitive = Condition("contains", "event:page", ("PRICING",), case_sensitive=False)
    assert ask(store, ("pageviews",), (), sensitive) == {(): {"pageviews": 1}}
    assert ask(store, ("pageviews",), (), insensitive) == {(): {"pageviews": 3}}
    regex = Condition("matches", "event:page", ("^/pricing",), case_sensitive=False)
    assert ask(store, ("pageviews",), (), regex) == {(): {"pageviews": 3}}


def test_matches_wildcard_is_plausibles_glob(store: Client) -> None:
    glob = Condition("matches_wildcard", "event:page", ("/PRICING/*",))
    assert ask(store, ("pageviews",), (), glob) == {(): {"pageviews": 1}}
    either = Condition("matches_wildcard", "event:page", ("/|/pricing",))
    assert ask(store, ("pageviews",), (), either) == {(): {"pageviews": 4}}
    not_glob = Condition("matches_wildcard_not", "event:page", ("/*",))
    assert ask(store, ("pageviews",), (), not_glob) == {}


def test_visit_property_inside_or_and_not(store: Client) -> None:
    either = Logic(
        "or", (Condition("is", "visit:source", ("twitter.com",)), Condition("is", "visit:country", ("US",)))
    )
    assert ask(store, ("visitors",), (), either) == {(): {"visitors": 3}}
    neither = Logic("not", (Condition("is", "visit:source", ("twitter.com",)),))
    assert ask(store, ("visitors", "visits"), (), neither) == {(): {"visitors": 2, "visits": 2}}


def test_percentage_and_exit_rate(store: Client) -> None:
    shares = ask(store, ("visitors", "percentage"), ("visit:source",))
    assert shares == {
        ("twitter.com",): {"visitors": 1, "percentage": 33.3},
        ("google.com",): {"visitors": 1, "percentage": 33.3},
        ("",): {"visitors": 1, "percentage": 33.3},
    }
    exits = ask(store, ("pageviews", "exit_rate"), ("event:page",))
    assert exits == {
        ("/",): {"pageviews": 2, "exit_rate": 0.0},
        ("/pricing",): {"pageviews": 2, "exit_rate": 100.0},
        ("/PRICING/Plans",): {"pageviews": 1, "exit_rate": 100.0},
    }
    assert ask(store, ("exit_rate",), ("visit:exit_page",))[("/pricing",)] == {"exit_rate": 100.0}


def test_errors_name_the_field(store: Client) -> None:
    with pytest.raises(InvalidQuery, match=r"^metrics\[1\]: unknown metric 'foo'$"):
        ask(store, ("visitors", "foo"))
    with pytest.raises(InvalidQuery, match=r"^dimensions\[0\]: unknown dimension 'event:nope'$"):
        ask(store, ("visitors",), ("event:nope",))
    with pytest.raises(InvalidQuery, match=r"^metrics\[0\]: exit_rate needs"):
        ask(store, ("exit_rate",), ("visit:source",))
