"""A disk fills up while events arrive — the store's, then Kafka's — and an operator frees it.

The store's disk. The log is the source of truth: while ClickHouse cannot write a part, the collector goes on
answering 202 for what Kafka holds, the archiver retries the same batch (memory bounded by two
batches) and the stream jobs fail their micro-batch and are restarted; nothing is acknowledged
that is not in the log. Once space returns, every accepted event is archived exactly once,
`tally verify --full` finds the archive whole and the derived tables equal to it.

Kafka's log directory. The broker cannot append and stops (supervisord restarts it, and it stops
again while the disk is full): the collector answers 503 for what it cannot put in the log —
never a 202 for an event it would lose. Once space returns the broker recovers its log, and
every event that got a 202 is archived once. (A 503 whose event the broker had appended after
all is archived too: the sender was told "not confirmed", not "lost"; its retry would carry the
same event_id, which the archive keeps once.)"""

from __future__ import annotations

import time

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError

from loadgen.ground_truth import GroundTruth
from loadgen.runner import RunSummary
from storage import broken_parts
from storage.client import connect
from tally.settings import Settings
from tests.fault.scenario import BETWEEN_FAULTS_S, Traffic, all_healthy, recovered, verify_clean
from tests.fixtures.archive import archived
from tests.fixtures.local_stack import LocalStack, eventually
from tests.fixtures.small_disk import SmallDisk, why_no_small_disk

pytestmark = pytest.mark.fault

SITE = "full-disk.example.com"
LOG_SITE = "full-log-disk.example.com"
RATE = 30
#: How long the disk stays full once the archiver has found it so: traffic keeps arriving.
FULL_FOR_S = 10


def insert_failures(stack: LocalStack, since: int) -> str:
    """The archiver's `archive_insert_failed` lines written after byte `since` of its log."""
    with (stack.settings.logs_dir / "archiver.log").open("rb") as log:
        log.seek(since)
        text = log.read().decode(errors="replace")
    return "\n".join(line for line in text.splitlines() if "archive_insert_failed" in line)


def start_traffic(stack: LocalStack, site: str, seed: int) -> Traffic:
    """Page views on a site of the test's own, flowing for a moment before the disk fills."""
    assert stack.tally("sites", "add", site).returncode == 0
    traffic = Traffic.start(stack, site, RATE, seed=seed)
    time.sleep(BETWEEN_FAULTS_S)
    return traffic


def finish_once_recovered(stack: LocalStack, traffic: Traffic) -> tuple[RunSummary, GroundTruth]:
    """Once space is back: the stack healthy, a moment of traffic through it, the run's answers."""
    recovered(stack, "every component healthy once the disk has room", 240)
    time.sleep(BETWEEN_FAULTS_S)
    return traffic.finish()


def archive_rows(settings: Settings) -> int:
    """The archive's rows from its parts' metadata: the count a broken part's data files do not
    stop (a merge writing as the disk filled left one in CI, its marks empty: every read of its
    rows failed until the archiver set it aside, broken_parts.py)."""
    return int(
        connect(settings)
        .query(
            "SELECT sum(rows) FROM system.parts WHERE database = currentDatabase()"
            " AND table = 'events' AND active"
        )
        .result_rows[0][0]
    )


def readable_count(settings: Settings, site: str) -> int:
    """The site's archived events, or -1 while a read of them fails (a broken part not yet set
    aside: the archiver checks the newest parts once the store writes again)."""
    try:
        return archived(settings, site)[0]
    except DatabaseError:
        return -1


def assert_verified(stack: LocalStack) -> None:
    verified = eventually(lambda: verify_clean(stack), "tally verify: archive whole, agg equal to raw", 300)
    assert "derived tables:" in str(verified) and " 0 differ" in str(verified), verified


def test_a_full_store_disk_loses_no_accepted_event(
    local_stack: LocalStack, store_disk: SmallDisk | None
) -> None:
    if store_disk is None:
        pytest.skip(f"no disk of its own for the store: {why_no_small_disk()}")
    stack, settings = local_stack, local_stack.settings
    archiver_log = settings.logs_dir / "archiver.log"
    log_before = archiver_log.stat().st_size if archiver_log.exists() else 0
    traffic = start_traffic(stack, SITE, seed=33)
    with store_disk.full():
        # the engine's NOT_ENOUGH_SPACE, or the insert's data not even spooled (ENOSPC); a part a
        # merge was writing as the disk filled may fail reads first (broken_parts.py sets it aside)
        eventually(
            lambda: broken_parts.DISK_FULL.search(insert_failures(stack, log_before)),
            "the archiver finds the store's disk full",
            120,
        )
        rows_while_full = archive_rows(settings)
        time.sleep(FULL_FOR_S)  # page views keep arriving: the collector takes them into the log
        assert archive_rows(settings) <= rows_while_full  # nothing written meanwhile
    summary, truth = finish_once_recovered(stack, traffic)
    accepted = len(truth.counted())
    # The log took every page view while the store could not: no 503, no refusal.
    assert summary.refusal is None and accepted == summary.sent, summary.statuses
    eventually(
        lambda: readable_count(settings, SITE) >= accepted, "every accepted event archived, readable", 240
    )
    count, unique = archived(settings, SITE)
    assert count == unique == accepted  # each once
    assert_verified(stack)


def test_a_full_log_disk_answers_503_and_loses_no_accepted_event(
    local_stack: LocalStack, log_disk: SmallDisk | None
) -> None:
    if log_disk is None:
        pytest.skip(f"no disk of its own for Kafka's log: {why_no_small_disk()}")
    stack, settings = local_stack, local_stack.settings
    traffic = start_traffic(stack, LOG_SITE, seed=34)
    with log_disk.full():
        eventually(lambda: not all_healthy(stack), "the broker stops on its full disk", 120)
        time.sleep(FULL_FOR_S)  # page views keep arriving: the collector answers them 503
    summary, truth = finish_once_recovered(stack, traffic)
    accepted = len(truth.counted())
    # Refused plainly while the log could not take them, and nothing else.
    assert summary.refusal is None and summary.statuses[503] > 0, summary.statuses
    assert set(summary.statuses) <= {202, 503}, summary.statuses
    eventually(lambda: archived(settings, LOG_SITE)[0] >= accepted, "every accepted event archived", 240)
    time.sleep(3)
    count, unique = archived(settings, LOG_SITE)
    assert count == unique and accepted <= count <= summary.sent  # none lost, none twice
    assert_verified(stack)
