"""Liveness for components without a port (archiver, Spark application).

Each beats after every unit of work it completes (a poll, a micro-batch); `tally status`
calls a component healthy while its beat is fresh. A hung loop stops beating even though
its process is still alive.
"""

from __future__ import annotations

import time
from pathlib import Path

from tally.settings import Settings

STALE_AFTER_S = 60.0


def heartbeat_path(settings: Settings, component: str) -> Path:
    # Two archivers of one cluster each beat their own file: one alive must not hide one hung.
    name = f"{component}-{settings.instance}" if settings.instance else component
    return settings.home_dir / "run" / f"{name}.heartbeat"


def beat(settings: Settings, component: str) -> None:
    path = heartbeat_path(settings, component)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def is_fresh(settings: Settings, component: str, stale_after_s: float = STALE_AFTER_S) -> bool:
    path = heartbeat_path(settings, component)
    return path.exists() and time.time() - path.stat().st_mtime < stale_after_s
