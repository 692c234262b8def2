"""Ctrl-C during the soak stops the load and the stack: `make soak` started in a terminal and
interrupted leaves no process of the stack behind (test_soak.py's stack is started by pytest's
fixture and stopped by its teardown, which an interrupt runs too)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ops.local import supervisor
from tally.settings import PROJECT_ROOT, Settings
from tests.fault.soak_samples import family
from tests.fixtures.local_stack import eventually

pytestmark = pytest.mark.soak

#: How long the interrupted soak may take to stop its stack (`tally down`: up to 30 s per
#: JVM's grace, on a busy machine more).
STOP_TIMEOUT_S = 300
#: Load sent before the interrupt, once the stack is up: the interrupt lands in the load.
LOAD_BEFORE_INTERRUPT_S = 20
SOAK = "tests/fault/test_soak.py"


def ctrl_c_as_in_a_terminal() -> None:
    """SIGINT at its default, as in a terminal's foreground job: a test run started in the
    background by a shell inherits it ignored, and Python then never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def every_component_running(home: Path) -> bool:
    settings = Settings(home=home)
    if not supervisor.supervisor_running(settings):
        return False
    infos = supervisor.rpc(settings).supervisor.getAllProcessInfo()
    return bool(infos) and all(info["statename"] == "RUNNING" for info in infos)


def stack_processes(home: Path) -> list[int]:
    """supervisord, every component and their children."""
    server = supervisor.rpc(Settings(home=home)).supervisor
    roots = [server.getPID(), *(info["pid"] for info in server.getAllProcessInfo() if info["pid"])]
    return sorted({pid for root in roots for pid in family(root)})


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.timeout(1200)
def test_ctrl_c_stops_the_soak_and_leaves_no_process_of_its_stack(tmp_path: Path) -> None:
    basetemp = [f"--basetemp={tmp_path / 'run'}"]
    home = tmp_path / "run" / "soak-home0"  # test_soak.py's fixture: tmp_path_factory.mktemp("soak-home")
    soak = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-m", "soak", "-p", "no:cacheprovider", *basetemp, SOAK],
        cwd=PROJECT_ROOT,
        env={**os.environ, "TALLY_SOAK_SECONDS": "1800", "TALLY_SOAK_RESULTS": str(tmp_path / "results")},
        # a group of its own, as a terminal's foreground job: Ctrl-C signals the whole group
        start_new_session=True,
        preexec_fn=ctrl_c_as_in_a_terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        eventually(lambda: every_component_running(home), "the soak's stack running", 600)
        time.sleep(LOAD_BEFORE_INTERRUPT_S)
        processes = stack_processes(home)
        assert len(processes) >= 9, processes  # supervisord and its eight components, at least
        os.killpg(soak.pid, signal.SIGINT)
        output, _ = soak.communicate(timeout=STOP_TIMEOUT_S)
        assert soak.returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]
        assert "KeyboardInterrupt" in output, output[-3000:]
        assert [pid for pid in processes if alive(pid)] == []
        assert not (tmp_path / "results").exists()  # an interrupted soak reports nothing
    finally:
        if soak.poll() is None:
            os.killpg(soak.pid, signal.SIGKILL)
            soak.wait()
        with contextlib.suppress(Exception):  # whatever the interrupt left, gone with the test
            supervisor.stop_stack(Settings(home=home))
