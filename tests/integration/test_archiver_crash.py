"""The archiver process killed with SIGKILL mid-stream and restarted: the archive holds
every produced event exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tally.settings import PROJECT_ROOT, Settings
from tests.fixtures.archive import archived
from tests.fixtures.events import make_events
from tests.fixtures.kafka import stop_process
from tests.integration.test_archiver import produce

pytestmark = pytest.mark.integration

SITE = "sigkill.example.com"
EVENTS = 60_000


@contextmanager
def archiver_process(settings: Settings) -> Iterator[subprocess.Popen]:
    env = os.environ | settings.environment()
    log = (settings.home_dir / "archiver-crash.log").open("ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "archiver"], cwd=PROJECT_ROOT, env=env, stdout=log, stderr=log
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            stop_process(process)
        log.close()


def wait_until(check: object, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_sigkill_mid_stream_then_restart_archives_each_event_exactly_once(settings: Settings) -> None:
    events = make_events(SITE, EVENTS)
    asyncio.run(produce(settings, [(e.key, e.to_json()) for e in events]))

    with archiver_process(settings) as first:
        # Kill as soon as part of the stream is in: some batches done, more in flight.
        wait_until(lambda: archived(settings, SITE)[0] > 0, timeout_s=120)
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
    partial = archived(settings, SITE)[0]

    with archiver_process(settings):
        wait_until(lambda: archived(settings, SITE)[0] >= EVENTS, timeout_s=180)
        time.sleep(3)  # a duplicate, if any, would land now

    assert 0 < partial < EVENTS, "the kill must land mid-stream for this test to mean anything"
    assert archived(settings, SITE) == (EVENTS, EVENTS)
