"""A site's visitor identity (issue 35) through the real collector app, the real broker and a store
of its own (its salts table is this test's alone, since the clock is moved): one browser gets the
same visitor id on two days of a week under `weekly` and two ids under `daily` (the default); a
rotation chosen while the collector runs applies from its next re-read; ip_hash keeps the day's
salt; the raw IP is never on the log; each rotation's salts are created ahead, kept through the
day after their period and deleted after."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime

import pytest
from starlette.testclient import TestClient

from collector.app import CollectorParts, build_app, production_parts
from collector.salts import Salts
from storage.client import connect
from storage.site_identity import set_rotation
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.clickhouse import Endpoint, own_database_settings
from tests.integration.test_collector import BROWSER_UA, events_on_log_for

pytestmark = pytest.mark.integration

WEDNESDAY = datetime(2026, 11, 25, 10, tzinfo=UTC)
THURSDAY = datetime(2026, 11, 26, 9, tzinfo=UTC)
CLIENT_IP = "81.2.69.142"


class Clock:
    """The collector's time, moved by the test."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def own_settings(
    tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint, settings: Settings
) -> Settings:
    return own_database_settings(
        tmp_path_factory.mktemp("identity"),
        clickhouse_endpoint,
        "identity",
        kafka_bootstrap=settings.kafka_bootstrap,
    )


@pytest.fixture
def own_store(tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint) -> Settings:
    return own_database_settings(tmp_path_factory.mktemp("salts"), clickhouse_endpoint, "salts")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    moved = Clock(WEDNESDAY)
    monkeypatch.setattr("collector.app.utc_now", moved)  # the receive time the salts are chosen by
    return moved


@pytest.fixture
def collector(own_settings: Settings, clock: Clock) -> Iterator[tuple[TestClient, CollectorParts]]:
    parts = production_parts(own_settings)
    parts.salts = Salts(connect(own_settings), clock=clock)
    with TestClient(build_app(own_settings, parts), client=("127.0.0.1", 40000)) as client:
        yield client, parts


def beacon(client: TestClient, site: str, path: str) -> None:
    response = client.post(
        "/api/event",
        content=json.dumps({"d": site, "u": f"https://{site}{path}"}),
        headers={"Content-Type": "text/plain", "User-Agent": BROWSER_UA, "X-Forwarded-For": CLIENT_IP},
    )
    assert response.status_code == 202, response.text


def ids_on_the_log(settings: Settings, tag: str) -> dict[str, dict[str, tuple[str, str]]]:
    """site -> path -> (visitor_id, ip_hash) of the events of the sites named with `tag` on the
    log (one read of it); the raw IP on none of them."""
    events = events_on_log_for(settings, f"{tag}.identity.example.com")
    assert events and all(CLIENT_IP not in event.model_dump_json() for event in events)
    seen: dict[str, dict[str, tuple[str, str]]] = {}
    for event in events:
        seen.setdefault(event.site, {})[event.path] = (event.visitor_id, event.ip_hash)
    return seen


def test_weekly_ids_last_the_week_daily_ids_a_day(
    collector: tuple[TestClient, CollectorParts], own_settings: Settings, clock: Clock
) -> None:
    client, parts = collector
    store = connect(own_settings)
    tag = datetime.now(UTC).strftime("%H%M%S%f")
    weekly, daily, monthly = (f"{kind}-{tag}.identity.example.com" for kind in ("weekly", "daily", "monthly"))
    for site in (weekly, daily, monthly):
        add_site(store, site)
    assert set_rotation(store, weekly, "weekly") and set_rotation(store, monthly, "monthly")
    parts.salts.refresh_rotations()  # as its background re-read does every 2 s
    parts.sites.refresh()
    for site in (weekly, daily, monthly):
        beacon(client, site, "/wednesday")
    clock.now = THURSDAY
    parts.salts.refresh()  # as its background refresh does: Thursday's salts in hand
    for site in (weekly, daily, monthly):
        beacon(client, site, "/thursday")

    seen = ids_on_the_log(own_settings, tag)
    for site in (weekly, monthly):
        assert seen[site]["/wednesday"][0] == seen[site]["/thursday"][0], site  # one visitor, two days
        assert seen[site]["/wednesday"][1] != seen[site]["/thursday"][1], site  # ip_hash: the day's salt
    assert seen[daily]["/wednesday"][0] != seen[daily]["/thursday"][0]  # daily: a new id each UTC day
    assert len({seen[site]["/wednesday"][0] for site in (weekly, daily, monthly)}) == 3


def test_a_rotation_chosen_while_the_collector_runs_applies_from_its_next_read(
    collector: tuple[TestClient, CollectorParts], own_settings: Settings
) -> None:
    client, parts = collector
    store = connect(own_settings)
    tag = datetime.now(UTC).strftime("%H%M%S%f")
    site = f"switch-{tag}.identity.example.com"
    add_site(store, site)
    parts.sites.refresh()
    beacon(client, site, "/daily")
    assert set_rotation(store, site, "weekly")
    parts.salts.refresh_rotations()
    beacon(client, site, "/weekly")
    beacon(client, site, "/weekly-again")
    seen = ids_on_the_log(own_settings, tag)[site]
    assert (
        seen["/daily"][0] != seen["/weekly"][0] == seen["/weekly-again"][0]
    )  # an id never survives a change


def test_each_rotations_salts_are_made_ahead_and_deleted_the_day_after_their_period(
    own_store: Settings,
) -> None:
    store = connect(own_store)
    clock = Clock(WEDNESDAY)
    Salts(store, clock=clock).refresh()
    kept = "SELECT period, day FROM salts ORDER BY period, day"
    assert store.query(kept).result_rows == [
        ("daily", date(2026, 11, 25)), ("daily", date(2026, 11, 26)),
        ("monthly", date(2026, 11, 1)), ("monthly", date(2026, 12, 1)),
        ("weekly", date(2026, 11, 23)), ("weekly", date(2026, 11, 30)),
    ]  # fmt: skip
    clock.now = datetime(2026, 12, 1, 12, tzinfo=UTC)  # Tuesday: November and its last week are over
    Salts(store, clock=clock).refresh()
    assert store.query(kept).result_rows == [
        ("daily", date(2026, 12, 1)), ("daily", date(2026, 12, 2)),
        ("monthly", date(2026, 11, 1)), ("monthly", date(2026, 12, 1)), ("monthly", date(2027, 1, 1)),
        ("weekly", date(2026, 11, 30)), ("weekly", date(2026, 12, 7)),
    ]  # fmt: skip
    clock.now = datetime(2026, 12, 2, 12, tzinfo=UTC)  # the day after November's last: its salt goes
    Salts(store, clock=clock).refresh()
    assert store.query(kept).result_rows == [
        ("daily", date(2026, 12, 1)), ("daily", date(2026, 12, 2)), ("daily", date(2026, 12, 3)),
        ("monthly", date(2026, 12, 1)), ("monthly", date(2027, 1, 1)),
        ("weekly", date(2026, 11, 30)), ("weekly", date(2026, 12, 7)),
    ]  # fmt: skip
