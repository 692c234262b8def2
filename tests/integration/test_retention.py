"""Retention (issue 35): known visitors over four weeks give the expected weekly cohorts, in UTC and
in Berlin's weeks; agg (the `sessions` rows the backfill writes) equals raw (the archive
sessionised) equals an independent count here, for several ranges; the answer names the visitor
identity it rests on and a cohort whose weeks span a change of it says so. Then the stats API's
route on the real app (its roles and errors, as the journeys route's) and the dashboard's
Retention tab callback through the real app, both giving the query layer's numbers.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from itertools import pairwise

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from dashboard.app import build_app
from dashboard.periods import period
from dashboard.view_tabs import RETENTION_TAB
from storage import users
from storage.calendar import local_date, local_midnight, zone
from storage.client import connect
from storage.queries.retention import report_weeks, retention
from storage.rollup_backfill import backfill_rollups
from storage.site_identity import set_rotation
from storage.sites import add_site
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.clickhouse import Endpoint, own_database_settings
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

GAP = timedelta(seconds=1800)
W0 = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday
UNTIL = date(2026, 11, 29)  # the Sunday of W0's fourth week
BERLIN = "Europe/Berlin"


def at(week: int, day: int, hour: int, minute: int = 0) -> datetime:
    return W0 + timedelta(weeks=week, days=day, hours=hour, minutes=minute)


def known_visitors(site: str) -> list[PageViewEvent]:
    """Visitors whose weeks are written out beside them (UTC weeks; Berlin's where they differ)."""
    visits = {
        "loyal": [
            at(0, 1, 10),
            at(1, 1, 10),
            at(2, 1, 10),
            at(3, 1, 10),
            at(4, 0, 10),
        ],  # the last after the report
        "twice": [at(0, 2, 9), at(2, 3, 9)],
        "once": [at(0, 3, 12), at(0, 3, 14)],  # two visits in one week: one week
        "late": [at(1, 0, 8), at(3, 4, 8)],
        "new-last": [at(3, 2, 15)],
        # Sunday 23:50 UTC, one visit on into Monday 00:10 (its week is its start's); Berlin: Monday 00:50
        "midnight": [at(0, 6, 23, 50), at(1, 0, 0, 10), at(2, 2, 11)],
        "berlin-edge": [at(1, 2, 12), at(1, 6, 23, 30)],  # Berlin: the second is Monday 00:30 of week 2
        "before": [at(-1, 2, 10), at(1, 3, 10)],  # first seen before the report: its cohort is week 1
        "early-berlin": [at(-1, 6, 23, 30), at(2, 1, 10)],  # Berlin: Monday 00:30 of week 0
        "edge-end": [at(0, 1, 10), at(3, 6, 23, 30)],  # Berlin: the second is after the report
    }
    events = []
    for visitor, starts in visits.items():
        for start in starts:
            events += [
                page_view(site, visitor, start, "/"),
                page_view(site, visitor, start + timedelta(minutes=5), "/a"),
            ]
    return events


# Written out by hand from the visits above: (week, visitors, returning 1, 2, 3 weeks later).
UTC_COHORTS = [
    (date(2026, 11, 2), 5, (1, 3, 2)),  # loyal, twice, once, midnight, edge-end
    (date(2026, 11, 9), 3, (0, 1)),  # late, berlin-edge, before
    (date(2026, 11, 16), 1, (0,)),  # early-berlin
    (date(2026, 11, 23), 1, ()),  # new-last
]
BERLIN_COHORTS = [
    (date(2026, 11, 2), 5, (1, 3, 1)),  # loyal, twice, once, early-berlin, edge-end
    (date(2026, 11, 9), 4, (2, 1)),  # late, midnight, berlin-edge, before
    (date(2026, 11, 16), 0, (0,)),
    (date(2026, 11, 23), 1, ()),
]


# --- the definition, independently --------------------------------------------------------


def expected_cohorts(
    events: list[PageViewEvent], site: str, weeks: tuple[date, ...], timezone: str
) -> list[tuple[date, int, tuple[int, ...]]]:
    """Visits split at gaps over 30 minutes; a visitor is in the local week its visit starts in,
    within the report's weeks; its cohort is the first; per cohort how many are back n weeks later."""
    tz = zone(timezone)
    start, end = local_midnight(weeks[0], tz), local_midnight(weeks[-1] + timedelta(days=7), tz)
    views: defaultdict[str, list[PageViewEvent]] = defaultdict(list)
    for event in events:
        if event.site == site and event.name == "pageview":
            views[event.visitor_id].append(event)
    seen: defaultdict[str, set[date]] = defaultdict(set)
    for visitor, own in views.items():
        own.sort(key=lambda e: (e.ts, str(e.event_id)))
        starts = [own[0].ts] + [b.ts for a, b in pairwise(own) if b.ts - a.ts > GAP]
        for moment in starts:
            if start <= moment < end:
                day = local_date(moment, tz)
                seen[visitor].add(day - timedelta(days=day.weekday()))
    counts: defaultdict[tuple[date, int], int] = defaultdict(int)
    for visited in seen.values():
        cohort = min(visited)
        for week in visited:
            counts[(cohort, (week - cohort).days // 7)] += 1
    return [
        (week, counts[(week, 0)], tuple(counts[(week, n)] for n in range(1, len(weeks) - i)))
        for i, week in enumerate(weeks)
    ]


def test_the_expected_cohorts_are_written_out() -> None:
    events = known_visitors("s")
    weeks = report_weeks(UNTIL, 4)
    assert expected_cohorts(events, "s", weeks, "UTC") == UTC_COHORTS
    assert expected_cohorts(events, "s", weeks, BERLIN) == BERLIN_COHORTS


# --- agg == raw == the definition ----------------------------------------------------------


def backfilled(client: Client, site: str, timezone: str) -> list[PageViewEvent]:
    """`site` registered in `timezone`, its known visitors archived and their days backfilled."""
    add_site(client, site, timezone)
    events = known_visitors(site)
    rows, columns = archive_rows(events)
    client.insert("events", rows, column_names=columns)
    for day in sorted({event.ts.date() for event in events}):
        backfill_rollups(client, site, day, day + timedelta(days=1))
    return events


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint) -> Client:
    return connect(
        own_database_settings(tmp_path_factory.mktemp("retention"), clickhouse_endpoint, "retention")
    )


def rows(client: Client, site: str, weeks: tuple[date, ...], timezone: str, source: str) -> list:
    report = retention(client, site, weeks, timezone, int(GAP.total_seconds()), source)  # type: ignore[arg-type]
    assert report.weeks == weeks
    return [(c.week, c.visitors, c.returning) for c in report.cohorts]


@pytest.mark.slow  # a backfill of 12 days: 5-15 s on 2 shared cores
@pytest.mark.parametrize(("timezone", "written_out"), [("UTC", UTC_COHORTS), (BERLIN, BERLIN_COHORTS)])
def test_backfilled_sessions_retention_agg_equals_raw_equals_the_definition(
    store: Client, timezone: str, written_out: list
) -> None:
    site = f"retention-{timezone.replace('/', '-').lower()}.example.com"
    events = backfilled(store, site, timezone)
    assert rows(store, site, report_weeks(UNTIL, 4), timezone, "agg") == written_out
    for until, count in (
        (UNTIL, 4),
        (UNTIL, 12),
        (UNTIL, 2),
        (date(2026, 11, 18), 3),
        (date(2026, 12, 6), 5),
    ):
        weeks = report_weeks(until, count)
        agg, raw = rows(store, site, weeks, timezone, "agg"), rows(store, site, weeks, timezone, "raw")
        assert agg == raw == expected_cohorts(events, site, weeks, timezone), (until, count)


@pytest.mark.slow  # a backfill of 12 days: 5-15 s on 2 shared cores
def test_the_answer_names_the_identity_and_a_cohort_spanning_a_change_says_so(store: Client) -> None:
    site = "retention-identity.example.com"
    backfilled(store, site, "UTC")
    weeks = report_weeks(UNTIL, 4)
    before = retention(store, site, weeks, "UTC", 1800)
    assert [(c.rotation, c.since) for c in before.identity] == [("daily", None)]
    assert all(cohort.note == "" for cohort in before.cohorts)

    assert set_rotation(store, site, "weekly", actor="test")
    now = datetime.now(UTC)
    this_week = report_weeks(now.date(), 2)
    after = retention(store, site, this_week, "UTC", 1800)
    (first, change) = after.identity
    assert first.rotation == "daily" and change.rotation == "weekly"
    assert change.since is not None and abs(change.since - now) < timedelta(minutes=5)
    # Both weeks' cohorts run on past the change: each says so
    assert all(
        c.note.startswith("spans a change of visitor identity: daily ids, then weekly") for c in after.cohorts
    )
    # Weeks wholly before the change rest on daily ids alone, as before
    earlier = retention(store, site, report_weeks(date(2026, 11, 22), 3), "UTC", 1800)
    assert [(c.rotation, c.since) for c in earlier.identity] == [("daily", None)]
    assert all(cohort.note == "" for cohort in earlier.cohorts)


# --- the stats API's route and the dashboard's tab on the real app ---------------------------


@pytest.fixture(scope="module")
def api_site(dashboard_settings: Settings) -> str:
    site = f"retention-api-{uuid.uuid4().hex[:8]}.example.com"
    backfilled(connect(dashboard_settings), site, BERLIN)
    return site


@pytest.fixture(scope="module")
def app(dashboard_settings: Settings) -> FlaskClient:
    settings = dashboard_settings.model_copy(update={"dashboard_password": "retention-tab"})
    return build_app(settings).server.test_client()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.slow  # a backfill of 12 days: 5-15 s on 2 shared cores
def test_the_route_answers_the_cohorts_and_the_identity(
    app: FlaskClient, api_site: str, dashboard_settings: Settings
) -> None:
    operator = bearer(dashboard_settings.resolved_api_key())
    query = {"site_id": api_site, "weeks": "4", "until": UNTIL.isoformat()}
    for source in ("agg", "raw"):
        answer = app.get("/api/v1/stats/retention", query_string=query | {"source": source}, headers=operator)
        assert answer.status_code == 200, answer.get_json()
        body = answer.get_json()
        assert body["site"] == api_site and body["timezone"] == BERLIN and body["source"] == source
        assert body["weeks"] == ["2026-11-02", "2026-11-09", "2026-11-16", "2026-11-23"]
        assert body["identity"] == [{"rotation": "daily", "since": None}]
        cohorts = [
            (date.fromisoformat(c["week"]), c["visitors"], tuple(c["returning"])) for c in body["cohorts"]
        ]
        assert cohorts == BERLIN_COHORTS
        assert body["cohorts"][1]["retention"] == [0.5, 0.25]
    # `site` names it too, as elsewhere
    assert (
        app.get("/api/v1/stats/retention", query_string={"site": api_site}, headers=operator).status_code
        == 200
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [("weeks", "0"), ("weeks", "13"), ("weeks", "two"), ("until", "29.11.2026"), ("until", "2026-02-30"),
     ("source", "cache"), ("period", "7d")],
)  # fmt: skip
def test_the_route_refuses_a_bad_parameter_naming_it(
    app: FlaskClient, dashboard_settings: Settings, name: str, value: str
) -> None:
    operator = bearer(dashboard_settings.resolved_api_key())
    query = {"site_id": "retention-refusals.example.com", name: value}  # refused before the store is read
    answer = app.get("/api/v1/stats/retention", query_string=query, headers=operator)
    assert answer.status_code == 400 and answer.get_json()["error"].startswith(f"{name}:"), answer.get_json()


def test_the_route_needs_a_key_that_may_read_the_site(app: FlaskClient, dashboard_settings: Settings) -> None:
    client = connect(dashboard_settings)
    api_site, other = (f"retention-{kind}-{uuid.uuid4().hex[:8]}.example.com" for kind in ("key", "other"))
    add_site(client, api_site)
    add_site(client, other)
    email = f"viewer-{uuid.uuid4().hex[:8]}@example.com"
    token = users.create_invite(client, email, api_site, "viewer")
    invite = users.find_invite(client, token)
    assert invite is not None
    users.accept_invite(client, token, invite, "a long viewer password")
    viewer = bearer(users.create_key(client, email, [api_site])[1])
    query = {"site_id": api_site}
    assert app.get("/api/v1/stats/retention", query_string=query).status_code == 401
    assert app.get("/api/v1/stats/retention", query_string=query, headers=viewer).status_code == 200
    refused = app.get("/api/v1/stats/retention", query_string={"site_id": other}, headers=viewer)
    assert refused.status_code == 403 and refused.get_json()["error"].startswith("site_id:")


@pytest.mark.slow  # a backfill of 12 days: 5-15 s on 2 shared cores
def test_the_tab_draws_the_cohorts_and_says_ids_are_daily(
    app: FlaskClient, api_site: str, dashboard_settings: Settings
) -> None:
    assert app.post("/login", data={"email": "", "password": "retention-tab"}).status_code == 302
    weeks = period("custom", datetime.now(UTC), date(2026, 11, 23), UNTIL, timezone=BERLIN).to_store()
    values = {"site": ("value", api_site), "period": ("data", weeks), "tabs": ("value", RETENTION_TAB),
              "retention-weeks": ("value", 4)}  # fmt: skip
    request = {
        "output": "..retention-identity.children...retention-heatmap.figure..",
        "outputs": [
            {"id": "retention-identity", "property": "children"},
            {"id": "retention-heatmap", "property": "figure"},
        ],
        "inputs": [{"id": name, "property": prop, "value": value} for name, (prop, value) in values.items()],
        "changedPropIds": [],
        "state": [],
    }
    answer = app.post("/_dash-update-component", json=request)
    assert answer.status_code == 200, answer.text[:500]
    response = answer.get_json()["response"]
    heatmap = response["retention-heatmap"]["figure"]["data"][0]
    assert heatmap["type"] == "heatmap"
    assert heatmap["y"] == ["2026-11-02 · 5", "2026-11-09 · 4", "2026-11-16 · 0", "2026-11-23 · 1"]
    assert heatmap["z"][1] == [100.0, 50.0, 25.0, None]
    assert heatmap["z"][2] == [None] * 4 and heatmap["text"][2] == [""] * 4  # nobody first came that week
    assert heatmap["text"][0] == ["100%<br>5", "20%<br>1", "60%<br>3", "20%<br>1"]
    identity = response["retention-identity"]["children"][0]["props"]
    assert identity["data-rotation"] == "daily"
    assert "rotate daily" in str(identity["children"]) and "later weeks read 0" in str(identity["children"])
