"""A bug in a `tally` command reaches the user as one line naming the log that holds the
traceback; TALLY_DEBUG=1 shows the traceback itself."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from ops.cli_errors import TallyGroup


@pytest.fixture(autouse=True)
def root_handlers_restored() -> Iterator[None]:
    """The group routes logging to its log file: keep that out of the other tests."""
    handlers = list(logging.getLogger().handlers)
    yield
    for handler in logging.getLogger().handlers:
        if handler not in handlers:
            logging.getLogger().removeHandler(handler)
            handler.close()


@click.group(cls=TallyGroup)
def cli() -> None:
    pass


@cli.command()
def broken() -> None:
    raise ZeroDivisionError("a bug, not the user's doing")


def test_unexpected_error_is_one_line_pointing_at_the_logged_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TALLY_HOME", str(tmp_path))
    monkeypatch.delenv("TALLY_DEBUG", raising=False)
    result = CliRunner().invoke(cli, ["broken"])
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    log = tmp_path / "logs" / "cli.log"
    assert line.startswith("tally: unexpected error (ZeroDivisionError: a bug") and str(log) in line
    assert "Traceback" not in result.output
    logged = log.read_text()
    assert "Traceback" in logged and "raise ZeroDivisionError" in logged
    assert log.stat().st_mode & 0o777 == 0o600


def test_debug_setting_shows_the_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TALLY_HOME", str(tmp_path))
    monkeypatch.setenv("TALLY_DEBUG", "1")
    result = CliRunner().invoke(cli, ["broken"])
    assert isinstance(result.exception, ZeroDivisionError)
