"""Freeze things on purpose while traffic flows (issue 19): SIGSTOP the archiver and the Spark
driver (the two consumers of the log, at one moment: neither needs the other), Kafka, the
ClickHouse endpoint and the collector in turn, each for longer than the timeout that
concerns it — a long GC pause, a frozen VM, a stalled disk — then SIGCONT.
A paused process is worse than a dead one: it wakes up believing it still owns what the rest
of the world has moved on from. Afterwards every event that got a 202 is in the archive
exactly once, `tally verify` finds the archive without a hole and the derived tables equal
to it, and the archiver's own audit never had a hole to repair."""

from __future__ import annotations

import contextlib
import re
import signal
import time

import psutil
import pytest

from tests.fault.scenario import Fault, Traffic, all_healthy, component_pid, healthy, inject, verify_clean
from tests.fixtures.archive import archived
from tests.fixtures.local_stack import LocalStack, eventually

pytestmark = pytest.mark.fault

SITE = "pause.example.com"
RATE = 30


def pause_and_thaw(stack: LocalStack, name: str, seconds: float, *also: str) -> None:
    """A freeze: the process and its children (Spark's JVM) stop, then go on as if nothing
    had happened; with `also`, those components' too, at the same moments."""
    tree: list[psutil.Process] = []
    for frozen_name in (name, *also):
        process = psutil.Process(component_pid(stack, frozen_name))
        tree += [process, *process.children(recursive=True)]
    for frozen in tree:
        with contextlib.suppress(psutil.NoSuchProcess):  # Spark's short-lived Python workers
            frozen.send_signal(signal.SIGSTOP)
    time.sleep(seconds)
    for frozen in reversed(tree):
        with contextlib.suppress(psutil.NoSuchProcess):
            frozen.send_signal(signal.SIGCONT)
    thawed = " and ".join((name, *also))
    eventually(lambda: all_healthy(stack), f"every component healthy after {thawed} thawed", 240)


def test_accepted_events_survive_a_pause_of_each_component(local_stack: LocalStack) -> None:
    stack, settings = local_stack, local_stack.settings
    # The stack is shared with the other fault tests: only this test's part of the log counts.
    archiver_log = settings.logs_dir / "archiver.log"
    log_before = archiver_log.stat().st_size if archiver_log.exists() else 0
    # Accepted from the moment `sites add` returns (collector/known_sites.py): no wait.
    assert stack.tally("sites", "add", SITE).returncode == 0
    traffic = Traffic.start(stack, SITE, RATE, seed=12)
    # Each longer than what notices it: the archiver's consumer session (10 s), the
    # collector's send timeout (10 s), Spark's and the clients' request timeouts. The archiver
    # and Spark, independent consumers of the log, freeze together (the archiver for Spark's
    # 20 s, longer than its session still): one wait for both thaws instead of two.
    faults: list[Fault] = [
        lambda: pause_and_thaw(stack, "spark", 20, "archiver"),
        lambda: pause_and_thaw(stack, "kafka", 15),
        lambda: pause_and_thaw(stack, "clickhouse", 15),
        lambda: pause_and_thaw(stack, "collector", 12),
    ]
    inject(faults)
    summary, truth = traffic.finish()
    accepted = len(truth.counted())
    # The pauses were survived, not the traffic stopped: most of what was sent got its 202. (The
    # sender runs behind its rate while answers are slow, so what it sent is the measure.)
    assert summary.refusal is None and accepted > summary.sent * 0.5, summary.statuses
    eventually(lambda: archived(settings, SITE)[0] >= accepted, "every accepted event archived", 240)
    time.sleep(3)
    count, unique = archived(settings, SITE)
    assert count == unique  # nothing twice
    assert accepted <= count <= summary.sent
    # No hole in the archive, nothing twice, and agg equals raw on every day of every site.
    verified = eventually(lambda: verify_clean(stack), "tally verify: archive whole, agg equal to raw", 300)
    assert "derived tables:" in str(verified) and " 0 differ" in str(verified), verified
    # …and not because the archiver's own audit had to repair a hole: it never found one.
    with archiver_log.open("rb") as log:
        log.seek(log_before if archiver_log.stat().st_size >= log_before else 0)  # 0: rotated
        audit = log.read().decode(errors="replace")
    assert not re.search(r"archive_audit\s.*missing=", audit), audit[-3000:]
    # Every component healthy, as `tally status` tells the operator (the thaws were waited out
    # reading the same status in this process).
    assert eventually(lambda: healthy(stack), "every component healthy after the pauses", 180)
