"""Heartbeats (tally/heartbeat.py): a component is alive on a fresh beat of a process that is
still running, so a restarted component is not healthy on the last beat of the one it replaced."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tally.heartbeat import STALE_AFTER_S, beat, heartbeat_path, is_fresh
from tally.settings import Settings


def test_a_fresh_beat_of_this_process_is_alive(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    assert not is_fresh(settings, "archiver")  # never beat
    beat(settings, "archiver")
    assert is_fresh(settings, "archiver")
    assert heartbeat_path(settings, "archiver").read_text() == str(os.getpid())


def test_the_last_beat_of_a_process_that_is_gone_is_no_beat(tmp_path: Path) -> None:
    """A component killed a second ago: its beat is fresh, but nobody is beating any more."""
    settings = Settings(home=tmp_path)
    beats = (
        "from tally.heartbeat import beat; from tally.settings import Settings; "
        f"beat(Settings(home={str(tmp_path)!r}), 'spark')"
    )
    subprocess.run([sys.executable, "-c", beats], check=True, timeout=60)
    path = heartbeat_path(settings, "spark")
    assert time.time() - path.stat().st_mtime < STALE_AFTER_S
    assert path.read_text() != str(os.getpid())
    assert not is_fresh(settings, "spark")
    beat(settings, "spark")  # its successor beats: alive again
    assert is_fresh(settings, "spark")


def test_a_beat_older_than_the_limit_is_stale_even_from_a_live_process(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    beat(settings, "jobs")
    old = time.time() - STALE_AFTER_S - 1
    os.utime(heartbeat_path(settings, "jobs"), (old, old))
    assert not is_fresh(settings, "jobs")


def test_a_beat_written_before_beats_named_their_process_counts_by_its_age(tmp_path: Path) -> None:
    """An empty file, as a component of the previous release touched it, during an upgrade."""
    settings = Settings(home=tmp_path)
    path = heartbeat_path(settings, "alerts")
    path.parent.mkdir(parents=True)
    path.touch()
    assert is_fresh(settings, "alerts")
