"""`tally alerts add/list/remove` as a user runs them (the real CLI as a subprocess, the real
store): what works, and each mistake answered in one line without a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage.client import connect
from storage.goals import add_goal, make_goal
from storage.schema import apply_migrations
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.clickhouse import Endpoint
from tests.fixtures.ports import free_port
from tests.integration.test_cli_errors import one_line_error

pytestmark = pytest.mark.integration

SITE = "cli.alerts.example.com"
HOOK = "https://hooks.example.com/tally"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint) -> dict[str, str]:
    settings = Settings(
        home=tmp_path_factory.mktemp("alerts-cli-home"),
        clickhouse_url=clickhouse_endpoint.url,
        clickhouse_password=clickhouse_endpoint.password,
    )
    apply_migrations(settings)
    add_site(connect(settings), SITE)
    add_goal(connect(settings), make_goal(SITE, "Signup"))
    return os.environ | settings.environment()


def tally(env: dict[str, str], *args: str) -> str:
    answer = run_tally(env, *args, timeout=120)
    assert answer.returncode == 0, answer.stderr
    return answer.stdout


def test_add_list_remove(env: dict[str, str]) -> None:
    busy = tally(
        env, "alerts", "add", SITE, "pageviews_above", "--minutes", "5", "--above", "100", "--webhook", HOOK
    )
    rule_id = busy.split()[3]
    tally(env, "alerts", "add", SITE, "goal_absent", "--goal", "Signup", "--minutes", "30", "--webhook", HOOK)
    tally(
        env, "alerts", "add", SITE, "event_rate_above", "--page", "/500*", "--above", "10", "--webhook", HOOK
    )
    listed = tally(env, "alerts", "list", SITE).splitlines()
    assert [line.split("\t")[1:] for line in listed] == [
        ["pageviews_above", "page views in 5 min above 100", HOOK],
        ["goal_absent", "goal 'Signup' not seen for 30 min", HOOK],
        ["event_rate_above", "page views of /500* above 10 per minute", HOOK],
    ]
    assert f"removed alert rule {rule_id}" in tally(env, "alerts", "remove", SITE, rule_id)
    assert rule_id not in tally(env, "alerts", "list", SITE)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["pageviews_above", "--above", "5", "--webhook", "ftp://x.example/h"], "http:// or https://"),
        (["pageviews_above", "--above", "5", "--webhook", "https://u:p@x.example/"], "no credentials"),
        (["pageviews_above", "--webhook", HOOK], "a threshold N or a factor k"),
        (["pageviews_above", "--above", "5", "--minutes", "0", "--webhook", HOOK], "window_minutes"),
        (["goal_absent", "--goal", "Nope", "--webhook", HOOK], "has no goal 'Nope'"),
        (["event_rate_above", "--above", "5", "--webhook", HOOK], "an event name or a page pattern"),
        (["event_rate_above", "--page", "500", "--above", "5", "--webhook", HOOK], "starts with /"),
        (["pageviews_abov", "--above", "5", "--webhook", HOOK], "pageviews_above"),
    ],
)
def test_mistakes_get_one_line(env: dict[str, str], args: list[str], named: str) -> None:
    assert named in one_line_error(run_tally(env, "alerts", "add", SITE, *args, timeout=120))


def test_unregistered_site_and_unknown_rule_get_one_line(env: dict[str, str]) -> None:
    args = ["pageviews_above", "--above", "5", "--webhook", HOOK]
    line = one_line_error(run_tally(env, "alerts", "add", "nowhere.example.com", *args, timeout=120))
    assert "nowhere.example.com is not registered" in line
    assert "has no alert rule 'zzz'" in one_line_error(
        run_tally(env, "alerts", "remove", SITE, "zzz", timeout=120)
    )


def test_store_down_is_one_line(tmp_path: Path) -> None:
    env = os.environ | {
        "TALLY_HOME": str(tmp_path),
        "TALLY_CLICKHOUSE_URL": f"http://127.0.0.1:{free_port()}",
    }
    assert "the store is not running" in one_line_error(run_tally(env, "alerts", "list", SITE, timeout=120))
