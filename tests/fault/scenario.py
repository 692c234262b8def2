"""What both fault tests do around their faults: traffic with ground truth on one site, faults
at fixed times into the run, and `tally verify` once it is clean."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

from loadgen.__main__ import LoadPlan, run_plan
from loadgen.ground_truth import GroundTruth
from loadgen.runner import RunSummary
from loadgen.traffic import TrafficMix
from tests.fixtures.local_stack import LocalStack, eventually

#: How long after its planned end the traffic may still be answering (slow 503s, retries).
TRAFFIC_GRACE_S = 120

Fault = tuple[float, Callable[[], None]]


def component_pid(stack: LocalStack, name: str) -> int | None:
    statuses = {s["name"]: s for s in json.loads(stack.tally("status", "--json").stdout)}
    return statuses[name]["pid"]


def restarted_and_healthy(stack: LocalStack, name: str, before: int) -> bool:
    """`name` runs as a new process and every component is healthy, in one `tally status`
    (it exits 0 only when all are): one CLI start per poll, several seconds each under load."""
    result = stack.tally("status", "--json")
    statuses = {s["name"]: s for s in json.loads(result.stdout)}
    return result.returncode == 0 and statuses[name]["pid"] not in (None, before)


def healthy(stack: LocalStack) -> bool:
    return stack.tally("status").returncode == 0


def sigkill_tree(pid: int) -> None:
    """A crash: the process and its children (Spark's JVM) die at once, no cleanup."""
    process = psutil.Process(pid)
    for victim in [*process.children(recursive=True), process]:
        with contextlib.suppress(psutil.NoSuchProcess):
            victim.send_signal(signal.SIGKILL)


def kill_and_wait_for_recovery(stack: LocalStack, name: str) -> None:
    """SIGKILL a component; supervisord restarts it; wait until every component is healthy."""
    before = component_pid(stack, name)
    assert before is not None, f"{name} is not running"
    sigkill_tree(before)
    eventually(lambda: restarted_and_healthy(stack, name, before), f"{name} back", 180)


def verify_clean(stack: LocalStack) -> str:
    """`tally verify`'s report once it finds nothing wrong (empty while it still does)."""
    result = stack.tally("verify")
    return result.stdout if result.returncode == 0 else ""


@dataclass
class Traffic:
    """Page views sent to the stack's collector in a thread, with their ground truth."""

    plan: LoadPlan
    results: list[tuple[RunSummary, GroundTruth]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=lambda: self.results.append(run_plan(self.plan)), daemon=True)

    @classmethod
    def start(cls, stack: LocalStack, site: str, rate: float, duration_s: float, seed: int) -> Traffic:
        settings = stack.settings
        collector = f"http://127.0.0.1:{settings.collector_port}"
        no_bots = TrafficMix(bot_fraction=0.0)
        plan = LoadPlan(
            collector, rate, duration_s, [site], 0, no_bots, 0, seed, settings.resolved_ingest_key()
        )
        traffic = cls(plan)
        traffic._thread.start()
        return traffic

    def finish(self) -> tuple[RunSummary, GroundTruth]:
        """Wait for the run's end; a sender that hangs fails the test instead of the suite."""
        self._thread.join(self.plan.duration_s + TRAFFIC_GRACE_S)
        assert not self._thread.is_alive(), "the load generator did not finish"
        return self.results[0]


def inject(faults: list[Fault]) -> None:
    """Each fault at its time (seconds from now), in order."""
    started = time.monotonic()
    for at_s, fault in faults:
        time.sleep(max(0.0, started + at_s - time.monotonic()))
        fault()
