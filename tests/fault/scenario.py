"""What both fault tests do around their faults: traffic with ground truth on one site, faults
one after the other, each once the one before has been recovered from, traffic from before the
first until after the last has been, and `tally verify` once it is clean."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

from loadgen.__main__ import LoadPlan, run_plan
from loadgen.ground_truth import GroundTruth
from loadgen.runner import RunSummary, run
from loadgen.traffic import TrafficMix, TrafficModel
from ops.local.stack import status as status_of_stack
from ops.local.supervisor import ComponentStatus
from tests.fixtures.local_stack import LocalStack, eventually

#: How long after its planned end the traffic may still be answering (slow 503s, retries).
TRAFFIC_GRACE_S = 120

#: Traffic through a healthy stack before the first fault, after each recovery before the next
#: fault, and after the last recovery: the events accepted then must survive what follows. A
#: fault that looks up its process first (`tally status`, 1.5-6 s) adds that much traffic more.
#: (Faults at fixed seconds of a fixed window wasted what recovery did not need on a quiet
#: machine, and on a busy one the last fault could begin as the traffic ended.)
BETWEEN_FAULTS_S = 2

#: Breaks a component and returns once every component is healthy again.
Fault = Callable[[], None]


def statuses(stack: LocalStack) -> dict[str, ComponentStatus]:
    """Each component's status as `tally status` reads it (ops/local/stack.py), read in this
    process: a poll costs milliseconds where a CLI start costs 1.5-6 s, and a wait for recovery
    would see it that much later. What the operator sees, the CLI's exit code, is `healthy`."""
    return {status.name: status for status in status_of_stack(stack.settings)}


def all_healthy(stack: LocalStack) -> bool:
    return all(status.healthy for status in statuses(stack).values())


def component_pid(stack: LocalStack, name: str) -> int | None:
    return statuses(stack)[name].pid


def restarted_and_healthy(stack: LocalStack, name: str, before: int) -> bool:
    """`name` runs as a new process and every component is healthy, in one reading."""
    now = statuses(stack)
    return all(status.healthy for status in now.values()) and now[name].pid not in (None, before)


def healthy(stack: LocalStack) -> bool:
    """`tally status` exits 0: every component healthy, as the operator is told."""
    return stack.tally("status").returncode == 0


def recovered(stack: LocalStack, what: str, timeout_s: float) -> None:
    """Wait until every component is healthy (read in this process), then `tally status` says so."""
    eventually(lambda: all_healthy(stack), what, timeout_s)
    eventually(lambda: healthy(stack), f"{what}, as `tally status` says", timeout_s)


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
    """`tally verify --full`'s report once it finds nothing wrong (empty while it still does):
    every offset, also below the clean marks the archivers' own audits set meanwhile."""
    result = stack.tally("verify", "--full")
    return result.stdout if result.returncode == 0 else ""


@dataclass
class Traffic:
    """Page views sent to the stack's collector in a thread, with their ground truth: for the
    plan's duration, or (duration 0) until `finish()`."""

    plan: LoadPlan
    results: list[tuple[RunSummary, GroundTruth]] = field(default_factory=list)
    _stopped: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._send, daemon=True)

    def _send(self) -> None:
        if self.plan.duration_s:
            self.results.append(run_plan(self.plan))
            return
        plan = self.plan
        model = TrafficModel(plan.sites, seed=plan.seed, visitors=plan.visitors, mix=plan.mix)
        sent = run(plan.target, model, plan.rate, 0, plan.ingest_key, stop=self._stopped.is_set)
        self.results.append(asyncio.run(sent))

    @classmethod
    def start(cls, stack: LocalStack, site: str, rate: float, seed: int, duration_s: float = 0) -> Traffic:
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
        """Stop sending (a planned run: wait for its end) and wait for the answers still due;
        a sender that hangs fails the test instead of the suite."""
        self._stopped.set()
        self._thread.join(self.plan.duration_s + TRAFFIC_GRACE_S)
        assert not self._thread.is_alive(), "the load generator did not finish"
        return self.results[0]


def inject(faults: list[Fault], between_s: float = BETWEEN_FAULTS_S) -> None:
    """Each fault in turn, `between_s` of traffic before each and after the last (a fault
    returns once the stack has recovered from it)."""
    for fault in faults:
        time.sleep(between_s)
        fault()
    time.sleep(between_s)
