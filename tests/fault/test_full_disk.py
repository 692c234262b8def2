"""The store's disk fills up while events arrive, then an operator frees it.

The log is the source of truth: while ClickHouse cannot write a part, the collector goes on
answering 202 for what Kafka holds, the archiver retries the same batch (memory bounded by two
batches) and the stream jobs fail their micro-batch and are restarted; nothing is acknowledged
that is not in the log. Once space returns, every accepted event is archived exactly once,
`tally verify --full` finds the archive whole and the derived tables equal to it."""

from __future__ import annotations

import time

import pytest

from tests.fault.scenario import BETWEEN_FAULTS_S, Traffic, healthy, verify_clean
from tests.fixtures.archive import archived
from tests.fixtures.local_stack import LocalStack, eventually
from tests.fixtures.small_disk import SmallDisk, why_no_small_disk

pytestmark = pytest.mark.fault

SITE = "full-disk.example.com"
RATE = 30
#: How long the disk stays full once the archiver has found it so: traffic keeps arriving.
FULL_FOR_S = 10


def insert_failures(stack: LocalStack, since: int) -> str:
    """The archiver's `archive_insert_failed` lines written after byte `since` of its log."""
    with (stack.settings.logs_dir / "archiver.log").open("rb") as log:
        log.seek(since)
        text = log.read().decode(errors="replace")
    return "\n".join(line for line in text.splitlines() if "archive_insert_failed" in line)


def test_a_full_store_disk_loses_no_accepted_event(
    local_stack: LocalStack, store_disk: SmallDisk | None
) -> None:
    if store_disk is None:
        pytest.skip(f"no disk of its own for the store: {why_no_small_disk()}")
    stack, settings = local_stack, local_stack.settings
    archiver_log = settings.logs_dir / "archiver.log"
    log_before = archiver_log.stat().st_size if archiver_log.exists() else 0
    assert stack.tally("sites", "add", SITE).returncode == 0
    traffic = Traffic.start(stack, SITE, RATE, seed=33)
    time.sleep(BETWEEN_FAULTS_S)
    with store_disk.full():
        failures = eventually(
            lambda: insert_failures(stack, log_before), "the archiver finds the store's disk full", 120
        )
        assert "NOT_ENOUGH_SPACE" in str(failures) or "not enough space" in str(failures), failures
        archived_while_full = archived(settings, SITE)[0]
        time.sleep(FULL_FOR_S)  # page views keep arriving: the collector takes them into the log
        assert archived(settings, SITE)[0] == archived_while_full  # nothing written meanwhile
    eventually(lambda: healthy(stack), "every component healthy once the disk has room", 240)
    time.sleep(BETWEEN_FAULTS_S)
    summary, truth = traffic.finish()
    accepted = len(truth.counted())
    # The log took every page view while the store could not: no 503, no refusal.
    assert summary.refusal is None and accepted == summary.sent, summary.statuses
    eventually(lambda: archived(settings, SITE)[0] >= accepted, "every accepted event archived", 240)
    count, unique = archived(settings, SITE)
    assert count == unique == accepted  # each once
    verified = eventually(lambda: verify_clean(stack), "tally verify: archive whole, agg equal to raw", 300)
    assert "derived tables:" in str(verified) and " 0 differ" in str(verified), verified
