"""`tally sites add --timezone` and `tally sites timezone` as a user runs them (the real CLI as a
subprocess, the real store); mistakes are one line (test_cli_errors.py has those without a store)."""

from __future__ import annotations

import os

import pytest

from storage.client import connect
from storage.schema import apply_migrations
from storage.sites import site_timezone
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.clickhouse import Endpoint
from tests.integration.test_cli_errors import one_line_error

pytestmark = pytest.mark.integration

SITE = "cli.timezone.example.com"


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint) -> Settings:
    settings = Settings(
        home=tmp_path_factory.mktemp("timezone-cli-home"),
        clickhouse_url=clickhouse_endpoint.url,
        clickhouse_password=clickhouse_endpoint.password,
    )
    apply_migrations(settings)
    return settings


def test_a_site_gets_its_zone_when_added_and_changes_it(settings: Settings) -> None:
    env = os.environ | settings.environment()
    added = run_tally(env, "sites", "add", SITE, "--timezone", "Europe/Berlin", timeout=120)
    assert added.returncode == 0, added.stderr
    assert f"{SITE}\tEurope/Berlin" in run_tally(env, "sites", "list", timeout=120).stdout.splitlines()
    changed = run_tally(env, "sites", "timezone", SITE, "Asia/Kolkata", timeout=120)
    assert changed.returncode == 0, changed.stderr
    assert site_timezone(connect(settings), SITE) == "Asia/Kolkata"
    refused = run_tally(env, "sites", "timezone", SITE, "Europe/Nowhere", timeout=120)
    assert "not an IANA time zone: 'Europe/Nowhere'" in one_line_error(refused)
    assert site_timezone(connect(settings), SITE) == "Asia/Kolkata"
    unknown = run_tally(env, "sites", "timezone", "unregistered.example.com", "UTC", timeout=120)
    assert "unregistered.example.com is not registered" in one_line_error(unknown)
