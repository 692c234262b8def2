"""Callbacks fail as a sentence on the page, never as a traceback: each callback names what
it shows instead (a notice, an empty chart) and this wrapper hands it the sentence."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import structlog
from dash.exceptions import PreventUpdate

from dashboard.store import StoreUnavailable
from storage.query_limits import log_failure
from tally.refusal import Refused

log = structlog.get_logger()

STORE_DOWN = "The analytics store is not answering right now; this panel retries shortly."
TOO_COSTLY = "This report {} (storage/query_limits.py): choose a shorter period or fewer filters."
UNEXPECTED = "Something went wrong loading this panel. The dashboard's log has the details."

Render = TypeVar("Render", bound=Callable[..., Any])


def friendly(fallback: Callable[[str], Any]) -> Callable[[Render], Render]:
    def decorate(render: Render) -> Render:
        @functools.wraps(render)
        def guarded(*args: Any) -> Any:
            try:
                return render(*args)
            except PreventUpdate:
                raise
            except Refused as refused:  # a period, filter, goal … the store refuses: its own sentence
                return fallback(str(refused))
            except StoreUnavailable as failure:
                # a query past its bounds, not a store down
                stopped = log_failure(log, "dashboard", failure, callback=render.__name__)
                return fallback(TOO_COSTLY.format(stopped) if stopped else STORE_DOWN)
            except Exception:
                log.exception("dashboard_callback_failed", callback=render.__name__)
                return fallback(UNEXPECTED)

        return guarded  # type: ignore[return-value]

    return decorate
