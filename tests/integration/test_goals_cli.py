"""`tally goals add/list/remove` as a user runs them (the real CLI as a subprocess, the real
store): what works, and each mistake answered in one line without a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage.client import connect
from storage.schema import apply_migrations
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.clickhouse import Endpoint
from tests.fixtures.ports import free_port
from tests.integration.test_cli_errors import one_line_error

pytestmark = pytest.mark.integration

SITE = "cli.goals.example.com"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint) -> dict[str, str]:
    settings = Settings(
        home=tmp_path_factory.mktemp("goals-cli-home"),
        clickhouse_url=clickhouse_endpoint.url,
        clickhouse_password=clickhouse_endpoint.password,
    )
    apply_migrations(settings)
    add_site(connect(settings), SITE)
    return os.environ | settings.environment()


def tally(env: dict[str, str], *args: str) -> str:
    answer = run_tally(env, *args, timeout=120)
    assert answer.returncode == 0, answer.stderr
    return answer.stdout


def test_add_list_remove(env: dict[str, str]) -> None:
    tally(env, "goals", "add", SITE, "Signup")
    tally(env, "goals", "add", SITE, "--page", "/checkout/*")
    tally(env, "goals", "add", SITE, "Purchase", "--currency", "eur")
    assert tally(env, "goals", "list", SITE).splitlines() == [
        "Purchase\tevent\tPurchase\tEUR",
        "Signup\tevent\tSignup",
        "Visit /checkout/*\tpage\t/checkout/*",
    ]
    assert "removed goal 'Signup'" in tally(env, "goals", "remove", SITE, "Signup")
    assert "Signup" not in tally(env, "goals", "list", SITE)
    tally(env, "goals", "add", SITE, "Signup")  # added again after a removal
    assert "Signup\tevent\tSignup" in tally(env, "goals", "list", SITE)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (
            ["goals", "add", "not-registered.example.com", "Signup"],
            "not-registered.example.com is not registered",
        ),
        (["goals", "add", SITE, ""], "either an event name or a page pattern"),
        (["goals", "add", SITE, "Signup", "--page", "/a"], "either an event name or a page pattern"),
        (["goals", "add", SITE, "--page", "checkout"], "starts with /"),
        (["goals", "add", SITE, "Paid", "--currency", "EURO"], "ISO-4217"),
        (["goals", "add", SITE, "pageview"], "not a custom event"),
        (["goals", "add", "not a domain", "Signup"], "not a domain name"),
        (["goals", "remove", SITE, "Nothing"], "has no goal 'Nothing'"),
        (["goals", "ad", SITE, "Signup"], "Did you mean 'add'"),
    ],
)
def test_mistakes_get_one_line(env: dict[str, str], args: list[str], named: str) -> None:
    assert named in one_line_error(run_tally(env, *args, timeout=120))


def test_duplicate_is_refused(env: dict[str, str]) -> None:
    tally(env, "goals", "add", SITE, "Download")
    assert "already has a goal 'Download'" in one_line_error(run_tally(env, "goals", "add", SITE, "Download"))


def test_store_down_is_one_line(tmp_path: Path) -> None:
    env = os.environ | {
        "TALLY_HOME": str(tmp_path),
        "TALLY_CLICKHOUSE_URL": f"http://127.0.0.1:{free_port()}",
    }
    line = one_line_error(run_tally(env, "goals", "list", SITE, timeout=120))
    assert "the store is not running" in line
