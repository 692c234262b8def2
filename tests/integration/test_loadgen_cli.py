"""`tally loadgen` as a newcomer runs it on the local stack: it registers its own sites, so
every event is accepted; if the collector refuses one anyway it stops there, naming the
command that fixes it."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

from storage.schema import apply_migrations
from tally.settings import PROJECT_ROOT, Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.clickhouse import running_endpoint
from tests.fixtures.ports import free_port

pytestmark = pytest.mark.integration

SITE = "site1.example.com"  # loadgen's first site name
TERMINAL_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # cursor moves, bold


def cli_environment(settings: Settings, collector_url: str) -> dict[str, str]:
    return os.environ | settings.environment() | {"TALLY_COLLECTOR_PORT": str(urlparse(collector_url).port)}


def run_in_terminal(env: dict[str, str], *args: str, timeout_s: float = 120) -> tuple[int, str]:
    """Run the CLI on a pseudo-terminal, as in a user's shell (rich draws live lines only
    there); returns the exit code and everything the terminal showed."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "ops.cli", *args],
        cwd=PROJECT_ROOT,
        env=env | {"NO_COLOR": "1", "COLUMNS": "120"},
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
    )
    os.close(terminal)
    shown = bytearray()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if not select.select([controller], [], [], 1)[0]:
                continue
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the terminal closed: the command is done
                break
            if not chunk:
                break
            shown += chunk
        return process.wait(timeout=10), TERMINAL_CONTROL.sub("", shown.decode(errors="replace"))
    finally:
        process.kill()
        os.close(controller)


def test_loadgen_registers_its_sites_and_every_event_is_accepted(
    settings: Settings, collector_url: str, tmp_path: Path
) -> None:
    env = cli_environment(settings, collector_url)
    run_tally(env, "sites", "remove", SITE)  # a fresh stack: the site is not registered
    truth = tmp_path / "truth.jsonl"
    exit_code, shown = run_in_terminal(
        env, "loadgen", "--rate", "20", "--duration", "2", "--sites", "1", "--truth", str(truth)
    )
    assert exit_code == 0, shown
    # The live line, redrawn while the run goes, then the summary.
    assert re.search(r"sent .* \d+/40 accepted \d+ · rejected 0", shown), shown
    summary = re.search(r"sent (\d+) · accepted (\d+) · rejected none", shown)
    assert summary, shown
    assert int(summary[1]) == int(summary[2]) == 40
    assert SITE in run_tally(env, "sites", "list").stdout.split()
    assert len(truth.read_text().splitlines()) == int(summary[2])


def test_loadgen_stops_at_the_first_refusal_naming_the_command(
    settings: Settings, collector_url: str, tmp_path: Path
) -> None:
    env = cli_environment(settings, collector_url)
    run_tally(env, "sites", "remove", SITE)
    # loadgen registers its sites in another store than the collector reads: its events are refused.
    (tmp_path / "other-store").mkdir()
    with running_endpoint(tmp_path / "other-store", free_port()) as other_store:
        other = settings.model_copy(
            update={"clickhouse_url": other_store.url, "clickhouse_password": other_store.password}
        )
        apply_migrations(other)
        # A run of ten minutes: only stopping at the first refusal ends it within the timeout.
        answer = run_tally(
            env
            | {"TALLY_CLICKHOUSE_URL": other_store.url, "TALLY_CLICKHOUSE_PASSWORD": other_store.password},
            *("loadgen", "--rate", "20", "--duration", "600", "--sites", "1"),
            timeout=120,
        )
    assert answer.returncode != 0
    assert "Traceback" not in answer.stdout + answer.stderr
    [line] = answer.stderr.strip().splitlines()
    assert f"is not registered (tally sites add {SITE})" in line
    assert urlparse(collector_url).netloc in line


def test_loadgen_says_in_one_line_when_no_collector_answers(settings: Settings, collector_url: str) -> None:
    env = cli_environment(settings, collector_url)
    nobody = f"http://127.0.0.1:{free_port()}"
    answer = run_tally(env, "loadgen", "--rate", "20", "--duration", "1", "--target", nobody, timeout=60)
    assert answer.returncode != 0
    assert "Traceback" not in answer.stdout + answer.stderr
    [line] = answer.stderr.strip().splitlines()
    assert f"no collector answers at {nobody}" in line


def test_loadgen_with_two_processes_reports_rate_and_latency_and_keeps_every_accepted_event_in_its_truth(
    settings: Settings, collector_url: str, tmp_path: Path
) -> None:
    env = cli_environment(settings, collector_url)
    truth = tmp_path / "truth.jsonl"
    answer = run_tally(
        env | {"COLUMNS": "200"},  # the summary on one line
        *("loadgen", "--rate", "100", "--duration", "2", "--sites", "1", "--processes", "2"),
        *("--bot-fraction", "0", "--truth", str(truth)),
        timeout=120,
    )
    assert answer.returncode == 0, answer.stderr
    summary = re.search(
        r"sent (\d+) · accepted (\d+) · rejected none · \d+/s · "
        r"latency of the accepted p50 [\d.]+ ms p95 [\d.]+ ms",
        answer.stdout,
    )
    assert summary, answer.stdout
    assert int(summary[1]) == int(summary[2]) == 200
    # Each process's share of the ground truth, merged: every accepted page view, once.
    assert "(200 counted page views)" in answer.stdout
    assert len(truth.read_text().splitlines()) == 200
