"""Backtested alerts (storage/alert_backtest.py) on the real ClickHouse engine: the firings of
each kind of rule over two days of archived traffic equal the firings computed here, in plain
Python, from the events this test wrote; and the same backtest through
`POST /api/v1/alerts/backtest` and `tally alerts backtest`, with their 400s and one-line errors.

The streaming evaluation firing for the same windows on the same events (through Spark) is
tests/integration/test_alerts.py's last test.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage import users
from storage.alert_backtest import Backtest, backtest, backtest_rule
from storage.client import connect
from storage.goals import add_goal, make_goal
from storage.schema import apply_migrations
from storage.sites import add_site
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.events import archive_rows, page_view
from tests.integration.test_cli_errors import one_line_error

pytestmark = pytest.mark.integration

SITE = "backtest.alerts.example.com"
OTHER = "backtest-other.alerts.example.com"
END = datetime(2026, 11, 20, 15, 37, 20, tzinfo=UTC)  # mid-window on purpose
START = END - timedelta(days=2)
Window = tuple[datetime, float, float]  # start, value, threshold


def traffic(rng: random.Random) -> list[PageViewEvent]:
    """Three days (the baseline reaches before the history): a steady trickle, bursts of page
    views, error pages, and Signup events with quiet stretches between them."""
    t0 = START - timedelta(days=1)
    events = []
    for minute in range(3 * 24 * 60):
        at = t0 + timedelta(minutes=minute)
        if rng.random() < 0.3:
            events.append(page_view(SITE, f"v{minute % 50}", at + timedelta(seconds=rng.randrange(60)), "/"))
        if minute % 211 == 0:  # a burst
            events += [page_view(SITE, f"b{i}", at + timedelta(seconds=i), "/launch") for i in range(25)]
        if minute % 97 < 3:
            errors = rng.randrange(4)
            events += [
                page_view(SITE, f"e{i}", at + timedelta(seconds=7), f"/500/{minute}") for i in range(errors)
            ]
        if rng.random() < 0.01:
            events.append(
                page_view(SITE, f"s{minute}", at + timedelta(seconds=rng.randrange(60)), name="Signup")
            )
    events.append(page_view(OTHER, "x", START + timedelta(hours=1), "/"))  # another site's: never counted
    return events


@pytest.fixture(scope="module")
def events(dashboard_settings: Settings) -> list[PageViewEvent]:
    client = connect(dashboard_settings)
    for site in (SITE, OTHER):
        add_site(client, site)
    add_goal(client, make_goal(SITE, "Signup"))
    written = traffic(random.Random(21))
    rows, columns = archive_rows(written)
    client.insert("events", rows, column_names=columns)
    return written


@pytest.fixture(scope="module")
def client(dashboard_settings: Settings, events: list[PageViewEvent]) -> Client:
    return connect(dashboard_settings)


# --- the expected firings, computed here from the events written -----------------------------


def epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def counts_per_window(
    events: list[PageViewEvent], width_s: int, counts: Callable[[PageViewEvent], bool]
) -> Counter:
    return Counter(
        epoch(e.ts) // width_s * width_s for e in events if e.site == SITE and e.ts < END and counts(e)
    )


def expected_above(
    events: list[PageViewEvent],
    minutes: int,
    counts: Callable[[PageViewEvent], bool],
    bound: Callable[[Counter, int], float],
) -> list[Window]:
    """Every window overlapping the history whose count is above its bound (and not 0)."""
    width = minutes * 60
    per_window = counts_per_window(events, width, counts)
    first = epoch(START) // width * width
    return [
        (datetime.fromtimestamp(w, UTC), per_window[w], bound(per_window, w))
        for w in sorted(per_window)
        if w >= first and bound(per_window, w) is not None and per_window[w] > bound(per_window, w)
    ]


def is_pageview(event: PageViewEvent) -> bool:
    return event.name == "pageview"


def expected_absences(events: list[PageViewEvent], minutes: int) -> list[Window]:
    """Stretches of the history without a Signup lasting `minutes` or more."""
    times = sorted(e.ts for e in events if e.site == SITE and e.name == "Signup" and START <= e.ts < END)
    edges = [START, *times, END]
    return [
        (since, round((until - since).total_seconds() / 60, 1), minutes)
        for since, until in pairwise(edges)
        if until - since >= timedelta(minutes=minutes)
    ]


def fired(result: Backtest) -> list[Window]:
    return [(f.window_start, f.value, f.threshold) for f in result.firings]


# --- the backtest equals them --------------------------------------------------------------------


def test_a_threshold_rule_fires_for_the_windows_counted_here(
    client: Client, events: list[PageViewEvent]
) -> None:
    rule = backtest_rule(site=SITE, kind="pageviews_above", window_minutes=15, threshold=12)
    expected = expected_above(events, 15, is_pageview, lambda _counts, _w: 12)
    result = backtest(client, rule, START, END)
    assert fired(result) == expected
    assert result.total == len(expected) > 5  # the bursts, not every window
    assert all(f.window_end - f.window_start == timedelta(minutes=15) for f in result.firings)


def test_a_factor_rule_fires_above_k_times_the_trailing_mean_counted_here(
    client: Client, events: list[PageViewEvent]
) -> None:
    rule = backtest_rule(site=SITE, kind="pageviews_above", window_minutes=10, factor=3, baseline_windows=6)

    def three_times_the_mean(counts: Counter, w: int) -> float | None:
        mean = sum(counts[w - i * 600] for i in range(1, 7)) / 6
        return 3 * mean if mean > 0 else None

    expected = expected_above(events, 10, is_pageview, three_times_the_mean)
    result = backtest(client, rule, START, END)
    assert [(w, v, pytest.approx(t)) for w, v, t in fired(result)] == expected
    assert len(expected) > 5
    assert all(f.mean and f.threshold == pytest.approx(3 * f.mean) for f in result.firings)


def test_an_event_rate_rule_on_a_page_pattern_fires_for_the_minutes_counted_here(
    client: Client, events: list[PageViewEvent]
) -> None:
    rule = backtest_rule(site=SITE, kind="event_rate_above", page_pattern="/500*", threshold=2)
    expected = expected_above(
        events, 1, lambda e: is_pageview(e) and e.path.startswith("/500"), lambda _c, _w: 2
    )
    assert fired(backtest(client, rule, START, END)) == expected
    assert len(expected) > 5


def test_a_goal_absent_rule_fires_once_per_quiet_stretch_found_here(
    client: Client, events: list[PageViewEvent]
) -> None:
    rule = backtest_rule(site=SITE, kind="goal_absent", goal="Signup", window_minutes=90)
    expected = expected_absences(events, 90)
    result = backtest(client, rule, START, END)
    assert fired(result) == expected
    assert len(expected) > 3
    assert all(f.fired_at == f.window_start + timedelta(minutes=90) for f in result.firings)


# --- the API --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings, events: list[PageViewEvent]) -> FlaskClient:
    return build_app(dashboard_settings, clock=lambda: END).server.test_client()


@pytest.fixture(scope="module")
def auth(dashboard_settings: Settings) -> dict[str, str]:
    return {"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"}


def test_the_api_answers_the_backtest_over_the_days_before_now(
    api: FlaskClient, auth: dict[str, str], events: list[PageViewEvent]
) -> None:
    body = {"site": SITE, "kind": "pageviews_above", "window_minutes": 15, "threshold": 12, "days": 2}
    response = api.post("/api/v1/alerts/backtest", json=body, headers=auth)
    assert response.status_code == 200, response.get_json()
    answer = response.get_json()
    expected = expected_above(events, 15, is_pageview, lambda _c, _w: 12)
    assert answer["from"] == "2026-11-18T15:37:20Z" and answer["to"] == "2026-11-20T15:37:20Z"
    assert answer["total"] == len(expected) and answer["truncated"] is False
    assert [(f["window_start"], f["value"], f["threshold"]) for f in answer["firings"]] == [
        (w.isoformat().replace("+00:00", "Z"), v, t) for w, v, t in expected
    ]
    assert answer["description"] == "page views in 15 min above 12"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "pageviews_above", "threshold": 5}, "site"),
        ({"site": SITE, "kind": "pageviews_abov", "threshold": 5}, "kind"),
        ({"site": SITE, "kind": "pageviews_above", "threshold": "5"}, "threshold"),
        ({"site": SITE, "kind": "pageviews_above", "threshold": 5, "window_minutes": 0}, "window_minutes"),
        ({"site": SITE, "kind": "pageviews_above"}, "threshold"),
        ({"site": SITE, "kind": "pageviews_above", "threshold": 5, "days": 40}, "days"),
        ({"site": SITE, "kind": "pageviews_above", "threshold": 5, "until": "yesterday"}, "until"),
        ({"site": SITE, "kind": "pageviews_above", "threshold": 5, "until": "0001-01-02"}, "until"),
        ({"site": SITE, "kind": "pageviews_above", "threshold": 5, "colour": "red"}, "colour"),
        ({"site": SITE, "kind": "goal_absent", "goal": "Nope"}, "goal"),
        ({"site": "nowhere.example.com", "kind": "pageviews_above", "threshold": 5}, "site"),
        ({"site": SITE, "kind": "event_rate_above", "page_pattern": "500", "threshold": 5}, "page_pattern"),
        ([1, 2], "body"),
    ],
)
def test_a_bad_backtest_is_a_400_naming_the_field(
    api: FlaskClient, auth: dict[str, str], body: object, field: str
) -> None:
    response = api.post("/api/v1/alerts/backtest", json=body, headers=auth)
    assert response.status_code == 400
    assert response.get_json()["error"].startswith(f"{field}: ")


def test_a_team_members_key_backtests_its_sites_only(
    api: FlaskClient, dashboard_settings: Settings, events: list[PageViewEvent]
) -> None:
    client = connect(dashboard_settings)
    email = "member@backtest.alerts.example.com"
    token = users.create_invite(client, email, OTHER, "admin")  # the Alerts panel's role
    users.accept_invite(client, token, users.find_invite(client, token), "a long passphrase for the test")  # type: ignore[arg-type]
    _, key = users.create_key(client, email, [OTHER])
    member = {"Authorization": f"Bearer {key}"}
    body = {"kind": "pageviews_above", "threshold": 5, "days": 2}
    assert api.post("/api/v1/alerts/backtest", json={"site": SITE, **body}, headers=member).status_code == 403
    answer = api.post("/api/v1/alerts/backtest", json={"site": OTHER, **body}, headers=member)
    assert answer.status_code == 200 and answer.get_json()["total"] == 0


# --- the CLI --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def env(dashboard_settings: Settings, events: list[PageViewEvent]) -> dict[str, str]:
    apply_migrations(dashboard_settings)
    return os.environ | dashboard_settings.environment()


def test_the_cli_lists_the_windows_it_would_have_fired_for(
    env: dict[str, str], events: list[PageViewEvent]
) -> None:
    args = ["--minutes", "90", "--goal", "Signup", "--days", "2", "--until", "2026-11-20T15:37:20Z"]
    answer = run_tally(env, "alerts", "backtest", SITE, "goal_absent", *args, timeout=120)
    assert answer.returncode == 0, answer.stderr
    header, *lines = answer.stdout.splitlines()
    expected = expected_absences(events, 90)
    assert header == (
        f"goal 'Signup' not seen for 90 min: would have fired {len(expected)} times "
        "from 2026-11-18 15:37 to 2026-11-20 15:37 UTC"
    )
    assert [line.split("\t")[0] for line in lines] == [
        f"{since:%Y-%m-%d %H:%M:%S}" for since, _, _ in expected
    ]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["pageviews_above", "--above", "5", "--days", "0"], "days: a history of 1 to 31 days"),
        (["pageviews_above", "--above", "5", "--until", "soon"], "--until: an ISO-8601 time"),
        (["pageviews_above"], "a threshold N or a factor k"),
        (["goal_absent", "--goal", "Nope"], "has no goal 'Nope'"),
    ],
)
def test_cli_mistakes_get_one_line(env: dict[str, str], args: list[str], named: str) -> None:
    assert named in one_line_error(run_tally(env, "alerts", "backtest", SITE, *args, timeout=120))
