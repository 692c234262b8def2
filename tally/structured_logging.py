"""Logging set-up shared by the Python services (collector, archiver, dashboard)."""

from __future__ import annotations

import structlog


def configure() -> None:
    """structlog's console output, with tracebacks that leave out local variables.

    Its default (rich) traceback prints every frame's locals, and those can hold a key, a
    password or the request that carried one: one failing dashboard callback once wrote them
    into the log (tests/integration/test_secrets_not_logged.py).
    """
    structlog.dev.ConsoleRenderer.get_active().exception_formatter = structlog.dev.plain_traceback
