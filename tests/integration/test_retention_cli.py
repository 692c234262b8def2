"""`tally sites identity` and `tally stats retention` as a user runs them (the real CLI as a
subprocess, the real store): the identity set and shown, the report's JSON equal to the query
layer's and its lines readable; every mistake is one line naming what to fix."""

from __future__ import annotations

import json
import os

import pytest

from storage.client import connect
from storage.queries.retention import report_weeks, retention
from storage.schema import apply_migrations
from storage.site_identity import site_rotation
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.clickhouse import Endpoint
from tests.integration.test_cli_errors import one_line_error
from tests.integration.test_retention import UNTIL, backfilled

# a dozen CLI runs in subprocesses
pytestmark = [pytest.mark.integration, pytest.mark.slow]

SITE = "cli.retention.example.com"


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint) -> Settings:
    """A store of the known visitors' site, in Berlin, backfilled."""
    settings = Settings(
        home=tmp_path_factory.mktemp("retention-cli-home"),
        clickhouse_url=clickhouse_endpoint.url,
        clickhouse_password=clickhouse_endpoint.password,
    )
    apply_migrations(settings)
    backfilled(connect(settings), SITE, "Europe/Berlin")
    return settings


@pytest.fixture(scope="module")
def env(settings: Settings) -> dict[str, str]:
    return os.environ | settings.environment()


def test_the_identity_is_shown_and_set_and_mistakes_are_one_line(
    env: dict[str, str], settings: Settings
) -> None:
    shown = run_tally(env, "sites", "identity", SITE, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"{SITE}: visitor ids rotate daily"
    changed = run_tally(env, "sites", "identity", SITE, "--rotation", "weekly", timeout=120)
    assert changed.returncode == 0, changed.stderr
    assert "visitor ids rotate weekly from now on" in changed.stdout
    assert site_rotation(connect(settings), SITE) == "weekly"
    assert run_tally(env, "sites", "identity", SITE, timeout=120).stdout.startswith(
        f"{SITE}: visitor ids rotate weekly since "
    )
    typo = run_tally(env, "sites", "identity", SITE, "--rotation", "weakly", timeout=120)
    assert "rotation: 'weakly' is not one of daily, weekly, monthly" in one_line_error(typo)
    unknown = run_tally(
        env, "sites", "identity", "unregistered.example.com", "--rotation", "weekly", timeout=120
    )
    assert "unregistered.example.com is not registered" in one_line_error(unknown)
    not_a_domain = run_tally(env, "sites", "identity", "not a domain", timeout=120)
    assert "not a domain name" in one_line_error(not_a_domain)
    assert site_rotation(connect(settings), SITE) == "weekly"  # the mistakes changed nothing


def test_stats_retention_prints_the_query_layers_cohorts(env: dict[str, str], settings: Settings) -> None:
    printed = run_tally(
        env, "stats", "retention", SITE, "--weeks", "4", "--until", UNTIL.isoformat(), "--json"
    )
    assert printed.returncode == 0, printed.stderr
    answer = json.loads(printed.stdout)
    expected = retention(connect(settings), SITE, report_weeks(UNTIL, 4), "Europe/Berlin", 1800)
    assert [(c["week"], c["visitors"], c["returning"]) for c in answer["cohorts"]] == [
        (c.week.isoformat(), c.visitors, list(c.returning)) for c in expected.cohorts
    ]
    assert answer["cohorts"][0]["visitors"] == 5 and answer["timezone"] == "Europe/Berlin"
    lines = run_tally(
        env, "stats", SITE, "--retention", "--weeks", "4", "--until", UNTIL.isoformat()
    ).stdout.splitlines()
    assert lines[0].startswith("identity\tdaily") or lines[0].startswith("identity\tweekly")
    assert "week\tvisitors\t+1\t+2\t+3" in lines
    assert "2026-11-09\t4\t2 (50.0%)\t1 (25.0%)" in lines


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--weeks", "13"), "--weeks: must be a whole number from 1 to 12"),
        (("--until", "someday"), "--until: a date, YYYY-MM-DD"),
        (("--period", "7d"), "--period: not with --retention"),
        (("--source", "cache"), "--source:"),
    ],
)
def test_stats_retention_mistakes_are_one_line(
    env: dict[str, str], args: tuple[str, ...], message: str
) -> None:
    assert message in one_line_error(run_tally(env, "stats", "retention", SITE, *args, timeout=120))


def test_weeks_without_retention_is_one_line(env: dict[str, str]) -> None:
    assert "--weeks: only with --retention" in one_line_error(run_tally(env, "stats", SITE, "--weeks", "4"))
