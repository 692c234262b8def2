"""Provenance per figure (storage/queries/provenance.py, `agreement.figures`) and scoped to a team
member's key, on the real ClickHouse engine through the stats API.

The derived tables are built here from the archive by storage/rollup_backfill.py (the stream
jobs' rows, computed in SQL) and the goal tables' own materialized views; the stream jobs'
progress is one `stream_offsets` row. Spark's own rows are checked against raw in
test_provenance.py and test_stream_agg_equals_raw.py. Each figure agrees; then a session too
many in the rollups and the Signup events gone from goal_events_day are each named, day and
numbers, while the other figures still agree. A team member's key sees its site's offsets and
late events, never the log's end offsets, and is refused the other site.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage import users
from storage.client import connect
from storage.rollup_backfill import backfill_rollups
from storage.sites import add_site
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.clickhouse import Endpoint, own_database_settings
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

SITE = "figures.provenance.example.com"
OTHER = "other.provenance.example.com"
DAY = datetime(2026, 11, 18, tzinfo=UTC)
NOW = DAY + timedelta(days=2, hours=12)
RANGE = {"from": "2026-11-18T00:00:00Z", "to": "2026-11-20T00:00:00Z"}
TOPIC = "pageviews-figures"
MEMBER = "member@figures.example.com"


def visits(site: str, day: datetime, visitors: int) -> list[PageViewEvent]:
    """Each visitor: two sessions of 1-3 page views (an hour apart), a Signup in the first."""
    events = []
    for v in range(visitors):
        for session, start in enumerate(
            (day + timedelta(hours=9, minutes=v), day + timedelta(hours=11, minutes=v))
        ):
            for n in range(1 + (v + session) % 3):
                events.append(page_view(site, f"{site}-{v}", start + timedelta(minutes=2 * n), f"/p{n}"))
        events.append(
            page_view(site, f"{site}-{v}", day + timedelta(hours=9, minutes=v, seconds=30), name="Signup")
        )
    return events


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint) -> Settings:
    """A database of its own: made-up offsets of partition 0 never reach another test's archive."""
    settings = own_database_settings(
        tmp_path_factory.mktemp("figures-home"), clickhouse_endpoint, "figures", pageviews_topic=TOPIC
    )
    return settings


@pytest.fixture(scope="module")
def client(settings: Settings) -> Iterator[Client]:
    client = connect(settings)
    for site in (SITE, OTHER):
        add_site(client, site)
    events = [
        e for day in (DAY, DAY + timedelta(days=1)) for site in (SITE, OTHER) for e in visits(site, day, 5)
    ]
    rows, columns = archive_rows(events, partition=0)  # offsets 0.. in this order
    client.insert("events", rows, column_names=columns)
    client.insert(
        "stream_offsets",
        [["activity", TOPIC, 0, len(events), 1]],
        column_names=["query_name", "topic", "partition", "end_offset", "batch_id"],
    )
    client.insert(
        "late_events",
        [["activity", OTHER, DAY + timedelta(hours=9), 1, 4]],
        column_names=["query_name", "site", "window_start", "batch_id", "events"],
    )
    for site in (SITE, OTHER):
        backfill_rollups(client, site, DAY.date(), (DAY + timedelta(days=2)).date())
    yield client


@pytest.fixture(scope="module")
def api(settings: Settings, client: Client) -> FlaskClient:
    return build_app(settings, clock=lambda: NOW).server.test_client()


def meta(api: FlaskClient, key: str, site: str = SITE) -> dict:
    response = api.get(
        "/api/v1/stats/aggregate",
        query_string={"site": site, "meta": "true", "source": "agg", **RANGE},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()["meta"]


def test_each_figure_says_whether_agg_and_raw_agree_and_what_is_not_checked(
    api: FlaskClient, settings: Settings
) -> None:
    agreement = meta(api, settings.resolved_api_key())["agreement"]
    figures = agreement["figures"]
    assert agreement["status"] == "agree"
    for figure in ("pageviews_visitors", "sessions", "goal_events", "custom_events"):
        assert figures[figure]["status"] == "agree", figure
        assert figures[figure]["checked_days"] == 2 and figures[figure]["days"] == [], figure
    for figure in ("breakdowns", "engagement", "funnels"):
        assert figures[figure]["status"] == "not checked" and figures[figure]["reason"], figure


def test_a_figure_that_differs_is_named_with_its_day_and_both_sides(
    api: FlaskClient, settings: Settings, client: Client
) -> None:
    second = DAY + timedelta(days=1)
    # A session too many in the rollups' totals of the first day ...
    client.insert(
        "rollup_day",
        [[SITE, "", DAY.date(), "", 0, 0, 1, 0, 0]],
        column_names=[
            "site",
            "dimension",
            "bucket",
            "value",
            "pageviews",
            "visitors",
            "sessions",
            "bounces",
            "duration_ms",
        ],
    )
    # ... and the second day's Signup events gone from goal_events_day.
    client.command(
        "ALTER TABLE goal_events_day DELETE WHERE site = {site:String} AND day = {day:Date} "
        "AND name = 'Signup' SETTINGS mutations_sync = 2",
        parameters={"site": SITE, "day": second.date()},
    )
    raw_sessions = 10  # 5 visitors x 2 sessions a day

    agreement = meta(api, settings.resolved_api_key())["agreement"]
    figures = agreement["figures"]

    assert agreement["status"] == "disagree"
    [sessions_day] = figures["sessions"]["days"]
    assert sessions_day["day"] == "2026-11-18T00:00:00Z"
    assert sessions_day["raw"]["sessions"] == raw_sessions
    assert sessions_day["agg"]["sessions"] == raw_sessions + 1
    assert figures["goal_events"]["days"] == [
        {"day": "2026-11-19T00:00:00Z", "raw": {"Signup": 5}, "agg": {"Signup": 0}}
    ]
    assert figures["custom_events"]["status"] == "agree"  # goal_visitors_day untouched
    assert figures["pageviews_visitors"]["status"] == "agree" and agreement["days"] == []


def test_a_team_members_key_sees_its_sites_offsets_and_late_events_only(
    api: FlaskClient, settings: Settings, client: Client
) -> None:
    token = users.create_invite(client, MEMBER, SITE, "viewer")
    users.accept_invite(client, token, users.find_invite(client, token), "a long passphrase for the test")  # type: ignore[arg-type]
    _, key = users.create_key(client, MEMBER, [SITE])
    operator = meta(api, settings.resolved_api_key(), OTHER)
    member = meta(api, key)

    per_day = len(visits(SITE, DAY, 5))  # archived day by day, SITE's then OTHER's
    # The operator sees the log's end offset (every site's events); OTHER's late events are OTHER's.
    assert operator["log"]["processed_to"] == {"0": 4 * per_day}
    assert operator["late_events"]["count"] == 4
    # The member: its site's events' offsets, pending, its late events (none); no end offsets.
    [partition] = member["log"]["partitions"]
    assert "processed_to" not in partition and "processed_to" not in member["log"]
    assert (partition["first_offset"], partition["last_offset"]) == (0, 3 * per_day - 1)
    assert partition["events"] == 2 * per_day and partition["pending"] == 0
    assert member["late_events"]["count"] == 0
    assert "scope" in member["log"]
    refused = api.get(
        "/api/v1/stats/aggregate",
        query_string={"site": OTHER, "meta": "true", **RANGE},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert refused.status_code == 403
