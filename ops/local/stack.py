"""`tally up` / `down` / `status`: the ordered start, health gates and clean stop of the local stack."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from ops.local import kafka, supervisor
from ops.local.components import Component, components
from ops.local.supervisor import ComponentStatus, StackError
from storage.schema import apply_migrations
from tally.private_files import PRIVATE_UMASK
from tally.settings import Settings
from tally.topics import ensure_topics_sync

__all__ = ["StackError", "demo_traffic", "down", "status", "up"]


DEMO_SITES = 2


def demo_traffic(settings: Settings) -> Component:
    """Steady, realistic demo traffic from the load generator (only with `tally up --demo`)."""
    return Component(
        "demo",
        [
            sys.executable,
            "-m",
            "loadgen",
            "--rate",
            "5",
            "--duration",
            "0",
            "--sites",
            str(DEMO_SITES),
            "--demo",
        ],
        priority=40,
        port=None,
        healthy=lambda: True,
    )


def _after_start(settings: Settings, component: Component) -> None:
    """What must exist before the next component starts (the demo traffic registers its own sites)."""
    if component.name == "kafka":
        ensure_topics_sync(settings)
    elif component.name == "clickhouse":
        apply_migrations(settings)


def up(settings: Settings, demo: bool, progress: Callable[[str], None]) -> None:
    # Everything `up` creates under $TALLY_HOME (the home itself, Kafka's formatted storage,
    # supervisord.conf) is created private, not made private afterwards.
    os.umask(PRIVATE_UMASK)
    stack = components(settings)
    extra = [demo_traffic(settings)] if demo else []
    if not supervisor.supervisor_running(settings):
        supervisor.check_prerequisites(settings, stack)
        kafka.prepare(settings)
        settings.resolved_api_key()
        settings.resolved_ingest_key()
        settings.resolved_dashboard_password()
        # Generated before any component starts: the endpoint and its clients read the same file.
        settings.resolved_clickhouse_password()
        supervisor.start_supervisord(settings, extra)
    for component in [*stack, *extra]:
        started = time.monotonic()
        supervisor.start_component(settings, component)
        _after_start(settings, component)
        progress(f"  {component.name:<10} healthy in {time.monotonic() - started:4.1f}s")


def down(settings: Settings) -> None:
    supervisor.stop_stack(settings)


def status(settings: Settings) -> list[ComponentStatus]:
    return supervisor.stack_status(settings, components(settings))
