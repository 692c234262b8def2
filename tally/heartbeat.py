"""Liveness for components without a port (archiver, Spark application).

Each beats after every unit of work it completes (a poll, a micro-batch); `tally status`
calls a component healthy while its beat is fresh. A hung loop stops beating even though
its process is still alive.

A beat names the process that wrote it (its pid, in the file), and a beat of a process that is
gone is no beat: a component killed and restarted by supervisord is not healthy on its
predecessor's last beat (up to STALE_AFTER_S old) but on its own first one, and `tally up`
right after `tally down` waits for the new processes' beats.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tally.settings import Settings

STALE_AFTER_S = 60.0


def heartbeat_path(settings: Settings, component: str) -> Path:
    # Two archivers of one cluster each beat their own file: one alive must not hide one hung.
    name = f"{component}-{settings.instance}" if settings.instance else component
    return settings.home_dir / "run" / f"{name}.heartbeat"


def beat(settings: Settings, component: str) -> None:
    """Record a beat of this process: its pid, written whole (a reader never sees half a file)."""
    path = heartbeat_path(settings, component)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = path.with_name(f".{path.name}.{os.getpid()}")
    written.write_text(str(os.getpid()))
    os.replace(written, path)


def is_fresh(settings: Settings, component: str, stale_after_s: float = STALE_AFTER_S) -> bool:
    """Whether `component` beat less than `stale_after_s` ago from a process still running."""
    path = heartbeat_path(settings, component)
    try:
        age = time.time() - path.stat().st_mtime
        recorded = path.read_text().strip()
    except FileNotFoundError:
        return False
    return age < stale_after_s and (not recorded.isdigit() or _running(int(recorded)))


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: no signal, only the check that the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True
