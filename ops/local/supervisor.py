"""The local stack, run by supervisord (a real process manager, driven over its XML-RPC socket).

`tally up` writes $TALLY_HOME/supervisord.conf, starts supervisord, then starts each component
in order and waits for it to be healthy before the next. supervisord restarts a component
that dies, kills whole process groups on stop (no orphaned JVMs) and keeps one log per
component under $TALLY_HOME/logs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import xmlrpc.client
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from supervisor.xmlrpc import SupervisorTransport

from ops.local.components import Component
from ops.local.ports import port_open
from tally.private_files import make_private_dir
from tally.settings import Settings


class StackError(RuntimeError):
    """A problem the user can fix, worded as one line."""


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    state: str
    pid: int | None
    port: int | None
    healthy: bool
    detail: str = ""


def _socket_path(settings: Settings) -> Path:
    return settings.home_dir / "run" / "supervisor.sock"


def _pidfile(settings: Settings) -> Path:
    return settings.home_dir / "run" / "supervisord.pid"


def render_config(settings: Settings, stack: Sequence[Component]) -> str:
    """supervisord.conf for `stack`; components do not autostart: `up` starts them in order."""
    home = settings.home_dir
    sections = [
        "[unix_http_server]",
        f"file={_socket_path(settings)}",
        "chmod=0600",
        "",
        "[supervisord]",
        f"logfile={settings.logs_dir / 'supervisord.log'}",
        f"pidfile={_pidfile(settings)}",
        f"directory={home}",
        "logfile_maxbytes=10MB",
        "logfile_backups=2",
        # supervisord sets its own umask (022 unless told): its logs, its socket and every
        # component it starts (and all they write under $TALLY_HOME) stay the operator's alone.
        "umask=077",
        "",
        "[rpcinterface:supervisor]",
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
        "",
    ]
    for component in stack:
        sections += [
            f"[program:{component.name}]",
            f"command={subprocess.list2cmdline(component.command)}",
            *_environment_line(component),
            f"priority={component.priority}",
            "autostart=false",
            "autorestart=true",
            "startsecs=3",
            # Generous: a component whose dependency is down keeps retrying (with supervisord's
            # growing back-off) instead of going FATAL and needing a hand.
            "startretries=30",
            "stopsignal=TERM",
            f"stopwaitsecs={component.stop_grace_s}",
            # Signal the whole process group: Spark's JVM is a child of its Python driver.
            "stopasgroup=true",
            "killasgroup=true",
            "redirect_stderr=true",
            f"stdout_logfile={settings.logs_dir / (component.name + '.log')}",
            "stdout_logfile_maxbytes=20MB",
            "stdout_logfile_backups=2",
            "",
        ]
    return "\n".join(sections)


def _environment_line(component: Component) -> list[str]:
    if not component.environment:
        return []
    # supervisord's syntax: KEY="value",… (values quoted: bootstrap lists hold commas).
    pairs = ",".join(f'{key}="{value}"' for key, value in component.environment.items())
    return [f"environment={pairs}"]


def rpc(settings: Settings) -> xmlrpc.client.ServerProxy:
    transport = SupervisorTransport(None, None, f"unix://{_socket_path(settings)}")
    return xmlrpc.client.ServerProxy("http://127.0.0.1", transport=transport)


def supervisor_running(settings: Settings) -> bool:
    if not _socket_path(settings).exists():
        return False
    try:
        return rpc(settings).supervisor.getState()["statename"] == "RUNNING"
    except (OSError, xmlrpc.client.Error):
        return False


def check_prerequisites(
    settings: Settings, stack: list[Component], controller_ports: Sequence[int] | None = None
) -> None:
    """Fail fast, in one line, on what would otherwise fail deep inside a component."""
    if subprocess.run(["java", "-version"], capture_output=True, check=False).returncode != 0:
        raise StackError("Java 17+ is required and `java` was not found on PATH")
    if not any(settings.kafka_jars.glob("kafka_2.13-*.jar")) or not settings.spark_jars:
        raise StackError(f"the Kafka/Spark jars are missing under {settings.jars_dir}: run `make install`")
    for component in stack:
        if component.port is not None and port_open(component.port):
            raise StackError(
                f"port {component.port} (for {component.name}) is already in use: "
                f"stop what holds it or set another port in the TALLY_* settings"
            )
    for port in [settings.kafka_controller_port] if controller_ports is None else controller_ports:
        if port and port_open(port):
            raise StackError(f"port {port} (Kafka controller) is already in use")


def start_supervisord(
    settings: Settings, stack: Sequence[Component], environment: Mapping[str, str] | None = None
) -> None:
    """Start supervisord for `stack`; `environment`: settings every component reads on top of
    the user's (the cluster's bootstrap list and Spark master)."""
    for folder in (settings.logs_dir, settings.home_dir / "run"):
        make_private_dir(folder)
    config = settings.home_dir / "supervisord.conf"
    config.write_text(render_config(settings, stack))
    env = {
        **os.environ,
        **(environment or {}),
        "TALLY_HOME": str(settings.home_dir),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONUNBUFFERED": "1",
    }
    subprocess.run(
        [sys.executable, "-m", "supervisor.supervisord", "-c", str(config)],
        env=env,
        check=True,
        cwd=settings.home_dir,
    )
    deadline = time.monotonic() + 15
    while not supervisor_running(settings):
        if time.monotonic() > deadline:
            raise StackError(f"supervisord did not start: see {settings.logs_dir / 'supervisord.log'}")
        time.sleep(0.2)


def start_component(settings: Settings, component: Component) -> None:
    """Start one component and wait until it is healthy."""
    launch_component(settings, component, wait=True)
    wait_until_healthy(settings, component)


def launch_component(settings: Settings, component: Component, wait: bool = False) -> None:
    """Have supervisord start `component` (without waiting for its health)."""
    try:
        rpc(settings).supervisor.startProcess(component.name, wait)
    except xmlrpc.client.Fault as fault:
        if "ALREADY_STARTED" not in fault.faultString:
            log = settings.logs_dir / f"{component.name}.log"
            raise StackError(f"{component.name} failed to start ({fault.faultString}): see {log}") from None


def wait_until_healthy(settings: Settings, component: Component) -> None:
    server = rpc(settings)
    deadline = time.monotonic() + component.start_timeout_s
    while not component.healthy():
        info = server.supervisor.getProcessInfo(component.name)
        if info["statename"] in ("FATAL", "EXITED", "BACKOFF") or time.monotonic() > deadline:
            log = settings.logs_dir / f"{component.name}.log"
            raise StackError(f"{component.name} did not become healthy ({info['statename']}): see {log}")
        time.sleep(0.5)


def stop_stack(settings: Settings, timeout_s: float = 120) -> None:
    """Stop every component and supervisord itself; wait until all are gone.

    Last started first, one priority at a time: stopAllProcesses signals all at once, and the
    archiver then lost ClickHouse and Kafka under it while it was still finishing a batch. The
    components of one priority stop together, as `tally up` starts them: a cluster's three
    brokers (its KRaft voters too) stopped one by one left the last without a quorum to approve
    its controlled shutdown, and supervisord killed it after its 30 s grace."""
    if not supervisor_running(settings):
        return
    server = rpc(settings)
    pids = [info["pid"] for info in server.supervisor.getAllProcessInfo() if info["pid"]]
    supervisord_pid = server.supervisor.getPID()
    configs = server.supervisor.getAllConfigInfo()
    for priority in sorted({config["process_prio"] for config in configs}, reverse=True):
        _stop_together(server, [config["name"] for config in configs if config["process_prio"] == priority])
    server.supervisor.shutdown()
    deadline = time.monotonic() + timeout_s
    while any(_alive(pid) for pid in [*pids, supervisord_pid]):
        if time.monotonic() > deadline:
            raise StackError(f"some processes did not stop: {[p for p in pids if _alive(p)]}")
        time.sleep(0.2)


def _stop_together(server: xmlrpc.client.ServerProxy, names: list[str]) -> None:
    """Signal each, then wait until none is stopping (supervisord kills one that outlives its
    stopwaitsecs)."""
    for name in names:
        try:
            server.supervisor.stopProcess(name, False)
        except xmlrpc.client.Fault as fault:
            if "NOT_RUNNING" not in fault.faultString:
                raise
    while any(server.supervisor.getProcessInfo(name)["statename"] == "STOPPING" for name in names):
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purposes (its parent has not reaped it yet).
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def stack_status(settings: Settings, stack: list[Component]) -> list[ComponentStatus]:
    infos = {}
    if supervisor_running(settings):
        infos = {info["name"]: info for info in rpc(settings).supervisor.getAllProcessInfo()}
    statuses = []
    for component in stack:
        info = infos.get(component.name, {})
        running = info.get("statename") == "RUNNING"
        statuses.append(
            ComponentStatus(
                name=component.name,
                state=info.get("statename", "STOPPED").lower(),
                pid=info.get("pid") or None,
                port=component.port,
                healthy=running and component.healthy(),
                detail=component.detail(),
            )
        )
    return statuses
