"""A newcomer's mistakes with the real `tally` CLI: the stack not running, typos, bad values.
Each answer is one line on stderr saying what is wrong and what to do, a non-zero exit, and
never a traceback."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.ports import free_port

pytestmark = pytest.mark.integration

STORE_DOWN = ["the store is not running", "tally up -d"]


@pytest.fixture
def nothing_running(tmp_path: Path) -> dict[str, str]:
    """A fresh TALLY_HOME and settings pointing at ports where nothing listens."""
    return os.environ | {
        "TALLY_HOME": str(tmp_path / "home"),
        "TALLY_CLICKHOUSE_URL": f"http://127.0.0.1:{free_port()}",
        "TALLY_KAFKA_BOOTSTRAP": f"127.0.0.1:{free_port()}",
        "TALLY_COLLECTOR_PORT": str(free_port()),
        "TALLY_DASHBOARD_PORT": str(free_port()),
    }


def one_line_error(answer: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a failed command (asserting it is exactly that)."""
    assert answer.returncode != 0, answer.stdout
    assert "Traceback" not in answer.stderr + answer.stdout
    lines = answer.stderr.strip().splitlines()
    assert len(lines) == 1, answer.stderr
    assert lines[0].startswith("tally: ")
    return lines[0]


def command(*args: str, expected: list[str]) -> object:
    return pytest.param(list(args), expected, id=" ".join(args[:2]))


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        command("query", "SELECT count() FROM events", expected=STORE_DOWN),
        command("sites", "add", "example.com", expected=STORE_DOWN),
        command("sites", "list", expected=STORE_DOWN),
        command("sites", "remove", "example.com", expected=STORE_DOWN),
        command(
            "export",
            "--site",
            "example.com",
            "--from",
            "2026-01-01",
            "--to",
            "2026-01-02",
            expected=STORE_DOWN,
        ),
        command("loadgen", "--rate", "5", "--duration", "1", expected=STORE_DOWN),
        command("init", expected=STORE_DOWN),
        command("replay", expected=STORE_DOWN),
        command("upgrade", expected=STORE_DOWN),
    ],
)
def test_command_with_the_stack_down_says_what_is_down_and_how_to_start_it(
    nothing_running: dict[str, str], args: list[str], expected: list[str]
) -> None:
    line = one_line_error(run_tally(nothing_running, *args, timeout=120))
    for words in expected:
        assert words in line
    assert nothing_running["TALLY_CLICKHOUSE_URL"] in line


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["bogus"], "no such command 'bogus'"),
        (["sites", "bogus"], "tally sites --help"),
        (["--bogus"], "no such option '--bogus'"),
        (["query", "--fromat", "csv", "SELECT 1"], "--fromat"),
        (["query", "--format", "xml", "SELECT 1"], "'xml' is not one of"),
        (["sites", "add"], "missing argument 'DOMAIN'"),
        (["sites", "add", "not a domain"], "not a domain name: 'not a domain'"),
        (
            ["sites", "add", "example.com", "--timezone", "Mars/Olympus"],
            "not an IANA time zone: 'Mars/Olympus'",
        ),
        (["sites", "timezone", "example.com", "../../etc/passwd"], "not an IANA time zone"),
        (["sites", "timezone", "example.com"], "missing argument 'ZONE'"),
        (["export", "--site", "example.com", "--from", "yesterday", "--to", "2026-01-02"], "--from"),
        (["loadgen", "--target", "http://192.0.2.1:8080"], "not a loopback address"),
    ],
)
def test_typo_gets_one_line_naming_it(nothing_running: dict[str, str], args: list[str], named: str) -> None:
    assert named in one_line_error(run_tally(nothing_running, *args, timeout=120))


def test_export_with_the_store_down_leaves_no_file(nothing_running: dict[str, str], tmp_path: Path) -> None:
    target = tmp_path / "events.parquet"
    dates = ("--from", "2026-01-01", "--to", "2026-01-02")
    answer = run_tally(nothing_running, "export", "--site", "example.com", *dates, "-o", str(target))
    assert "the store is not running" in one_line_error(answer)
    assert not target.exists()


def test_bad_setting_is_named_with_its_variable(nothing_running: dict[str, str]) -> None:
    env = nothing_running | {"TALLY_COLLECTOR_PORT": "eighty"}
    assert "TALLY_COLLECTOR_PORT='eighty'" in one_line_error(run_tally(env, "sites", "list"))


def test_export_to_a_missing_folder_names_the_file(settings: Settings, tmp_path: Path) -> None:
    target = tmp_path / "no-such-folder" / "events.csv"
    env = os.environ | settings.environment()
    answer = run_tally(
        env,
        "export",
        "--site",
        "example.com",
        "--from",
        "2026-01-01",
        "--to",
        "2026-01-02",
        "-o",
        str(target),
    )
    assert str(target) in one_line_error(answer)


def test_bad_sql_is_refused_without_a_traceback(settings: Settings) -> None:
    answer = run_tally(os.environ | settings.environment(), "query", "SELEC site FROM events")
    assert "Syntax error" in one_line_error(answer)
