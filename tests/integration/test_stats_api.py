"""The stats API (/api/v1) against the real ClickHouse engine, built in-process.

A hand-built archive for one site; every answer is checked against storage.queries for the
same parameters and, for the raw source, against numbers computed here from the events
themselves (an independent reading of DESIGN.md's definitions).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage import queries
from storage.client import connect
from storage.client_names import plausible_name
from storage.queries import StatsQuery
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

SITE = "stats-api.example.com"
OTHER_SITE = "stats-api-other.example.com"
DAY = datetime(2026, 11, 10, tzinfo=UTC)
T0 = DAY + timedelta(hours=9)
NEXT_DAY = DAY + timedelta(days=1)
NOW = T0 + timedelta(minutes=10)  # the API's clock: realtime counts [09:05, 09:10]
DAY_RANGE = {"site": SITE, "from": "2026-11-10T00:00:00Z", "to": "2026-11-11T00:00:00Z"}
GAP = timedelta(minutes=30)
# Settings and accounts (dashboard/http_api/manage.py), tested in tests/integration/test_manage_api.py.
MANAGEMENT_PATHS = {
    "/api/v1/exclusions",
    "/api/v1/members",
    "/api/v1/invites",
    "/api/v1/keys",
    "/api/v1/audit",
    "/api/v1/reports",
    "/api/v1/timezone",
    "/api/v1/identity",  # tests/integration/test_retention_api.py
}
# Plausible's Sites API: tests/integration/test_sites_api.py.
ANNOTATIONS_PATHS = {
    "/api/v1/annotations",
    "/api/v1/annotations/{id}",
}  # tests/integration/test_annotations.py
SITES_PATHS = {
    "/api/v1/sites",
    "/api/v1/sites/{site_id}",
    "/api/v1/sites/goals",
    "/api/v1/sites/goals/{goal_id}",
    "/api/v1/sites/shared-links",
    "/api/v1/sites/teams",
    "/api/v1/sites/custom-props",
    "/api/v1/sites/custom-props/{property}",
    "/api/v1/sites/guests",
    "/api/v1/sites/guests/{email}",
}


A = {"country": "CH", "device": "desktop", "browser": "Firefox", "os": "Linux", "screen_width": 1440}
# a: a 3-page session from Hacker News (gaps of 10 and exactly 30 minutes), a bounce at 12:00.
# b: a bounce from a newsletter on a phone. c: a custom event (not a page view).
# d: a bounce in the last millisecond of the day; e: the first millisecond of the next (outside).
EVENTS = [
    page_view(SITE, "a", T0, "/", referrer_domain="news.ycombinator.com", **A),
    page_view(SITE, "a", T0 + timedelta(minutes=10), "/pricing", **A),
    page_view(SITE, "a", T0 + timedelta(minutes=40), "/signup", **A),
    page_view(SITE, "a", T0 + timedelta(hours=3), "/blog", **A),
    page_view(
        SITE,
        "b",
        T0 + timedelta(minutes=5),
        "/pricing",
        referrer_domain="google.com",
        utm_source="newsletter",
        utm_medium="email",
        utm_campaign="launch",
        utm_content="cta",
        utm_term="analytics",
        language="de-DE",
        screen_width=390,
        country="DE",
        device="mobile",
        browser="Safari",
        os="iOS",
    ),
    page_view(SITE, "c", T0, "/signup", name="signup"),
    page_view(
        SITE, "d", DAY + timedelta(days=1) - timedelta(milliseconds=1), "/", country="US", device="desktop"
    ),
    page_view(SITE, "e", DAY + timedelta(days=1), "/docs", country="US", device="desktop"),
    page_view(OTHER_SITE, "x", T0, "/elsewhere"),
]


@pytest.fixture(scope="module")
def archive(dashboard_settings: Settings) -> Client:
    client = connect(dashboard_settings)
    rows, columns = archive_rows(EVENTS)
    client.insert("events", rows, column_names=columns)
    return client


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings, archive: Client) -> FlaskClient:
    return build_app(dashboard_settings, clock=lambda: NOW).server.test_client()


@pytest.fixture(scope="module")
def auth(dashboard_settings: Settings) -> dict[str, str]:
    return {"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"}


def get(api: FlaskClient, auth: dict[str, str], path: str, **params: str) -> tuple[int, Any]:
    response = api.get(f"/api/v1{path}", query_string=params, headers=auth)
    return response.status_code, response.get_json()


# --- the definitions, computed here from EVENTS (no SQL) ----------------------------------------


@dataclass
class Session:
    visitor: str
    events: list[PageViewEvent]

    @property
    def start(self) -> datetime:
        return self.events[0].ts


def pageviews_in(start: datetime, end: datetime, **filters: str) -> list[PageViewEvent]:
    return [
        e
        for e in EVENTS
        if e.site == SITE
        and e.name == "pageview"
        and start <= e.ts < end
        and all(getattr(e, name) == value for name, value in filters.items())
    ]


def sessions_in(start: datetime, end: datetime, **filters: str) -> list[Session]:
    """Consecutive page views of a visitor with gaps ≤ 30 min; a session belongs where it starts.
    Under filters, the whole sessions holding a page view that passes them (Plausible's visits)."""
    by_visitor: dict[str, list[PageViewEvent]] = defaultdict(list)
    for event in sorted(pageviews_in(DAY - timedelta(days=1), DAY + timedelta(days=2)), key=lambda e: e.ts):
        by_visitor[event.visitor_id].append(event)
    sessions = []
    for visitor, events in by_visitor.items():
        current = [events[0]]
        for event in events[1:]:
            if event.ts - current[-1].ts > GAP:
                sessions.append(Session(visitor, current))
                current = []
            current.append(event)
        sessions.append(Session(visitor, current))
    matching = set(map(id, pageviews_in(DAY - timedelta(days=1), DAY + timedelta(days=2), **filters)))
    return [s for s in sessions if start <= s.start < end and any(id(e) in matching for e in s.events)]


def expected_aggregate(start: datetime, end: datetime, **filters: str) -> dict[str, float]:
    views = pageviews_in(start, end, **filters)
    sessions = sessions_in(start, end, **filters)
    durations = [(s.events[-1].ts - s.events[0].ts).total_seconds() for s in sessions]
    return {
        "pageviews": len(views),
        "visitors": len({e.visitor_id for e in views}),
        "sessions": len(sessions),
        "bounce_rate": round(sum(len(s.events) == 1 for s in sessions) / len(sessions), 4)
        if sessions
        else 0.0,
        "avg_session_duration_s": round(sum(durations) / len(sessions), 1) if sessions else 0.0,
    }


def event_value(e: PageViewEvent, by: str) -> str:
    """An event dimension's value; screen_size by the documented classes (Plausible's), browser
    and OS by Plausible's names (the stored "Linux" is "GNU/Linux")."""
    if by != "screen_size":
        return plausible_name(by, getattr(e, by))
    width = e.screen_width
    return "" if not width else next((c for c, below in SCREEN_CLASSES if width < below), "Desktop")


SCREEN_CLASSES = (("Mobile", 576), ("Tablet", 992), ("Laptop", 1440))


def expected_breakdown(by: str) -> list[tuple[str, int, int]]:
    counts: dict[str, tuple[int, set[str]]] = defaultdict(lambda: (0, set()))
    if by in queries.EVENT_DIMENSIONS:
        for e in pageviews_in(DAY, DAY + timedelta(days=1)):
            views, visitors = counts[event_value(e, by)]
            counts[event_value(e, by)] = (views + 1, visitors | {e.visitor_id})
    else:  # a session's property: of its first (entry, referrer, utm) or last (exit) page view
        for s in sessions_in(DAY, DAY + timedelta(days=1)):
            source = s.events[-1] if by == "exit_path" else s.events[0]
            value = source.path if by in ("entry_path", "exit_path") else getattr(source, by)
            views, visitors = counts[value]
            counts[value] = (views + len(s.events), visitors | {s.visitor})
    return sorted((value, views, len(visitors)) for value, (views, visitors) in counts.items())


# --- shapes and numbers --------------------------------------------------------------------------


def test_aggregate_is_one_object_keyed_by_metric(api: FlaskClient, auth: dict[str, str]) -> None:
    status, body = get(api, auth, "/stats/aggregate", **DAY_RANGE, source="raw")
    assert status == 200
    assert body == expected_aggregate(DAY, DAY + timedelta(days=1))
    # Spelled out once: a's two sessions, b's and d's bounces; e is the next day, c no page view.
    assert body == {
        "pageviews": 6,
        "visitors": 3,
        "sessions": 4,
        "bounce_rate": 0.75,
        "avg_session_duration_s": 600.0,
    }


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_every_endpoint_answers_what_the_query_layer_answers(
    api: FlaskClient, auth: dict[str, str], archive: Client, dashboard_settings: Settings, source: str
) -> None:
    q = StatsQuery(SITE, DAY, DAY + timedelta(days=1), session_gap_s=dashboard_settings.session_gap_s)
    source_ = source  # type: ignore[assignment]

    assert get(api, auth, "/stats/aggregate", **DAY_RANGE, source=source)[1] == queries.aggregate(
        archive, q, source=source_
    )
    assert get(api, auth, "/stats/timeseries", **DAY_RANGE, interval="hour", source=source)[1] == [
        {
            "t": p.t.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "pageviews": p.pageviews,
            "visitors": p.visitors,
        }
        for p in queries.timeseries(archive, q, "hour", source=source_)
    ]
    for by in queries.DIMENSIONS:
        rows = queries.breakdown(archive, q, by, 10, source=source_)
        expected = [{"value": r.value, "pageviews": r.pageviews, "visitors": r.visitors} for r in rows]
        if by == "path":  # and each page's engagement (none here: no engagement events)
            engaged = queries.engagement(archive, q, [r.value for r in rows], source=source_)
            for row in expected:
                page = engaged.get(str(row["value"]))
                row |= {"time_on_page_s": page.time_on_page_s if page else 0.0}
                row |= {"scroll_depth": page.scroll_depth if page else 0.0}
        assert get(api, auth, "/stats/breakdown", **DAY_RANGE, by=by, source=source)[1] == expected, by
    assert get(api, auth, "/stats/realtime", site=SITE, source=source)[1] == queries.realtime(
        archive, SITE, now=NOW, source=source_
    )
    sessions = get(api, auth, "/sessions", **DAY_RANGE, source=source)[1]
    assert [(s["visitor_id"], s["pageviews"], s["entry_path"]) for s in sessions] == [
        (s.visitor_id, s.pageviews, s.entry_path) for s in queries.sessions(archive, q, 100, source=source_)
    ]


def test_timeseries_lists_every_bucket_with_its_counts(api: FlaskClient, auth: dict[str, str]) -> None:
    status, body = get(api, auth, "/stats/timeseries", **DAY_RANGE, interval="hour", source="raw")
    assert status == 200
    assert len(body) == 24
    assert body[0] == {"t": "2026-11-10T00:00:00Z", "pageviews": 0, "visitors": 0}
    counted = {p["t"][11:13]: (p["pageviews"], p["visitors"]) for p in body if p["pageviews"]}
    assert counted == {"09": (4, 2), "12": (1, 1), "23": (1, 1)}


@pytest.mark.parametrize("by", list(queries.DIMENSIONS))
def test_breakdown_counts_match_the_definitions(api: FlaskClient, auth: dict[str, str], by: str) -> None:
    status, body = get(api, auth, "/stats/breakdown", **DAY_RANGE, by=by, source="raw")
    assert status == 200
    assert sorted((r["value"], r["pageviews"], r["visitors"]) for r in body) == expected_breakdown(by)


def test_breakdown_limit_keeps_the_most_visited(api: FlaskClient, auth: dict[str, str]) -> None:
    _, body = get(api, auth, "/stats/breakdown", **DAY_RANGE, by="path", limit="2", source="raw")
    assert [r["value"] for r in body] == ["/", "/pricing"]  # 2 visitors each; the rest 1


def test_filters_restrict_the_page_views_counted(api: FlaskClient, auth: dict[str, str]) -> None:
    filters = json.dumps({"path": "/pricing"})
    _, body = get(api, auth, "/stats/aggregate", **DAY_RANGE, filters=filters, source="raw")
    assert body == expected_aggregate(DAY, DAY + timedelta(days=1), path="/pricing")
    assert (body["pageviews"], body["visitors"], body["sessions"]) == (2, 2, 2)
    # whole visits holding a /pricing page view: a's 40-minute one from / and a one-page one
    assert (body["bounce_rate"], body["avg_session_duration_s"]) == (0.5, 1200.0)


def test_a_filter_by_screen_size_or_language_counts_those_page_views(
    api: FlaskClient, auth: dict[str, str]
) -> None:
    for filters in ({"screen_size": "Mobile"}, {"language": "de-DE"}):
        _, body = get(api, auth, "/stats/aggregate", **DAY_RANGE, filters=json.dumps(filters), source="raw")
        assert (body["pageviews"], body["visitors"], body["sessions"]) == (1, 1, 1)  # b's bounce


def test_realtime_counts_the_last_five_minutes(api: FlaskClient, auth: dict[str, str]) -> None:
    assert get(api, auth, "/stats/realtime", site=SITE, source="raw") == (
        200,
        {"visitors": 2, "pageviews": 2},
    )


def test_sessions_list_entry_exit_duration_and_bounce(api: FlaskClient, auth: dict[str, str]) -> None:
    status, body = get(api, auth, "/sessions", **DAY_RANGE, source="raw")
    assert status == 200
    first = next(s for s in body if s["visitor_id"] == "a" and s["pageviews"] == 3)
    assert first == {
        "visitor_id": "a",
        "start": "2026-11-10T09:00:00Z",
        "end": "2026-11-10T09:40:00Z",
        "duration_s": 2400.0,
        "pageviews": 3,
        "entry_path": "/",
        "exit_path": "/signup",
        "is_bounce": False,
        "engaged_s": 0.0,
        "referrer_domain": "news.ycombinator.com",
        "utm_source": "",
        "country": "CH",
        "device": "desktop",
        "browser": "Firefox",
        "os": "GNU/Linux",  # stored "Linux": named as Plausible names it (storage/client_names.py)
    }
    assert len(body) == len(sessions_in(DAY, DAY + timedelta(days=1)))
    assert [s["start"] for s in body] == sorted((s["start"] for s in body), reverse=True)


def test_dates_without_time_or_with_offset_are_read_as_utc(api: FlaskClient, auth: dict[str, str]) -> None:
    plain = get(api, auth, "/stats/aggregate", site=SITE, **{"from": "2026-11-10", "to": "2026-11-11"})
    offset = get(
        api, auth, "/stats/aggregate", site=SITE, **{"from": "2026-11-10T01:00:00+01:00", "to": "2026-11-11"}
    )
    assert plain == offset
    assert plain[0] == 200


# --- auth ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-key", "Basic x", "Bearer", "bearer  "],
    ids=["missing", "wrong-key", "basic", "empty-bearer", "blank"],
)
def test_without_the_api_key_the_answer_is_401(api: FlaskClient, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization is not None else {}
    response = api.get("/api/v1/stats/aggregate", query_string=DAY_RANGE, headers=headers)
    assert response.status_code == 401
    assert "error" in response.get_json()
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_key_is_accepted_whatever_the_scheme_case(api: FlaskClient, dashboard_settings: Settings) -> None:
    headers = {"Authorization": f"bearer {dashboard_settings.resolved_api_key()}"}
    assert api.get("/api/v1/stats/aggregate", query_string=DAY_RANGE, headers=headers).status_code == 200


# --- bad parameters ------------------------------------------------------------------------------

BAD_PARAMETERS = [
    ("/stats/aggregate", {"from": "2026-11-10", "to": "2026-11-11"}, "site"),
    ("/stats/aggregate", {**DAY_RANGE, "site": ""}, "site"),
    ("/stats/aggregate", {**DAY_RANGE, "site": "x" * 300}, "site"),
    ("/stats/aggregate", {**DAY_RANGE, "from": "yesterday"}, "from"),
    ("/stats/aggregate", {**DAY_RANGE, "from": "2026-13-45"}, "from"),
    ("/stats/aggregate", {**DAY_RANGE, "to": "10/11/2026"}, "to"),
    ("/stats/aggregate", {**DAY_RANGE, "from": "0001-01-01"}, "from"),
    ("/stats/aggregate", {**DAY_RANGE, "to": "2026-11-10T00:00:00Z"}, "to"),
    ("/stats/aggregate", {**DAY_RANGE, "from": "2026-11-12"}, "to"),
    ("/stats/aggregate", {**DAY_RANGE, "source": "cache"}, "source"),
    ("/stats/aggregate", {**DAY_RANGE, "filters": "path=/pricing"}, "filters"),
    ("/stats/aggregate", {**DAY_RANGE, "filters": '["path"]'}, "filters"),
    ("/stats/aggregate", {**DAY_RANGE, "filters": '{"path": 1}'}, "filters"),
    ("/stats/aggregate", {**DAY_RANGE, "filters": '{"ip_hash": "x"}'}, "filters"),
    ("/stats/aggregate", {**DAY_RANGE, "period": "30d"}, "period"),
    ("/stats/timeseries", {**DAY_RANGE, "interval": "fortnight"}, "interval"),
    ("/stats/timeseries", {**DAY_RANGE, "from": "2000-01-01", "interval": "minute"}, "interval"),
    ("/stats/breakdown", DAY_RANGE, "by"),
    ("/stats/breakdown", {**DAY_RANGE, "by": "ip_hash"}, "by"),
    ("/stats/breakdown", {**DAY_RANGE, "by": "screen_width"}, "by"),
    ("/stats/breakdown", {**DAY_RANGE, "by": "utm_contents"}, "by"),
    ("/stats/aggregate", {**DAY_RANGE, "filters": '{"utm_contents": "cta"}'}, "filters"),
    ("/stats/aggregate", {**DAY_RANGE, "filters": '[["is", "chanel", ["Direct"]]]'}, "filters"),
    ("/stats/aggregate", {**DAY_RANGE, "filters": '[["like", "channel", ["Direct"]]]'}, "filters"),
    ("/stats/breakdown", {**DAY_RANGE, "by": "path", "limit": "0"}, "limit"),
    ("/stats/breakdown", {**DAY_RANGE, "by": "path", "limit": "1001"}, "limit"),
    ("/stats/breakdown", {**DAY_RANGE, "by": "path", "limit": "-1"}, "limit"),
    ("/stats/breakdown", {**DAY_RANGE, "by": "path", "limit": "ten"}, "limit"),
    ("/stats/breakdown", {**DAY_RANGE, "by": "path", "limit": "9" * 5000}, "limit"),
    ("/stats/realtime", {}, "site"),
    ("/stats/realtime", {"site": SITE, "source": "disk"}, "source"),
    ("/sessions", {**DAY_RANGE, "limit": "100000"}, "limit"),
    # goals, custom events, properties (issue 16)
    ("/stats/breakdown", {**DAY_RANGE, "by": "prop:"}, "by"),
    ("/stats/breakdown", {**DAY_RANGE, "by": "prop:" + "k" * 301}, "by"),
    ("/stats/breakdown", {**DAY_RANGE, "by": "event:path"}, "by"),
    ("/stats/breakdown", {**DAY_RANGE, "by": "path", "goal": "Signup"}, "goal"),
    ("/stats/breakdown", {**DAY_RANGE, "by": "prop:plan", "goal": ""}, "goal"),
    ("/stats/breakdown", {**DAY_RANGE, "by": "prop:plan", "goal": "Nothing"}, "goal"),
    ("/stats/aggregate", {**DAY_RANGE, "filters": '{"goal": "Nothing"}'}, "filters"),
    ("/stats/goals", {**DAY_RANGE, "filters": '{"props.": "x"}'}, "filters"),
    ("/stats/goals", {**DAY_RANGE, "filters": '{"goal": "Nothing"}'}, "filters"),
    ("/stats/goals", {**DAY_RANGE, "source": "cache"}, "source"),
    ("/stats/goals", {"from": "2026-11-10"}, "site"),
]


@pytest.mark.parametrize(("path", "params", "parameter"), BAD_PARAMETERS)
def test_bad_parameter_is_a_400_naming_it(
    api: FlaskClient, auth: dict[str, str], path: str, params: dict[str, str], parameter: str
) -> None:
    status, body = get(api, auth, path, **params)
    assert status == 400
    assert set(body) == {"error"}
    assert body["error"].startswith(f"{parameter}:"), body


def test_parameter_given_twice_is_a_400(api: FlaskClient, auth: dict[str, str]) -> None:
    response = api.get(f"/api/v1/stats/aggregate?site={SITE}&site=other.example.com", headers=auth)
    assert response.status_code == 400
    assert response.get_json()["error"].startswith("site:")


def test_unknown_endpoint_is_a_json_404(api: FlaskClient, auth: dict[str, str]) -> None:
    response = api.get("/api/v1/stats/funnels", headers=auth)
    assert response.status_code == 404
    assert "error" in response.get_json()


# --- injection -----------------------------------------------------------------------------------

DROP = "'; DROP TABLE events; --"
INJECTIONS = [
    ("/stats/aggregate", {**DAY_RANGE, "site": "x' OR '1'='1"}),
    ("/stats/aggregate", {**DAY_RANGE, "site": SITE + DROP}),
    ("/stats/aggregate", {**DAY_RANGE, "from": "2026-11-10" + DROP}),
    ("/stats/aggregate", {**DAY_RANGE, "to": "2026-11-11') OR 1=1 --"}),
    ("/stats/aggregate", {**DAY_RANGE, "source": "raw" + DROP}),
    ("/stats/aggregate", {**DAY_RANGE, "filters": json.dumps({"path": "/' OR 1=1 --"})}),
    ("/stats/aggregate", {**DAY_RANGE, "filters": json.dumps({"path = path OR 1=1 --": "x"})}),
    ("/stats/aggregate", {**DAY_RANGE, "filters": json.dumps({"country": "x'); DROP TABLE events; --"})}),
    ("/stats/timeseries", {**DAY_RANGE, "interval": "hour(ts)) FROM system.tables --"}),
    ("/stats/breakdown", {**DAY_RANGE, "by": "path FROM events; DROP TABLE events; --"}),
    ("/stats/breakdown", {**DAY_RANGE, "by": "path", "limit": "1 UNION SELECT name FROM system.tables"}),
    ("/stats/realtime", {"site": SITE + DROP}),
    ("/sessions", {**DAY_RANGE, "site": "' UNION SELECT * FROM salts --"}),
]


@pytest.mark.parametrize(("path", "params"), INJECTIONS)
def test_sql_in_a_parameter_is_refused_or_matches_nothing(
    api: FlaskClient, auth: dict[str, str], archive: Client, path: str, params: dict[str, str]
) -> None:
    status, body = get(api, auth, path, **params)
    assert status in (200, 400), body
    if status == 200:  # taken as a value: it names no site, page or country that exists
        empty = body in ([], {"visitors": 0, "pageviews": 0}) or (
            isinstance(body, dict) and body["pageviews"] == 0
        )
        assert empty, body
    assert archive.command("EXISTS TABLE events") == 1
    assert archive.query(
        "SELECT count() FROM events WHERE site = {s:String}", parameters={"s": SITE}
    ).result_rows == [(sum(e.site == SITE for e in EVENTS),)]


# --- journeys ------------------------------------------------------------------------------------


def test_journeys_from_a_page_from_the_entry_and_into_a_page(api: FlaskClient, auth: dict[str, str]) -> None:
    # a: / → /pricing → /signup, then /blog 3 h later; b: /pricing; d: / (the day's last ms)
    status, rows = get(api, auth, "/stats/journeys", **DAY_RANGE, page="/", steps="2", source="raw")
    assert status == 200
    assert rows == [
        {"steps": ["/"], "visits": 1, "visitors": 1},
        {"steps": ["/", "/pricing", "/signup"], "visits": 1, "visitors": 1},
    ]
    status, rows = get(
        api, auth, "/stats/journeys", **DAY_RANGE, page="/signup", direction="previous", source="raw"
    )
    assert (status, rows) == (200, [{"steps": ["/", "/pricing", "/signup"], "visits": 1, "visitors": 1}])
    status, rows = get(api, auth, "/stats/journeys", **DAY_RANGE, steps="1", source="raw")
    assert status == 200
    assert {tuple(row["steps"]): (row["visits"], row["visitors"]) for row in rows} == {
        ("/",): (1, 1),
        ("/", "/pricing"): (1, 1),
        ("/blog",): (1, 1),
        ("/pricing",): (1, 1),
    }
    # paths of fewer than 2 visitors fold into one row, its visitors distinct (a's two visits)
    status, rows = get(api, auth, "/stats/journeys", **DAY_RANGE, steps="1", min_visitors="2", source="raw")
    assert (status, rows) == (200, [{"steps": ["(other)"], "visits": 4, "visitors": 3}])
    # the two paths of the most visitors (ties: visits, then the steps' order), the rest folded
    status, rows = get(api, auth, "/stats/journeys", **DAY_RANGE, steps="1", limit="2", source="raw")
    assert (status, rows) == (
        200,
        [
            {"steps": ["/"], "visits": 1, "visitors": 1},
            {"steps": ["/", "/pricing"], "visits": 1, "visitors": 1},
            {"steps": ["(other)"], "visits": 2, "visitors": 2},
        ],
    )


def test_journeys_of_the_visits_passing_filters_on_their_properties(
    api: FlaskClient, auth: dict[str, str]
) -> None:
    # a's first visit came from Hacker News (its second, 3 h later, directly); b from a newsletter
    from_hn = json.dumps({"referrer_domain": "news.ycombinator.com"})
    status, rows = get(api, auth, "/stats/journeys", **DAY_RANGE, steps="2", filters=from_hn, source="raw")
    assert (status, rows) == (200, [{"steps": ["/", "/pricing", "/signup"], "visits": 1, "visitors": 1}])
    email = json.dumps([["is", "channel", ["Email"]]])
    status, rows = get(api, auth, "/stats/journeys", **DAY_RANGE, filters=email, source="raw")
    assert (status, rows) == (200, [{"steps": ["/pricing"], "visits": 1, "visitors": 1}])
    swiss = json.dumps({"country": "CH"})  # a's two visits, not b's or d's
    status, rows = get(api, auth, "/stats/journeys", **DAY_RANGE, steps="1", filters=swiss, source="raw")
    assert status == 200
    assert {tuple(row["steps"]): row["visits"] for row in rows} == {("/", "/pricing"): 1, ("/blog",): 1}
    # agg reads `sessions` under visit filters too, and meta says so (other filtered reports read raw)
    status, body = get(api, auth, "/stats/journeys", **DAY_RANGE, filters=swiss, meta="true")
    assert status == 200 and body["meta"]["source"] == "agg", body
    status, body = get(api, auth, "/stats/journeys", **DAY_RANGE, filters=swiss, meta="true", source="raw")
    assert status == 200 and body["meta"]["source"] == "raw", body


def test_journeys_refuse_a_filter_on_an_event_saying_which_and_why(
    api: FlaskClient, auth: dict[str, str]
) -> None:
    page = json.dumps([["is", "country", ["CH"]], ["contains", "path", ["/pricing"]]])
    status, body = get(api, auth, "/stats/journeys", **DAY_RANGE, filters=page)
    assert status == 400
    assert body["error"].startswith("filters: ") and "'path'" in body["error"], body
    assert "whole visit" in body["error"] and "`page`" in body["error"], body


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("steps", "6"),
        ("steps", "0"),
        ("steps", "two"),
        ("direction", "sideways"),
        ("direction", ""),
        ("group", "blog/*"),
        ("min_visitors", "0"),
        ("limit", "0"),
        ("limit", "1001"),
        ("page", "pricing"),
        ("filters", "[]"),
        ("filters", '{"goal": "Signup"}'),
        ("filters", '{"props.plan": "pro"}'),
    ],
)
def test_journeys_refuse_a_bad_parameter_naming_it(
    api: FlaskClient, auth: dict[str, str], name: str, value: str
) -> None:
    status, body = get(api, auth, "/stats/journeys", **{**DAY_RANGE, name: value})
    assert status == 400 and body["error"].startswith(f"{name}:"), body


def test_journeys_need_a_key(api: FlaskClient) -> None:
    assert api.get("/api/v1/stats/journeys", query_string=DAY_RANGE).status_code == 401


# --- the OpenAPI document ------------------------------------------------------------------------


WHATIF_GOALS = "/api/v1/whatif/goals"


def test_openapi_document_lists_every_endpoint_and_each_answers(
    api: FlaskClient, auth: dict[str, str]
) -> None:
    response = api.get("/api/v1/openapi.json")  # public: it describes, it holds no numbers
    assert response.status_code == 200
    document = response.get_json()
    assert document["openapi"].startswith("3.")
    paths = document["paths"]
    assert (
        set(paths)
        == {
            "/api/v1/stats/aggregate",
            "/api/v1/stats/timeseries",
            "/api/v1/stats/breakdown",
            "/api/v1/stats/realtime",
            "/api/v1/stats/funnel",
            "/api/v1/stats/journeys",
            "/api/v1/stats/retention",  # its numbers: tests/integration/test_retention.py
            "/api/v1/sessions",
            "/api/v1/stats/goals",
            "/api/v1/stats/vitals",  # its numbers: tests/integration/test_vitals.py
            "/api/v1/alerts",
            "/api/v1/alerts/backtest",  # a POST: tests/integration/test_alert_backtest.py
            "/api/v1/query",  # a POST, the operator's: tests/integration/test_mcp_server.py
            "/api/v1/imports",  # GET here; its POST: tests/integration/test_imports_api.py
            "/api/v1/segments",  # also POST, PATCH, DELETE: tests/integration/test_segments_api.py
            "/api/v1/openapi.json",
            "/api/v1/export/events",  # a file, not JSON: tests/integration/test_export_figure.py
            "/api/v2/query",  # a POST: tests/integration/test_plausible_api.py
            WHATIF_GOALS,
        }
        | MANAGEMENT_PATHS
        | SITES_PATHS
        | ANNOTATIONS_PATHS
    )
    parameters = document["components"]["parameters"]
    samples = {
        "site": SITE,
        "from": DAY_RANGE["from"],
        "to": DAY_RANGE["to"],
        "by": "path",
        "steps": json.dumps([{"page": "/"}, {"page": "/pricing"}]),
    }
    for path, item in paths.items():
        if "get" not in item or path in MANAGEMENT_PATHS | SITES_PATHS | ANNOTATIONS_PATHS:  # their own tests
            continue
        if path == WHATIF_GOALS:  # needs a proposal and an admin: tests/integration/test_whatif_goals.py
            continue
        if path == "/api/v1/export/events":  # a file: tests/integration/test_export_figure.py
            continue
        names = [
            parameters[ref["$ref"].rsplit("/", 1)[1]]["name"] for ref in item["get"].get("parameters", [])
        ]
        required = [
            parameters[ref["$ref"].rsplit("/", 1)[1]]["name"]
            for ref in item["get"].get("parameters", [])
            if parameters[ref["$ref"].rsplit("/", 1)[1]]["required"]
        ]
        query = {name: samples[name] for name in names if name in samples}
        if path == "/api/v1/stats/journeys":  # its steps are a count, not the funnel's JSON
            query["steps"] = "2"
        answer = api.get(path, query_string=query, headers=auth)
        assert answer.status_code == 200, (path, answer.get_json())
        for name in required:  # and a documented required parameter really is required
            answer = api.get(path, query_string={k: v for k, v in query.items() if k != name}, headers=auth)
            assert answer.status_code == 400 and answer.get_json()["error"].startswith(f"{name}:"), path
        schema = item["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        _check_shape(document, schema, api.get(path, query_string=query, headers=auth).get_json())


def _check_shape(document: dict, schema: dict, value: object) -> None:
    """The answer has the documented type and required keys (a small subset of JSON Schema)."""
    if "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    if value is None and schema.get("nullable"):
        return
    kind = schema.get("type")
    if kind == "array":
        assert isinstance(value, list)
        for item in value:
            _check_shape(document, schema["items"], item)
    elif kind == "object":
        assert isinstance(value, dict)
        assert set(schema.get("required", [])) <= set(value)
        for name, property_schema in schema.get("properties", {}).items():
            if name in value:
                _check_shape(document, property_schema, value[name])
    elif kind == "integer":
        assert isinstance(value, int) and not isinstance(value, bool)
    elif kind == "number":
        assert isinstance(value, int | float) and not isinstance(value, bool)
    elif kind == "string":
        assert isinstance(value, str)
    elif kind == "boolean":
        assert isinstance(value, bool)
