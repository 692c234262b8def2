"""Saved funnels (storage/saved_funnels.py) on the real ClickHouse engine: `tally funnels
add/list/remove` as a user runs them, the stats API's `funnel=NAME`, and the background-jobs
process (`python -m dashboard.jobs`) that computes a saved funnel's closed days, after which its
first request reads stored days only, with the numbers of raw and of the Python computation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage import queries, saved_funnels
from storage.client import connect
from storage.queries import FunnelStep, StatsQuery
from storage.sites import add_site
from tally.event import PageViewEvent
from tally.heartbeat import heartbeat_path
from tally.settings import PROJECT_ROOT, Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.events import archive_rows, page_view
from tests.fixtures.funnel_truth import expected_funnel
from tests.integration.test_cli_errors import one_line_error

pytestmark = pytest.mark.integration

SITE = "saved-funnels.example.com"
BACKGROUND_SITE = "saved-funnels-background.example.com"
# Relative to today: the jobs process runs on the real clock and stores only the closed days of
# its precompute window (the last 62), so fixed dates would fall out of it with time.
DAY = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=8)
NOW = DAY + timedelta(days=8, hours=12)
STEPS = [FunnelStep("page", "/product/*"), FunnelStep("event", "Signup")]


def traffic(site: str) -> list[PageViewEvent]:
    """Three days, a visitor a day reaching the sign-up and one stopping at the product page."""
    events = []
    for day in range(3):
        start = DAY + timedelta(days=day, hours=10)
        events += [
            page_view(site, f"buyer{day}", start, "/product/a"),
            page_view(site, f"buyer{day}", start + timedelta(minutes=3), "/", name="Signup"),
            page_view(site, f"looker{day}", start, "/product/b"),
        ]
    return events


@pytest.fixture(scope="module")
def store(dashboard_settings: Settings) -> Client:
    client = connect(dashboard_settings)
    for site in (SITE, BACKGROUND_SITE):
        add_site(client, site)
        rows, columns = archive_rows(traffic(site))
        client.insert("events", rows, column_names=columns)
    return client


@pytest.fixture(scope="module")
def env(dashboard_settings: Settings, store: Client) -> dict[str, str]:
    return os.environ | dashboard_settings.environment()


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings, store: Client) -> FlaskClient:
    return build_app(dashboard_settings, clock=lambda: NOW).server.test_client()


def tally(env: dict[str, str], *args: str) -> str:
    answer = run_tally(env, *args, timeout=120)
    assert answer.returncode == 0, answer.stderr
    return answer.stdout


def test_add_list_remove_from_the_cli(env: dict[str, str]) -> None:
    assert "added funnel 'Checkout' to saved-funnels.example.com (2 steps)" in tally(
        env, "funnels", "add", SITE, "Checkout", "/product/*", "Signup"
    )
    assert tally(env, "funnels", "list", SITE).splitlines() == ["Checkout\t/product/*\tSignup"]
    assert "removed funnel 'Checkout'" in tally(env, "funnels", "remove", SITE, "Checkout")
    assert tally(env, "funnels", "list", SITE) == ""


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["funnels", "add", "not-registered.example.com", "F", "/a", "B"], "is not registered"),
        (["funnels", "add", SITE, "F", "/a"], "2 to 8 steps"),
        (["funnels", "add", SITE, "F", "/a", "engagement"], "step 2: 'engagement' is no custom event"),
        (["funnels", "add", SITE, "", "/a", "B"], "a funnel's name has 1 to 120"),
        (["funnels", "remove", SITE, "Nothing"], "has no funnel 'Nothing'"),
    ],
)
def test_cli_mistakes_get_one_line(env: dict[str, str], args: list[str], named: str) -> None:
    assert named in one_line_error(run_tally(env, *args, timeout=120))


def test_the_api_answers_a_saved_funnel_by_name(
    store: Client, api: FlaskClient, dashboard_settings: Settings
) -> None:
    if "Signup" not in {funnel.name for funnel in saved_funnels.list_funnels(store, SITE)}:
        saved_funnels.add_funnel(store, SITE, "Signup", STEPS)
    auth = {"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"}
    last = DAY + timedelta(days=3)
    window = {"site": SITE, "from": DAY.date().isoformat(), "to": last.date().isoformat()}
    by_name = api.get("/api/v1/stats/funnel", query_string={**window, "funnel": "Signup"}, headers=auth)
    steps = json.dumps([{"page": "/product/*"}, {"event": "Signup"}])
    by_steps = api.get("/api/v1/stats/funnel", query_string={**window, "steps": steps}, headers=auth)
    assert by_name.status_code == 200, by_name.get_json()
    assert by_name.get_json()["steps"] == by_steps.get_json()["steps"]
    assert [row["visitors"] for row in by_name.get_json()["steps"]] == [6, 3]
    unknown = api.get("/api/v1/stats/funnel", query_string={**window, "funnel": "Nope"}, headers=auth)
    assert unknown.status_code == 400 and "funnel" in unknown.get_json()["error"]
    both = api.get(
        "/api/v1/stats/funnel", query_string={**window, "funnel": "Signup", "steps": steps}, headers=auth
    )
    assert both.status_code == 400 and "not both" in both.get_json()["error"]


def test_the_jobs_process_stores_a_saved_funnels_days(store: Client, dashboard_settings: Settings) -> None:
    saved_funnels.add_funnel(store, BACKGROUND_SITE, "Signup", STEPS)
    settings = dashboard_settings.model_copy(update={"funnel_precompute_interval_s": 3600})
    heartbeat_path(settings, "jobs").unlink(missing_ok=True)
    log = (settings.home_dir / "jobs.log").open("ab")
    jobs = subprocess.Popen(
        [sys.executable, "-m", "dashboard.jobs"],
        cwd=PROJECT_ROOT,
        env=os.environ | settings.environment(),
        stdout=log,
        stderr=log,
    )
    try:
        wait_for_stored_days(store, BACKGROUND_SITE)
        assert heartbeat_path(settings, "jobs").exists()  # `tally status` sees it alive
    finally:
        jobs.send_signal(signal.SIGTERM)
        assert jobs.wait(timeout=30) == 0  # stops cleanly on the supervisor's signal
        log.close()
    q = StatsQuery(BACKGROUND_SITE, DAY, DAY + timedelta(days=3))
    first = queries.funnel(store, q, STEPS, source="agg", now=NOW)
    assert first.days is not None and (first.days.stored_days, first.days.computed_days) == (3, 0)
    raw = queries.funnel(store, q, STEPS, source="raw")
    answered = [(r.visitors, r.sessions) for r in first.steps]
    assert answered == [(r.visitors, r.sessions) for r in raw.steps]
    assert answered == expected_funnel(traffic(BACKGROUND_SITE), q, STEPS)


def test_a_pass_computes_only_what_is_missing(store: Client) -> None:
    if "Signup" not in {funnel.name for funnel in saved_funnels.list_funnels(store, SITE)}:
        saved_funnels.add_funnel(store, SITE, "Signup", STEPS)
    later = NOW + timedelta(days=40)  # past what any other pass here reached
    saved_funnels.precompute(store, later)
    assert saved_funnels.precompute(store, later) == 0  # every closed day stored, none changed
    # a day later: the day that closed since, once for each distinct funnel (funnels saved under
    # other names with the same site and steps share their stored days, as other tests' do)
    distinct = {(funnel.site, repr(funnel.steps)) for funnel in saved_funnels.list_funnels(store)}
    assert saved_funnels.precompute(store, later + timedelta(days=1)) == len(distinct)


def wait_for_stored_days(client: Client, site: str, patience_s: float = 120) -> None:
    """Until the background-jobs process has stored the site's days."""
    deadline = time.monotonic() + patience_s
    while time.monotonic() < deadline:
        stored = client.query(
            "SELECT count() FROM funnel_days WHERE site = {site:String}", parameters={"site": site}
        ).result_rows[0][0]
        if stored:
            return
        threading.Event().wait(0.5)
    raise AssertionError(f"no funnel day stored for {site} within {patience_s} s")
