"""Stopping a streaming query gracefully (stream_jobs/app.py stop_gracefully): the batch running
when the stop is asked for finishes; a query whose batches run back to back (the alerts query's
heartbeat gives every trigger input) is not left running until the grace runs out."""

from __future__ import annotations

from typing import Any

from stream_jobs.app import stop_gracefully

GRACE_S = 60.0  # far beyond what a stop that waits for one batch takes here


class BatchesBackToBack:
    """A query whose trigger is always active: each batch lasts `reads_per_batch` status reads,
    and the next begins as soon as one completes (its progress reported)."""

    def __init__(self, running: int, reads_per_batch: int = 3, trigger_active: bool = True) -> None:
        self.running = running
        self.reads_per_batch = reads_per_batch
        self.trigger_active = trigger_active
        self.isActive = True
        self.stopped_during: int | None = None
        self._reads = 0

    @property
    def status(self) -> dict[str, Any]:
        self._reads += 1
        if self.trigger_active and self._reads % self.reads_per_batch == 0:
            self.running += 1
        return {"isTriggerActive": self.trigger_active}

    @property
    def lastProgress(self) -> dict[str, Any] | None:
        return None if self.running == 0 else {"batchId": self.running - 1}

    def stop(self) -> None:
        self.stopped_during = self.running
        self.isActive = False


def test_the_batch_in_flight_finishes_and_the_next_is_stopped_as_it_begins() -> None:
    query = BatchesBackToBack(running=7)
    stop_gracefully(query, GRACE_S)  # type: ignore[arg-type]
    assert query.stopped_during == 8


def test_a_first_batch_with_no_progress_yet_finishes_too() -> None:
    query = BatchesBackToBack(running=0)
    stop_gracefully(query, GRACE_S)  # type: ignore[arg-type]
    assert query.stopped_during == 1


def test_an_idle_query_stops_at_once() -> None:
    query = BatchesBackToBack(running=4, trigger_active=False)
    stop_gracefully(query, GRACE_S)  # type: ignore[arg-type]
    assert query.stopped_during == 4
