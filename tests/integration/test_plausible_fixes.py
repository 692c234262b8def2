"""Wrong answers found by asking Tally what Plausible's own API tests ask (issue 31), each through
the real HTTP doors (`POST /api/v2/query`, Plausible's v1 parameters on `/api/v1/stats/*`)
against the real ClickHouse engine, on both sources where the report has two.

Plausible's behaviour, from its source (plausible/analytics):
- lib/plausible/stats/sql/special_metrics.ex: conversion_rate = converted visitors / the visitors
  of the same query without its goal and top-level `event:props` filters;
- lib/plausible/stats/filters/legacy_stats_api_filter_parser.ex: v1 values split on `|` unless
  escaped (`\\|` is a `|`), `event:goal` values are goal names (never patterns);
- lib/plausible/stats/sql/where_builder.ex: a property `is (none)` is "the event does not carry it";
- lib/plausible/stats/legacy/breakdown.ex: a v1 breakdown by `visit:utm_*` (entry/exit page,
  country) leaves out the value that means none;
- lib/plausible/stats/query_builder.ex: `{:last_n_days, n}` is the n days before the
  reference date (`date`, else today), that day left out;
- lib/plausible/stats/api_query_parser.ex and query_builder.ex: v2's "Nd" (1..5000) is
  {:last_n_days, N}, "Nmo" (1..100) {:last_n_months, N}: the N whole months before the reference
  date's month; anything else `Invalid date_range "…"`; views_per_visit with a filter on
  `event:page` is refused ("Metric `views_per_visit` cannot be queried with a filter on `event:page`.");
- lib/plausible/stats/sql/expression.ex and where_builder.ex: a blank `visit:source` is shown as
  "Direct / None", a blank UTM as "(not set)", and an `is` / `is_not` filter with those names
  matches the blank value;
- lib/plausible/ingestion/event.ex: browser and OS names (UAInspector's, mobile variants merged):
  `Mac`, `GNU/Linux`, `Safari` (for Mobile Safari), `Chrome` (for Chrome Mobile).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage import goals as goal_store
from storage.rollup_backfill import backfill_rollups
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.archive import stored_site
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

SITE = "plausible-fixes.example.com"
DAY = datetime(2026, 11, 10, tzinfo=UTC)  # a Tuesday
NOW = DAY + timedelta(days=2, hours=12)  # the API's clock: today is 2026-11-12
ONE_DAY = ["2026-11-10", "2026-11-10"]
V1_DAY = {"site_id": SITE, "period": "custom", "date": "2026-11-10,2026-11-10"}
SOURCES = ["raw", "agg"]


def at(hours: float) -> datetime:
    return DAY + timedelta(hours=hours)


# m: stored before the collector named clients Plausible's way (the archive holds these names);
# n: stored since; w: Windows from a newsletter; x: GNU/Linux (stored as the parser's "Linux").
OLD_MAC = {"browser": "Mobile Safari", "os": "Mac OS X", "country": "DE"}
NEW_MAC = {"browser": "Safari", "os": "Mac", "country": "DE"}
WINDOWS = {"browser": "Chrome", "os": "Windows", "country": "CH"}
LINUX = {"browser": "Firefox", "os": "Linux", "country": "CH"}
EVENTS = [
    page_view(SITE, "m", at(9), "/blog/x/y", **OLD_MAC),
    page_view(SITE, "m", at(9.1), "/pricing", **OLD_MAC),
    page_view(SITE, "n", at(10), "/", **NEW_MAC),
    page_view(SITE, "n", at(10.05), "/", name="Share", props={"tag": "a|b"}, **NEW_MAC),
    page_view(SITE, "w", at(11), "/", utm_source="newsletter", **WINDOWS),
    page_view(SITE, "w", at(11.05), "/", name="Signup", props={"plan": "pro"}, **WINDOWS),
    page_view(SITE, "x", at(12), "/blog", **LINUX),
    page_view(SITE, "x", at(12.05), "/blog", name="Signup", **LINUX),  # no plan
    page_view(SITE, "y", at(34), "/", **WINDOWS),  # the next day, 2026-11-11
]  # fmt: skip


@pytest.fixture(scope="module")
def store(dashboard_settings: Settings) -> Client:
    client = stored_site(
        dashboard_settings, SITE, EVENTS, (DAY - timedelta(days=1)).date(), (DAY + timedelta(days=3)).date()
    )
    goal_store.add_goal(client, goal_store.make_goal(SITE, "Signup"))
    goal_store.add_goal(client, goal_store.make_goal(SITE, page_pattern="/blog**"))
    return client


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings, store: Client) -> FlaskClient:
    return build_app(dashboard_settings, clock=lambda: NOW).server.test_client()


@pytest.fixture(scope="module")
def auth(dashboard_settings: Settings) -> dict[str, str]:
    return {"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"}


def v2(api: FlaskClient, auth: dict[str, str], source: str = "raw", **body: Any) -> list[list[Any]]:
    """[dimensions..., metrics...] per result row of a v2 query over ONE_DAY."""
    response = api.post(
        "/api/v2/query",
        json={"site_id": SITE, "date_range": ONE_DAY, **body},
        headers=auth,
        query_string={"source": source},
    )
    assert response.status_code == 200, response.get_json()
    return [[*row["dimensions"], *row["metrics"]] for row in response.get_json()["results"]]


def v1(api: FlaskClient, auth: dict[str, str], path: str, **params: str) -> Any:
    response = api.get(f"/api/v1/stats/{path}", query_string=params, headers=auth)
    assert response.status_code == 200, response.get_json()
    return response.get_json()["results"]


# --- 1. a page goal filter with a page breakdown --------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_page_goal_filter_with_page_breakdown_shows_the_converted_visitors_pages(
    api: FlaskClient, auth: dict[str, str], source: str
) -> None:
    """Was a 400 "the goal filter's goal was not looked up" (the engagement read skipped the
    goal lookup): m converted on /blog/x/y and x on /blog; their page views are the pages'."""
    rows = v2(
        api, auth, source, metrics=["visitors", "pageviews"], dimensions=["event:page"],
        filters=[["is", "event:goal", ["Visit /blog**"]]], order_by=[["event:page", "asc"]],
    )  # fmt: skip
    assert rows == [["/blog", 1, 1], ["/blog/x/y", 1, 1], ["/pricing", 1, 1]]
    breakdown = v1(
        api, auth, "breakdown", **V1_DAY, property="event:page", metrics="visitors,pageviews",
        filters="event:goal==Visit /blog**", source=source,
    )  # fmt: skip
    assert sorted(breakdown, key=lambda row: row["page"]) == [
        {"page": "/blog", "visitors": 1, "pageviews": 1},
        {"page": "/blog/x/y", "visitors": 1, "pageviews": 1},
        {"page": "/pricing", "visitors": 1, "pageviews": 1},
    ]


# --- 2. conversion rate with a goal and a property filter ------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_conversion_rate_with_goal_and_property_filter_is_over_the_sites_visitors(
    api: FlaskClient, auth: dict[str, str], source: str
) -> None:
    """Was 0 (divided by the visitors of the page views carrying a plan: none). w signed up
    with plan pro: 1 of the day's 4 visitors."""
    filters = [["is", "event:goal", ["Signup"]], ["is", "event:props:plan", ["pro"]]]
    assert v2(api, auth, source, metrics=["visitors", "events", "conversion_rate"], filters=filters) == [
        [1, 1, 25.0]
    ]
    goals = v2(
        api, auth, source, metrics=["visitors", "conversion_rate"], dimensions=["event:goal"],
        filters=[["is", "event:props:plan", ["pro"]]],
    )  # fmt: skip
    assert goals == [["Signup", 1, 25.0]]
    aggregate = v1(
        api, auth, "aggregate", **V1_DAY, metrics="visitors,conversion_rate",
        filters="event:goal==Signup;event:props:plan==pro", source=source,
    )  # fmt: skip
    assert aggregate == {"visitors": {"value": 1}, "conversion_rate": {"value": 25.0}}


# --- 3. browsers and operating systems named Plausible's way ---------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_os_and_browser_breakdowns_use_plausibles_names_for_old_and_new_rows(
    api: FlaskClient, auth: dict[str, str], source: str
) -> None:
    """m's rows hold the parser's `Mac OS X` / `Mobile Safari`, n's Plausible's `Mac` / `Safari`:
    one row each, in Plausible's name; agg (rollups) and raw (archive) alike."""
    by_os = v2(api, auth, source, metrics=["visitors", "pageviews"], dimensions=["visit:os"])
    assert sorted(by_os) == [["GNU/Linux", 1, 1], ["Mac", 2, 3], ["Windows", 1, 1]]
    by_browser = v2(api, auth, source, metrics=["visitors"], dimensions=["visit:browser"])
    assert sorted(by_browser) == [["Chrome", 1], ["Firefox", 1], ["Safari", 2]]


@pytest.mark.parametrize(
    ("filters", "visitors"),
    [
        ([["is", "visit:os", ["Mac"]]], 2),
        ([["is", "visit:os", ["Mac OS X"]]], 2),  # an old name is read as its new one
        ([["is_not", "visit:os", ["Mac"]]], 2),
        ([["is", "visit:browser", ["Safari"]], ["is", "visit:os", ["GNU/Linux", "Mac"]]], 2),
        ([["contains", "visit:os", ["Linux"]]], 1),
    ],
)
def test_filters_written_for_plausible_match_old_and_new_client_names(
    api: FlaskClient, auth: dict[str, str], filters: list[Any], visitors: int
) -> None:
    assert v2(api, auth, metrics=["visitors"], filters=filters) == [[visitors]]


def test_v1_os_filter_and_breakdown_use_plausibles_names(api: FlaskClient, auth: dict[str, str]) -> None:
    assert v1(api, auth, "aggregate", **V1_DAY, filters="visit:os==Mac") == {"visitors": {"value": 2}}
    breakdown = v1(api, auth, "breakdown", **V1_DAY, property="visit:os", filters="visit:browser==Safari")
    assert breakdown == [{"os": "Mac", "visitors": 2}]


# --- 4. v1 `period=7d&date=D` ----------------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_v1_seven_days_with_a_date_are_the_seven_days_before_it(
    api: FlaskClient, auth: dict[str, str], source: str
) -> None:
    """Plausible's {:last_n_days, 7} relative to D is D-7 … D-1: with D = the 11th, the 4th to the
    10th (m, n, w, x; not y on the 11th); with D = the 12th, the 5th to the 11th (y too)."""
    week = v1(api, auth, "aggregate", site_id=SITE, period="7d", date="2026-11-11", source=source)
    assert week == {"visitors": {"value": 4}}
    later = v1(api, auth, "aggregate", site_id=SITE, period="7d", date="2026-11-12", source=source)
    assert later == {"visitors": {"value": 5}}
    series = v1(api, auth, "timeseries", site_id=SITE, period="7d", date="2026-11-11", source=source)
    assert [point["date"] for point in series] == [f"2026-11-{day:02}" for day in range(4, 11)]
    assert [point["visitors"] for point in series] == [0, 0, 0, 0, 0, 0, 4]
    # without a date, today (the 12th) is the reference day
    assert v1(api, auth, "aggregate", site_id=SITE, period="7d", source=source) == later


# --- 5. v1 UTM breakdowns without the blank row ----------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_v1_utm_breakdown_leaves_out_visits_without_a_campaign(
    api: FlaskClient, auth: dict[str, str], source: str
) -> None:
    breakdown = v1(api, auth, "breakdown", **V1_DAY, property="visit:utm_source", source=source)
    assert breakdown == [{"utm_source": "newsletter", "visitors": 1}]
    # v2 answers the blank value as a row of its own, as Plausible's v2 does (no extra filter)
    # (blank named "(not set)", as Plausible's v2 results name it)
    assert sorted(v2(api, auth, source, metrics=["visitors"], dimensions=["visit:utm_source"])) == [
        ["(not set)", 3],
        ["newsletter", 1],
    ]


# --- 6. a property value `(none)` ------------------------------------------------------------------


def custom_events(rows: list[dict[str, Any]]) -> dict[str, int]:
    return {row["name"]: row["events"] for row in rows}


def test_property_none_filters_the_events_without_the_property(
    api: FlaskClient, auth: dict[str, str]
) -> None:
    """x's Signup carries no plan, w's plan pro: `(none)` is "not set", not a value."""
    without = v1(
        api, auth, "breakdown", **V1_DAY, property="event:name", metrics="visitors,events",
        filters="event:props:plan==(none)",
    )  # fmt: skip
    assert custom_events(without) == {"pageview": 5, "Share": 1, "Signup": 1}
    with_plan = v1(
        api, auth, "breakdown", **V1_DAY, property="event:name", metrics="visitors,events",
        filters="event:props:plan!=(none)",
    )  # fmt: skip
    assert custom_events(with_plan) == {"Signup": 1}
    assert v2(
        api, auth, metrics=["visitors", "events"], dimensions=["event:name"],
        filters=[["is", "event:props:plan", ["(none)", "pro"]]], order_by=[["event:name", "asc"]],
    ) == [["Share", 1, 1], ["Signup", 2, 2], ["pageview", 4, 5]]  # fmt: skip


# --- 7. the `\|` escape in v1 filters --------------------------------------------------------------


def test_v1_escaped_pipe_is_a_pipe_within_the_value(api: FlaskClient, auth: dict[str, str]) -> None:
    escaped = v1(
        api, auth, "breakdown", **V1_DAY, property="event:name", metrics="events",
        filters="event:props:tag==a\\|b",
    )  # fmt: skip
    assert custom_events(escaped) == {"Share": 1}
    either = v1(
        api, auth, "breakdown", **V1_DAY, property="event:name", metrics="events",
        filters="event:props:tag==a|b",
    )  # fmt: skip
    assert custom_events(either) == {}  # neither `a` nor `b`


# --- 8. a page goal `Visit /blog**` ----------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_page_goal_with_double_star_converts_pages_below_it(
    api: FlaskClient, auth: dict[str, str], source: str
) -> None:
    """`/blog**` is any path starting /blog: m's /blog/x/y and x's /blog both convert; the goal's
    numbers agree on the rollups' goal tables (agg) and the archive (raw)."""
    goals = v2(
        api, auth, source, metrics=["visitors", "events", "conversion_rate"], dimensions=["event:goal"]
    )
    assert sorted(goals) == [["Signup", 2, 2, 50.0], ["Visit /blog**", 2, 2, 50.0]]
    aggregate = v1(
        api, auth, "aggregate", **V1_DAY, metrics="visitors,events", filters="event:goal==Visit /blog**",
        source=source,
    )  # fmt: skip
    assert aggregate == {"visitors": {"value": 2}, "events": {"value": 2}}


@pytest.mark.parametrize("os_name", ["Mac", "Mac OS X"])
def test_tallys_own_api_filter_by_os_matches_old_and_new_rows(
    api: FlaskClient, auth: dict[str, str], os_name: str
) -> None:
    """Tally's own stats API (`site=`, a filters object) reads the same table: both names, 2."""
    response = api.get(
        "/api/v1/stats/aggregate",
        query_string={
            "site": SITE, "from": "2026-11-10T00:00:00Z", "to": "2026-11-11T00:00:00Z",
            "filters": json.dumps({"os": os_name}), "source": "raw",
        },
        headers=auth,
    )  # fmt: skip
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["visitors"] == 2


# --- 9. v2 relative date ranges: Plausible's "Nd" and "Nmo" (shared with v1's 7d, 30d) -------------

RANGES_SITE = "plausible-fixes-ranges.example.com"
# r: yesterday (the 11th) from twitter.com, two pages; s: yesterday, direct; t: today (the 12th),
# direct; v: the 5th, direct; u: last month (October 15th), direct, from a newsletter.
RANGE_EVENTS = [
    page_view(RANGES_SITE, "r", at(24 + 9), "/", referrer_domain="twitter.com"),
    page_view(RANGES_SITE, "r", at(24 + 9.1), "/pricing", referrer_domain="twitter.com"),
    page_view(RANGES_SITE, "s", at(24 + 10), "/pricing"),
    page_view(RANGES_SITE, "t", at(48 + 1), "/"),
    page_view(RANGES_SITE, "v", datetime(2026, 11, 5, 8, tzinfo=UTC), "/"),
    page_view(RANGES_SITE, "u", datetime(2026, 10, 15, 8, tzinfo=UTC), "/", utm_source="newsletter"),
]  # fmt: skip
YESTERDAY = ["2026-11-11", "2026-11-11"]


@pytest.fixture(scope="module")
def ranges_site(store: Client) -> str:
    rows, columns = archive_rows(RANGE_EVENTS)
    store.insert("events", rows, column_names=columns)
    add_site(store, RANGES_SITE)
    backfill_rollups(store, RANGES_SITE, datetime(2026, 10, 1).date(), (NOW + timedelta(days=1)).date())
    return RANGES_SITE


def ranged(api: FlaskClient, auth: dict[str, str], source: str, **body: Any) -> tuple[int, Any]:
    response = api.post(
        "/api/v2/query",
        json={"site_id": RANGES_SITE, "metrics": ["visitors"], **body},
        headers=auth,
        query_string={"source": source},
    )
    return response.status_code, response.get_json()


def rows_of(answer: Any) -> list[list[Any]]:
    return [[*row["dimensions"], *row["metrics"]] for row in answer["results"]]


@pytest.mark.parametrize("source", SOURCES)
def test_v2_last_n_days_and_months_leave_out_today_and_this_month(
    api: FlaskClient, auth: dict[str, str], ranges_site: str, source: str
) -> None:
    def visitors(date_range: str, **more: str) -> int:
        status, answer = ranged(api, auth, source, date_range=date_range, **more)
        assert status == 200, answer
        return answer["results"][0]["metrics"][0]

    # today is the 12th: "1d" is the 11th (r, s); "7d" the 5th to the 11th (v too); "27d" from
    # October 16th (not u); "30d" from October 13th (u too); "1mo" is October (u); "12mo" November
    # 2025 to October 2026; "month" this one (r, s, t, v)
    expected = {"day": 1, "1d": 2, "7d": 3, "27d": 3, "30d": 4, "month": 4, "1mo": 1, "12mo": 1, "year": 5}
    assert {name: visitors(name) for name in expected} == expected
    assert visitors("1d", date="2026-11-06") == 1  # the day before `date`: the 5th (v)
    assert visitors("2mo", date="2026-12-01") == 5  # October and November
    _, answer = ranged(api, auth, source, date_range="7d")
    assert answer["query"]["date_range"] == ["2026-11-05T00:00:00+00:00", "2026-11-11T23:59:59+00:00"]
    # v1's 7d is the same rule (one copy); v1's 6mo keeps Plausible v1's meaning (this month too)
    assert v1(api, auth, "aggregate", site_id=RANGES_SITE, period="7d", source=source) == {
        "visitors": {"value": 3}
    }
    assert v1(api, auth, "aggregate", site_id=RANGES_SITE, period="6mo", source=source) == {
        "visitors": {"value": 5}
    }


@pytest.mark.parametrize("date_range", ["0d", "5001d", "101mo", "7days", "7D", "-7d", "mo", "24h"])
def test_v2_invalid_relative_range_is_refused_in_plausibles_words(
    api: FlaskClient, auth: dict[str, str], ranges_site: str, date_range: str
) -> None:
    status, answer = ranged(api, auth, "raw", date_range=date_range)
    assert status == 400
    assert answer["error"] == f'Invalid date_range "{date_range}"'


# --- 10. a visit without referrer is "Direct / None" ------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_direct_visits_are_named_direct_none_in_results_and_filters(
    api: FlaskClient, auth: dict[str, str], ranges_site: str, source: str
) -> None:
    def answered(**body: Any) -> list[list[Any]]:
        status, answer = ranged(api, auth, source, date_range=YESTERDAY, **body)
        assert status == 200, answer
        return rows_of(answer)

    by_source = answered(dimensions=["visit:source"], order_by=[["visit:source", "asc"]])
    assert by_source == [["Direct / None", 1], ["twitter.com", 1]]
    assert answered(filters=[["is", "visit:source", ["Direct / None"]]]) == [[1]]  # s
    assert answered(filters=[["is_not", "visit:source", ["Direct / None"]]]) == [[1]]  # r
    assert answered(filters=[["is", "visit:source", ["Direct / None", "twitter.com"]]]) == [[2]]
    # the engine's path (two dimensions) names and filters it the same way
    both = answered(
        dimensions=["visit:source", "event:page"], filters=[["is", "visit:source", ["Direct / None"]]]
    )
    assert both == [["Direct / None", "/pricing", 1]]
    # a blank UTM is "(not set)", and a filter with that name matches it (u came from a newsletter)
    _, answer = ranged(
        api, auth, source, date_range="all", dimensions=["visit:utm_source"], order_by=[["visitors", "desc"]]
    )
    assert rows_of(answer) == [["(not set)", 4], ["newsletter", 1]]
    _, answer = ranged(
        api, auth, source, date_range="all", filters=[["is", "visit:utm_source", ["(not set)"]]]
    )
    assert rows_of(answer) == [[4]]
    # v1: the breakdown row and the filter
    params = {"site_id": RANGES_SITE, "period": "custom", "date": "2026-11-11,2026-11-11", "source": source}
    breakdown = v1(api, auth, "breakdown", **params, property="visit:source")
    assert sorted(row["source"] for row in breakdown) == ["Direct / None", "twitter.com"]
    direct = v1(api, auth, "aggregate", **params, filters="visit:source==Direct / None")
    assert direct == {"visitors": {"value": 1}}


# --- 11. views_per_visit with a page filter ---------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"filters": [["is", "event:page", ["/pricing"]]]}, "reports"),
        (
            {"filters": [["or", [["is", "event:page", ["/"]], ["is", "visit:source", ["twitter.com"]]]]]},
            "engine",
        ),
        ({"filters": [["not", ["contains", "event:page", ["pricing"]]]]}, "reports"),
        ({"filters": [["is", "event:page", ["/"]]], "dimensions": ["visit:source", "event:page"]}, "engine"),
    ],
)
def test_views_per_visit_with_a_page_filter_is_refused_as_plausible_refuses_it(
    api: FlaskClient, auth: dict[str, str], ranges_site: str, body: dict[str, Any], path: str
) -> None:
    status, answer = ranged(
        api, auth, "raw", date_range=YESTERDAY, **{**body, "metrics": ["visitors", "views_per_visit"]}
    )
    assert status == 400, (path, answer)
    assert answer["error"] == "Metric `views_per_visit` cannot be queried with a filter on `event:page`."


def test_views_per_visit_without_a_page_filter_still_answers(
    api: FlaskClient, auth: dict[str, str], ranges_site: str
) -> None:
    status, answer = ranged(api, auth, "raw", date_range=YESTERDAY, metrics=["views_per_visit"])
    assert status == 200 and rows_of(answer) == [[1.5]]  # r's 2 pages and s's 1 over 2 visits
    behaviour = [
        ["has_done", ["is", "event:page", ["/pricing"]]]
    ]  # Plausible ignores behavioural filters here
    status, answer = ranged(
        api, auth, "raw", date_range=YESTERDAY, metrics=["views_per_visit"], filters=behaviour
    )
    assert status == 200, answer
