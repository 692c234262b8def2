"""The dashboard process's background pass over saved funnels: every
TALLY_FUNNEL_PRECOMPUTE_INTERVAL_S, each saved funnel's missing or stale closed days of the last
two months are computed into funnel_days (storage.saved_funnels.precompute), so a saved funnel's
first request reads stored days. Bounded per pass: at most one query per saved funnel, over the
days that need it (after the first pass, the day that closed since and any day a late event
changed)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime

import structlog

from storage.client import connect
from storage.saved_funnels import precompute
from tally.settings import Settings

log = structlog.get_logger()


def run_precompute(
    settings: Settings, stop: threading.Event, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
) -> None:
    """Passes until `stop`; a failing pass (the store down) is logged and tried again next time."""
    while not stop.is_set():
        try:
            computed = precompute(connect(settings), clock())
            if computed:
                log.info("funnel_days_computed", days=computed)
        except Exception as error:  # the store down or restarting: the next pass tries again
            log.warning("funnel_precompute_failed", error=f"{type(error).__name__}: {str(error)[:300]}")
        stop.wait(settings.funnel_precompute_interval_s)


def start_precompute(settings: Settings) -> threading.Event:
    """Start `run_precompute` in a daemon thread; set the event to stop it."""
    stop = threading.Event()
    thread = threading.Thread(
        target=run_precompute, args=(settings, stop), name="funnel-precompute", daemon=True
    )
    thread.start()
    return stop
