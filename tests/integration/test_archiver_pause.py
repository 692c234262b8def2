"""The archiver frozen (SIGSTOP) for longer than its consumer session while events keep
arriving, then thawed: the broker has expired it, it rejoins its group, and the archive
still holds every offset of every partition, without a hole (issue 19)."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from archiver.audit import PartitionAudit, find_holes, log_ranges
from storage.client import connect
from tally.settings import Settings
from tests.fixtures.events import make_events
from tests.integration.test_archiver import produce
from tests.integration.test_archiver_crash import archiver_process, wait_until

pytestmark = pytest.mark.integration

SITE = "pause.example.com"
BEFORE_PAUSE = 30_000
DURING_PAUSE = 20_000
SESSION_TIMEOUT_S = 6.0  # the broker's minimum
PAUSE_S = 10.0


def audit(settings: Settings) -> list[PartitionAudit]:
    return find_holes(connect(settings), asyncio.run(log_ranges(settings)))


def caught_up(settings: Settings) -> bool:
    """The archive has reached the end of every partition of the log."""
    return all((partition.archived_last or -1) + 1 >= partition.log_end for partition in audit(settings))


def archived_site(settings: Settings) -> tuple[int, int]:
    row = (
        connect(settings)
        .query(
            "SELECT count(), uniqExact(event_id) FROM events WHERE site = {site:String}",
            parameters={"site": SITE},
        )
        .result_rows[0]
    )
    return int(row[0]), int(row[1])


def test_archiver_paused_past_its_session_leaves_no_hole(settings: Settings) -> None:
    # The archiver's periodic audit would repair a hole: keep it out of the way, so that
    # only taking each partition's next offset, and nothing else, keeps the archive whole.
    settings = settings.model_copy(
        update={"archiver_session_timeout_s": SESSION_TIMEOUT_S, "archive_audit_interval_s": 3600.0}
    )
    events = make_events(SITE, BEFORE_PAUSE + DURING_PAUSE)
    asyncio.run(produce(settings, [(e.key, e.to_json()) for e in events[:BEFORE_PAUSE]]))

    with archiver_process(settings) as archiver:
        # Freeze it mid-stream: batches archived, the next one being collected.
        wait_until(lambda: archived_site(settings)[0] > 0, timeout_s=120)
        os.kill(archiver.pid, signal.SIGSTOP)
        frozen_at = time.monotonic()
        asyncio.run(produce(settings, [(e.key, e.to_json()) for e in events[BEFORE_PAUSE:]]))
        time.sleep(max(0.0, frozen_at + PAUSE_S - time.monotonic()))
        os.kill(archiver.pid, signal.SIGCONT)

        wait_until(lambda: caught_up(settings), timeout_s=120)
        time.sleep(3)  # a duplicate, if any, would land now
        audits = audit(settings)

    assert [(a.partition, a.holes, a.duplicates) for a in audits if a.holes or a.duplicates] == []
    assert archived_site(settings) == (BEFORE_PAUSE + DURING_PAUSE,) * 2
