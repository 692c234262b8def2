"""The stack a `tally` command is handed (ops/cli/context.py, click's `obj`): its settings and its
store client, made once and only when a command asks, on the real store."""

from __future__ import annotations

from functools import cached_property

import pytest
from click.testing import CliRunner

from ops.cli import main as tally
from ops.cli.context import Stack
from tally.settings import Settings
from tests.fixtures.clickhouse import Endpoint, own_database_settings

pytestmark = pytest.mark.integration

SITE = "cli.context.example.com"


class GivenStack(Stack):
    """A stack whose settings are given, not read from $TALLY_HOME; its client is Stack's own."""

    def __init__(self, given: Settings) -> None:
        self.given = given

    @cached_property
    def settings(self) -> Settings:
        return self.given


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint) -> Settings:
    return own_database_settings(tmp_path_factory.mktemp("cli-context-home"), clickhouse_endpoint, "cli")


def test_commands_write_and_read_the_store_of_the_stack_they_are_handed(settings: Settings) -> None:
    added = CliRunner().invoke(tally, ["sites", "add", SITE], obj=GivenStack(settings))
    assert added.exit_code == 0, added.output
    listed = CliRunner().invoke(tally, ["sites", "list"], obj=GivenStack(settings))
    assert f"{SITE}\tUTC" in listed.stdout.splitlines()


def test_a_command_connects_to_the_store_once_however_often_it_asks(settings: Settings) -> None:
    stack = GivenStack(settings)
    assert stack.client is stack.client


def test_a_typo_is_refused_without_connecting_to_the_store(settings: Settings) -> None:
    stack = GivenStack(settings)
    refused = CliRunner().invoke(tally, ["sites", "add", "not a domain"], obj=stack)
    assert (refused.exit_code, refused.stderr) == (1, "tally: not a domain name: 'not a domain'\n")
    assert "client" not in vars(stack)  # never made


def test_with_the_store_down_a_command_that_needs_it_is_one_line(settings: Settings) -> None:
    down = GivenStack(settings.model_copy(update={"clickhouse_url": "http://127.0.0.1:1"}))
    failed = CliRunner().invoke(tally, ["sites", "add", SITE], obj=down)
    assert failed.exit_code == 1
    assert failed.stderr.startswith("tally: the store is not running at ")
    assert failed.stderr.endswith("start the stack with 'tally up -d'\n")
