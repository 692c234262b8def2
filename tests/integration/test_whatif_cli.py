"""`tally definitions` and `tally whatif` as a user runs them (the real CLI as a subprocess,
the real store): the versions listed, an environment that disagrees with the stored version
named, a what-if from the archive printed side by side, and each mistake in one line."""

from __future__ import annotations

import os
import re
from datetime import timedelta

import pytest

from archiver.rows import archive_row, insert_rows
from storage import queries
from storage.client import connect
from storage.queries import StatsQuery
from storage.rollup_backfill import backfill_rollups
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.clickhouse import Endpoint, own_database_settings
from tests.integration.test_cli_errors import one_line_error
from tests.integration.test_whatif import PROPOSED_GAP_S, visits, yesterday

pytestmark = pytest.mark.integration

SITE = "cli.whatif.example.com"


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint) -> Settings:
    settings = own_database_settings(
        tmp_path_factory.mktemp("whatif-cli-home"), clickhouse_endpoint, "whatif_cli"
    )
    # Archived from partition 0 at offsets the (never started) log does not hold.
    events = visits(SITE, yesterday(), seed=3)
    insert_rows(connect(settings), [archive_row(e, 0, i) for i, e in enumerate(events)])
    # The live derived tables, as the stream jobs derived them with version 1's definitions.
    day = yesterday().date()
    backfill_rollups(connect(settings), SITE, day, day + timedelta(days=1))
    return settings


@pytest.fixture
def env(settings: Settings) -> dict[str, str]:
    return os.environ | settings.environment()


def tally(env: dict[str, str], *args: str) -> str:
    answer = run_tally(env, *args, timeout=180)
    assert answer.returncode == 0, answer.stderr
    return answer.stdout


def test_definitions_lists_version_one_and_names_an_environment_it_ignores(env: dict[str, str]) -> None:
    listed = tally(env, "definitions")
    assert listed.splitlines()[0].split("\t")[:5] == [
        "1", "current", "session_gap_s=1800", "engaged_bounce_ms=10000", "watermark_s=120",
    ]  # fmt: skip
    ignored = tally(env | {"TALLY_SESSION_GAP_S": "600"}, "definitions")
    assert "ignored: TALLY_SESSION_GAP_S=600 (current: 1800)" in ignored


def test_a_whatif_from_the_archive_prints_old_and_new_numbers(
    env: dict[str, str], settings: Settings
) -> None:
    day = yesterday()
    printed = tally(
        env, "whatif", "--session-gap", "20m", "--from-archive", "--site", SITE,
        "--from", f"{day:%Y-%m-%d}", "--to", f"{day:%Y-%m-%d}",
    )  # fmt: skip
    q = StatsQuery(SITE, day, day + timedelta(days=1))
    old = queries.aggregate(connect(settings), q)
    assert queries.aggregate(connect(settings), q, source="agg") == old
    new = queries.aggregate(connect(settings), StatsQuery(SITE, q.start, q.end, session_gap_s=PROPOSED_GAP_S))
    visits_row = next(line for line in printed.splitlines() if line.startswith("│ visits "))
    assert [int(n) for n in re.findall(r"│\s*([\d,]+)\s", visits_row)] == [old["sessions"], new["sessions"]]
    assert "top entry_path values" in printed
    assert "tally whatif --version 2 --swap" in printed
    exits = tally(
        env, "whatif", "--version", "2", "--by", "exit_path", "--site", SITE,
        "--from", f"{day:%Y-%m-%d}", "--to", f"{day:%Y-%m-%d}",
    )  # fmt: skip
    assert "top exit_path values" in exits
    top_exit = queries.session_breakdown(connect(settings), q, "exit_path", limit=1)[0].value
    assert any(line.startswith(f"│ {top_exit} ") for line in exits.splitlines()), exits


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["whatif"], "--session-gap (whole seconds, at least 1s) or --engaged-bounce is needed"),
        (["whatif", "--session-gap", "twenty"], "--session-gap: 'twenty' is not a duration"),
        (["whatif", "--version", "99"], "no definitions version 99"),
        (["whatif", "--session-gap", "20m", "--swap", "--discard"], "--swap and --discard: choose one"),
        (["whatif", "rollback"], "no earlier version to roll back to"),
        (["whatif", "--session-gap", "20m", "--by", "country"], "--by: one of entry_path, exit_path"),
    ],
)
def test_mistakes_answer_in_one_line(env: dict[str, str], args: list[str], expected: str) -> None:
    assert expected in one_line_error(run_tally(env, *args, timeout=180))
