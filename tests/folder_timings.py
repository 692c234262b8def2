"""How long each test folder, and each of the slowest files, took: printed at the end of the run
(after `--durations`).

The suite's budget is for the whole run on 2 cores; this table says where the time goes, so the
next slow folder is found from CI's log instead of from a second 45-minute run. A folder's time
is the sum of its tests' setup, call and teardown, so a session fixture's start-up is counted in
the folder of the first test that asks for it (the table says so in its title).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import PurePosixPath

import pytest
from _pytest.terminal import TerminalReporter


@dataclass
class FolderTime:
    seconds: float = 0.0
    tests: int = 0


def folder_of(nodeid: str) -> str:
    """`tests/integration/test_x.py::test_y[p]` -> `tests/integration`."""
    return str(PurePosixPath(nodeid.split("::", 1)[0]).parent)


#: How many of the slowest test files the summary lists after the folders.
SLOWEST_FILES = 25


class FolderTimings:
    def __init__(self) -> None:
        self.folders: dict[str, FolderTime] = defaultdict(FolderTime)
        self.files: dict[str, FolderTime] = defaultdict(FolderTime)
        self.started = time.monotonic()

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = report.nodeid.split("::", 1)[0]
        for timing in (self.folders[folder_of(report.nodeid)], self.files[path]):
            timing.seconds += report.duration
            if report.when == "call" or (report.when == "setup" and report.skipped):
                timing.tests += 1

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: TerminalReporter) -> None:
        if not self.folders:
            return
        wall = time.monotonic() - self.started
        total = sum(folder.seconds for folder in self.folders.values())
        terminalreporter.write_sep(
            "=", "time per test folder (setup + call + teardown; session fixtures count where first used)"
        )
        terminalreporter.write_line(f"{'folder':<28} {'tests':>6} {'seconds':>9} {'m:ss':>7} {'share':>6}")
        for name, folder in sorted(self.folders.items(), key=lambda item: -item[1].seconds):
            share = f"{folder.seconds / total if total else 0.0:.0%}"
            clock = minutes(folder.seconds)
            terminalreporter.write_line(
                f"{name:<28} {folder.tests:>6} {folder.seconds:>9.1f} {clock:>7} {share:>6}"
            )
        terminalreporter.write_line(
            f"{'all folders':<28} {sum(f.tests for f in self.folders.values()):>6} {total:>9.1f} "
            f"{minutes(total):>7}   (wall clock since start-up {minutes(wall)})"
        )
        slowest = sorted(self.files.items(), key=lambda item: -item[1].seconds)[:SLOWEST_FILES]
        terminalreporter.write_sep("=", f"the {len(slowest)} slowest test files (setup + call + teardown)")
        for name, timing in slowest:
            terminalreporter.write_line(f"{timing.seconds:>8.1f} s {timing.tests:>5} tests  {name}")


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def pytest_configure(config: pytest.Config) -> None:
    # Under pytest-xdist the workers' reports reach the controller, which prints the table once.
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(FolderTimings(), "folder_timings")
