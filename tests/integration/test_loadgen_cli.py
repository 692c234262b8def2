"""`tally loadgen` as a newcomer runs it on the local stack: it registers its own sites, so
every event is accepted; if the collector refuses one anyway it stops there, naming the
command that fixes it."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlparse

import pytest

from storage.migrations import apply_migrations
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.clickhouse import running_endpoint
from tests.fixtures.ports import free_port

pytestmark = pytest.mark.integration

SITE = "site1.example.com"  # loadgen's first site name


def cli_environment(settings: Settings, collector_url: str) -> dict[str, str]:
    return os.environ | settings.environment() | {"TALLY_COLLECTOR_PORT": str(urlparse(collector_url).port)}


def test_loadgen_registers_its_sites_and_every_event_is_accepted(
    settings: Settings, collector_url: str, tmp_path: Path
) -> None:
    env = cli_environment(settings, collector_url)
    run_tally(env, "sites", "remove", SITE)  # a fresh stack: the site is not registered
    truth = tmp_path / "truth.jsonl"
    answer = run_tally(
        env, "loadgen", "--rate", "20", "--duration", "2", "--sites", "1", "--truth", str(truth), timeout=120
    )
    assert answer.returncode == 0, answer.stdout + answer.stderr
    summary = re.search(r"sent (\d+) · accepted (\d+) · rejected none", answer.stdout)
    assert summary, answer.stdout
    assert int(summary[1]) == int(summary[2]) > 0
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
        other = settings.model_copy(update={"clickhouse_url": other_store})
        apply_migrations(other)
        # A run of ten minutes: only stopping at the first refusal ends it within the timeout.
        answer = run_tally(
            env | {"TALLY_CLICKHOUSE_URL": other_store},
            *("loadgen", "--rate", "20", "--duration", "600", "--sites", "1"),
            timeout=120,
        )
    assert answer.returncode != 0
    assert "Traceback" not in answer.stdout + answer.stderr
    [line] = answer.stderr.strip().splitlines()
    assert f"is not registered (tally sites add {SITE})" in line
    assert urlparse(collector_url).netloc in line
