"""The archiver's StallWatch: which partitions it seeks again, and which it leaves alone."""

from __future__ import annotations

from archiver.consumer import StallWatch


def watch_checked_once(next_expected: dict[int, int], log_ends: dict[int, int]) -> StallWatch:
    watch = StallWatch(interval_s=5.0, _checked_at=0.0)
    assert watch.stalled(next_expected, log_ends, now=5.0) == []  # nothing seen before: no verdict
    return watch


def test_a_partition_behind_the_log_that_did_not_move_since_the_last_check_is_stalled() -> None:
    watch = watch_checked_once({0: 100, 1: 200, 2: 300}, {0: 150, 1: 250, 2: 300})
    # 0 moved, 1 did not although the log holds more, 2 did not but is at the log's end.
    assert watch.stalled({0: 120, 1: 200, 2: 300}, {0: 150, 1: 250, 2: 300}, now=10.0) == [1]


def test_a_partition_that_moved_or_caught_up_is_not_stalled() -> None:
    watch = watch_checked_once({0: 100}, {0: 150})
    assert watch.stalled({0: 101}, {0: 150}, now=10.0) == []
    assert watch.stalled({0: 150}, {0: 150}, now=15.0) == []


def test_a_partition_newly_assigned_is_judged_only_from_the_next_check() -> None:
    watch = watch_checked_once({0: 100}, {0: 100})
    assert watch.stalled({0: 100, 1: 5}, {0: 100, 1: 50}, now=10.0) == []
    assert watch.stalled({0: 100, 1: 5}, {0: 100, 1: 50}, now=15.0) == [1]


def test_checks_are_due_every_interval() -> None:
    watch = StallWatch(interval_s=5.0, _checked_at=100.0)
    assert not watch.due(104.9)
    assert watch.due(105.0)
    watch.stalled({}, {}, now=105.0)
    assert not watch.due(109.0)
