"""`tally props` (issue 37): a site's custom properties from the command line, on the real
ClickHouse engine, read back by the store the Properties report and the Sites API use; each
mistake a user can make is one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage import custom_properties
from storage.client import connect
from storage.sites import add_site
from tests.fixtures.cli import run_tally
from tests.fixtures.clickhouse import Endpoint, own_database_settings
from tests.integration.test_cli_errors import one_line_error

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # the CLI as a subprocess, 9 times

SITE = "cli.props.example.com"


def test_props_are_added_listed_removed_and_mistakes_are_one_line(
    clickhouse_endpoint: Endpoint, tmp_path: Path
) -> None:
    settings = own_database_settings(tmp_path, clickhouse_endpoint, "cli_props")
    client = connect(settings)
    add_site(client, SITE)
    env = os.environ | settings.environment()

    def tally(*args: str) -> str:
        done = run_tally(env, "props", *args, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert tally("list", SITE) == ""  # none listed: the report offers every property
    assert "added property 'author'" in tally("add", SITE, "author")
    assert "already listed" in tally("add", SITE, "author")
    tally("add", SITE, "Plan tier")
    assert tally("list", SITE).splitlines() == ["Plan tier", "author"]
    assert custom_properties.list_properties(client, SITE) == ["Plan tier", "author"]
    assert "removed property 'author'" in tally("remove", SITE, "author")
    assert custom_properties.list_properties(client, SITE) == ["Plan tier"]

    def refusal(*args: str) -> str:
        return one_line_error(run_tally(env, "props", *args, timeout=120))

    assert "not one of" in refusal("remove", SITE, "author")
    assert "not registered" in refusal("add", "nope.example.com", "author")
    assert "control characters" in refusal("add", SITE, "a\tb")
    assert "not registered" in refusal("list", "nope.example.com")
