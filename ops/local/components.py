"""The components of the local stack: what runs, in which order, and how each proves it is healthy."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import httpx

from ops.local import kafka
from ops.local.ports import port_open
from tally import heartbeat
from tally.settings import Settings

HealthCheck = Callable[[], bool]


@dataclass(frozen=True)
class Component:
    name: str
    command: list[str]
    # Start order: lower first; supervisord stops in reverse order.
    priority: int
    port: int | None
    healthy: HealthCheck
    # Seconds to wait for health at start (JVMs and Spark take a while).
    start_timeout_s: float = 60
    # Seconds between SIGTERM and SIGKILL at stop.
    stop_grace_s: int = 20
    # What else `tally status` reports about it (the archiver: its audits of the archive).
    detail: Callable[[], str] = lambda: ""
    # Settings of this instance alone (TALLY_COLLECTOR_PORT of the second collector…), on top
    # of the stack's environment.
    environment: Mapping[str, str] = field(default_factory=dict)


def http_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _archive_audit(settings: Settings) -> str:
    from archiver.audit import AuditTotals

    totals = AuditTotals.read(settings)
    if totals is None:
        return "archive not audited yet"
    return (
        f"archive audits {totals.audits}: holes found {totals.holes_found} "
        f"({totals.offsets_missing} offsets), repaired {totals.offsets_repaired}, "
        f"duplicates {totals.duplicates}"
    )


def _python_module(module: str) -> list[str]:
    return [sys.executable, "-m", module]


def components(settings: Settings) -> list[Component]:
    """Every long-running part of the local stack, in start order."""
    collector = f"http://127.0.0.1:{settings.collector_port}"
    dashboard = f"http://127.0.0.1:{settings.dashboard_port}"
    return [
        Component(
            "kafka",
            kafka.broker_command(settings),
            priority=10,
            port=settings.kafka_port,
            healthy=lambda: port_open(settings.kafka_port),
            start_timeout_s=90,
            stop_grace_s=30,
        ),
        Component(
            "clickhouse",
            _python_module("ops.clickhouse_endpoint"),
            priority=10,
            port=settings.clickhouse_port,
            healthy=lambda: http_ok(f"{settings.clickhouse_url}/ping"),
        ),
        Component(
            "archiver",
            _python_module("archiver"),
            priority=20,
            port=None,
            healthy=lambda: heartbeat.is_fresh(settings, "archiver"),
            detail=lambda: _archive_audit(settings),
        ),
        Component(
            "spark",
            _python_module("stream_jobs.app"),
            priority=20,
            port=None,
            healthy=lambda: heartbeat.is_fresh(settings, "spark"),
            # A JVM, a Spark session and each query's first batch: ~40 s on a quiet 2-core
            # machine, over 120 s at load 25 (a CI run beside other work). A wait, not a delay.
            start_timeout_s=300,
            stop_grace_s=30,
        ),
        Component(
            "alerts",
            _python_module("alerts.delivery"),
            priority=20,
            port=None,
            healthy=lambda: heartbeat.is_fresh(settings, "alerts"),
        ),
        Component(
            "jobs",  # scheduled work: email reports, saved funnels' days (dashboard/jobs.py)
            _python_module("dashboard.jobs"),
            priority=20,
            port=None,
            healthy=lambda: heartbeat.is_fresh(settings, "jobs"),
        ),
        Component(
            "collector",
            _python_module("collector.app"),
            priority=30,
            port=settings.collector_port,
            healthy=lambda: http_ok(f"{collector}/healthz"),
        ),
        Component(
            "dashboard",
            _python_module("dashboard.app"),
            priority=30,
            port=settings.dashboard_port,
            healthy=lambda: http_ok(f"{dashboard}/healthz"),
            start_timeout_s=90,
        ),
    ]
