"""`tally up` / `down` / `status`: the ordered start, health gates and clean stop of the local stack."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from ops.local import cluster, kafka, supervisor
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
    if component.name.startswith("kafka"):
        ensure_topics_sync(settings)
    elif component.name == "clickhouse":
        apply_migrations(settings)


def stack_components(settings: Settings) -> list[Component]:
    """The components of the stack `settings.home` holds: the single node or the cluster."""
    return cluster.cluster_components(settings) if cluster.is_cluster_home(settings) else components(settings)


def current_settings(settings: Settings) -> Settings:
    """`settings` as the stack in its $TALLY_HOME is configured: a cluster's processes read
    its bootstrap list and Spark master, so the CLI must too."""
    return cluster.cluster_settings(settings) if cluster.is_cluster_home(settings) else settings


def _check_mode(settings: Settings, want_cluster: bool) -> None:
    # The archive keeps each partition's offsets: a log of another shape under the same
    # archive (and checkpoints) would restart offsets at 0, and events would be skipped.
    if want_cluster and (settings.kafka_dir / "data").is_dir():
        raise StackError(
            f"{settings.home_dir} holds a single-node stack: give the cluster its own TALLY_HOME"
        )
    if not want_cluster and cluster.is_cluster_home(settings):
        raise StackError(f"{settings.home_dir} holds a cluster: start it with `tally up --cluster`")


def up(settings: Settings, demo: bool, progress: Callable[[str], None], with_cluster: bool = False) -> None:
    # Everything `up` creates under $TALLY_HOME (the home itself, Kafka's formatted storage,
    # supervisord.conf) is created private, not made private afterwards.
    os.umask(PRIVATE_UMASK)
    _check_mode(settings, with_cluster)
    stack = cluster.cluster_components(settings) if with_cluster else components(settings)
    extra = [demo_traffic(settings)] if demo else []
    if not supervisor.supervisor_running(settings):
        if with_cluster:
            settings = cluster.store_layout(settings)
            stack = cluster.cluster_components(settings)
            supervisor.check_prerequisites(settings, stack, cluster.controller_ports(settings))
            cluster.prepare_brokers(settings)
        else:
            supervisor.check_prerequisites(settings, stack)
            kafka.prepare(settings)
        settings.resolved_api_key()
        settings.resolved_ingest_key()
        settings.resolved_dashboard_password()
        # Generated before any component starts: the endpoint and its clients read the same file.
        settings.resolved_clickhouse_password()
        environment = cluster.cluster_environment(settings) if with_cluster else {}
        supervisor.start_supervisord(settings, [*stack, *extra], environment)
    settings = current_settings(settings)
    for group in _by_priority([*stack, *extra]):
        _start_group(settings, group, progress)


def _by_priority(stack: list[Component]) -> list[list[Component]]:
    priorities = sorted({component.priority for component in stack})
    return [[c for c in stack if c.priority == priority] for priority in priorities]


def _start_group(settings: Settings, group: list[Component], progress: Callable[[str], None]) -> None:
    """Start components of one priority together (three brokers wait for each other's votes),
    then wait for each; the next group starts once all are healthy and set up."""
    started = time.monotonic()
    for component in group:
        supervisor.launch_component(settings, component)
    for component in group:
        supervisor.wait_until_healthy(settings, component)
        progress(f"  {component.name:<14} healthy in {time.monotonic() - started:4.1f}s")
    # Once per kind: the topics once all three brokers are up.
    firsts = {component.name.split("-")[0]: component for component in reversed(group)}
    for component in firsts.values():
        _after_start(settings, component)


def down(settings: Settings) -> None:
    supervisor.stop_stack(settings)


def status(settings: Settings) -> list[ComponentStatus]:
    return supervisor.stack_status(settings, stack_components(settings))
