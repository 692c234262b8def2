"""Which events an erasure covers (storage/erasures.py, covering): the rule the archiver and its
repairs apply to each row, pinned. tests/integration/test_site_erasure.py runs it on the real
archiver, the stream jobs' replay and the store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from storage.erasures import Erasure, covering

CUTOFF = datetime(2026, 11, 20, 12, tzinfo=UTC)
ERASED = {"gone.example": Erasure(3, "gone.example", CUTOFF, "owner@example.com")}


def test_an_event_received_at_or_before_the_cutoff_is_covered() -> None:
    assert covering(ERASED, "gone.example", CUTOFF) == ERASED["gone.example"]
    assert covering(ERASED, "gone.example", CUTOFF - timedelta(days=30)) == ERASED["gone.example"]


def test_an_event_received_after_the_cutoff_is_kept() -> None:
    assert covering(ERASED, "gone.example", CUTOFF + timedelta(milliseconds=1)) is None


def test_another_sites_event_is_kept_whenever_received() -> None:
    assert covering(ERASED, "kept.example", CUTOFF - timedelta(days=1)) is None
    assert covering({}, "gone.example", CUTOFF) is None


def test_times_are_compared_as_instants_whatever_their_zone() -> None:
    zurich = timezone(timedelta(hours=1))
    assert covering(ERASED, "gone.example", datetime(2026, 11, 20, 13, tzinfo=zurich)) is not None
    assert covering(ERASED, "gone.example", datetime(2026, 11, 20, 13, 0, 1, tzinfo=zurich)) is None
    assert covering(ERASED, "gone.example", datetime(2026, 11, 20, 12)) is not None  # naive: UTC
