"""`tally up --cluster`: Tally on real clusters of its engines, on this one machine.

Three Kafka brokers (KRaft, each broker and controller, a three-voter quorum) hold every
topic three times with two in sync required; a Spark standalone master with two workers
runs the stream jobs' executors, the driver staying `python -m stream_jobs.app` (client
mode against spark://); two collectors and two archivers (one consumer group). ClickHouse
and the dashboard stay single, as in `tally up`. The same settings drive docker-compose.yml
(tests/unit/test_docker_compose.py holds them together), so the production file is the
configuration this mode runs and the cluster tests break.

Every instance has its own ports (from `cluster_base_port`, see `ClusterLayout`), its own
data folder under $TALLY_HOME and its own log under $TALLY_HOME/logs.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx

from ops.local import kafka
from ops.local.components import Component, components, http_ok
from ops.local.ports import port_open
from ops.local.supervisor import StackError
from tally import heartbeat
from tally.private_files import create_private_file
from tally.settings import Settings

BROKERS = 3
# Writes a broker answers only once two of the three copies hold them: one broker may be
# down (killed, cut off) and acks=all is still met.
REPLICATION_FACTOR = 3
MIN_INSYNC_REPLICAS = 2
SPARK_WORKERS = 2
COLLECTORS = 2
ARCHIVERS = 2
# Per instance, so that the whole cluster fits a small machine (docs/operations.md: about
# 5 GiB RSS in all): each broker's heap, each Spark daemon's (master, worker) heap, and what
# a worker offers its executor (one core of two; spark_executor_memory must fit in it).
BROKER_HEAP = "320m"
SPARK_DAEMON_MEMORY = "256m"
# The master and the workers only keep a registry and launch executors (the work runs in the
# executors, whose JVMs are the driver's to configure): the client compiler alone and the
# serial collector start them on less CPU.
SPARK_DAEMON_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
WORKER_CORES = 1
WORKER_MEMORY = "640m"
# Start groups (supervisord priorities; `tally up` starts one group at a time, its members
# together, and `tally down` stops them in reverse): the brokers and the store; the Spark
# master; its workers (which stop only after the driver whose executors they run); then, once
# the topics and the tables exist, every Tally process at once: the driver's start (a JVM, its
# executors, each query's first batch) is the longest, and the collectors and the dashboard
# need only the log and the store. (The Spark daemons started with the brokers made up to seven
# JVMs start at once, and at a load average of 45-50 the brokers missed their 120 s.)
ENGINES_PRIORITY = 10
SPARK_MASTER_PRIORITY = 12
SPARK_WORKERS_PRIORITY = 14
SERVICES_PRIORITY = 20
# Ports taken from cluster_base_port on (ClusterLayout).
PORTS_USED = 13
# The collectors' wait for acks=all before a 503: a broker's death costs a failover (a KRaft
# election when it was the active controller, then its fencing after broker.session.timeout.ms,
# then the new leaders in the metadata): ~10 s measured at load 16 on 2 cores, so 30 s
# leaves room for a busier machine. The producer still abandons and retries an unanswered
# request after 10 s (collector/event_log.py), so a cut-off leader is answered too.
COLLECTOR_SEND_TIMEOUT_S = 30.0
# Where `tally up --cluster` keeps the options that place its instances (ports, broker
# addresses), so that every later command finds them without the user repeating them.
LAYOUT_FILE = "cluster.json"
LAYOUT_SETTINGS = ("cluster_base_port", "cluster_broker_hosts", "cluster_broker_netns")


@dataclass(frozen=True)
class ClusterLayout:
    """Where each instance listens: cluster_base_port and the 12 ports after it."""

    base_port: int
    host: str = "127.0.0.1"
    # Per broker: its address (default `host`) and the network namespace it runs in (none).
    broker_hosts: tuple[str, ...] = ()
    broker_netns: tuple[str, ...] = ()

    def broker_host(self, n: int) -> str:
        return self.broker_hosts[n - 1] if self.broker_hosts else self.host

    def broker_command_prefix(self, n: int) -> list[str]:
        return ["ip", "netns", "exec", self.broker_netns[n - 1]] if self.broker_netns else []

    def brokers(self, kafka_dir: Path) -> list[kafka.BrokerNode]:
        return [
            kafka.BrokerNode(
                node_id=n,
                host=self.broker_host(n),
                port=self.base_port + n - 1,
                controller_port=self.base_port + BROKERS + n - 1,
                folder=kafka_dir / f"node-{n}",
            )
            for n in range(1, BROKERS + 1)
        ]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.broker_host(n + 1)}:{self.base_port + n}" for n in range(BROKERS))

    @property
    def spark_master_port(self) -> int:
        return self.base_port + 2 * BROKERS

    @property
    def spark_master_ui_port(self) -> int:
        return self.spark_master_port + 1

    @property
    def spark_master_url(self) -> str:
        return f"spark://{self.host}:{self.spark_master_port}"

    def worker_ports(self, n: int) -> tuple[int, int]:
        """Worker `n`'s (RPC, web UI) ports."""
        port = self.spark_master_ui_port + 1 + 2 * (n - 1)
        return port, port + 1

    def collector_ports(self, settings: Settings) -> list[int]:
        """The first collector keeps the usual port; the second takes the block's last."""
        return [settings.collector_port, self.base_port + PORTS_USED - 1]


def layout(settings: Settings) -> ClusterLayout:
    hosts = _listed(settings.cluster_broker_hosts)
    netns = _listed(settings.cluster_broker_netns)
    for name, listed in (("TALLY_CLUSTER_BROKER_HOSTS", hosts), ("TALLY_CLUSTER_BROKER_NETNS", netns)):
        if listed and len(listed) != BROKERS:
            raise StackError(f"{name} lists {len(listed)} entries: one per broker ({BROKERS}) or none")
    return ClusterLayout(settings.cluster_base_port, broker_hosts=hosts, broker_netns=netns)


def _listed(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


def store_layout(settings: Settings) -> Settings:
    """At `tally up --cluster`: the layout options given now (in the environment), else the
    ones stored by an earlier start, written to $TALLY_HOME for every later command."""
    given = {name: getattr(settings, name) for name in LAYOUT_SETTINGS if name in settings.model_fields_set}
    stored = {**_stored(settings), **given}
    settings = settings.model_copy(update=stored)
    layout(settings)  # one line for a bad list, before anything is written
    text = json.dumps({name: getattr(settings, name) for name in LAYOUT_SETTINGS}, indent=2)
    path = settings.home_dir / LAYOUT_FILE
    # Replaced whole, never half written: a new private file renamed over the old one.
    fresh = path.with_name(f"{LAYOUT_FILE}.new")
    fresh.unlink(missing_ok=True)
    create_private_file(fresh, text + "\n")
    fresh.replace(path)
    return settings


def stored_layout(settings: Settings) -> Settings:
    """`settings` with the layout the cluster in $TALLY_HOME was started with: where its
    instances listen is theirs, whatever this command's environment says."""
    return settings.model_copy(update=_stored(settings))


def _stored(settings: Settings) -> dict[str, object]:
    path = settings.home_dir / LAYOUT_FILE
    if not path.is_file():
        return {}
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise StackError(
            f"{path} is unreadable ({error}): remove it and start with `tally up --cluster`"
        ) from None
    return {name: stored[name] for name in LAYOUT_SETTINGS if name in stored}


def is_cluster_home(settings: Settings) -> bool:
    """A $TALLY_HOME whose log is a cluster's (`tally up --cluster` formatted it)."""
    return (settings.kafka_dir / "node-1").is_dir()


def cluster_environment(settings: Settings) -> dict[str, str]:
    """The settings every process of the cluster reads on top of the user's: where the log
    and the Spark master are, how replicated the topics are."""
    where = layout(settings)
    return {
        "TALLY_KAFKA_BOOTSTRAP": where.bootstrap,
        "TALLY_KAFKA_REPLICATION_FACTOR": str(REPLICATION_FACTOR),
        "TALLY_KAFKA_MIN_INSYNC_REPLICAS": str(MIN_INSYNC_REPLICAS),
        "TALLY_SPARK_MASTER": where.spark_master_url,
        "TALLY_SPARK_CORES_MAX": str(SPARK_WORKERS * WORKER_CORES),
        "TALLY_SPARK_EXECUTOR_CORES": str(WORKER_CORES),
        "TALLY_COLLECTOR_SEND_TIMEOUT_S": f"{COLLECTOR_SEND_TIMEOUT_S:g}",
        "TALLY_CLUSTER_BASE_PORT": str(where.base_port),
    }


def cluster_settings(settings: Settings) -> Settings:
    """`settings` as the cluster's processes see them (placed as stored in $TALLY_HOME)."""
    settings = stored_layout(settings)
    where = layout(settings)
    return settings.model_copy(
        update={
            "kafka_bootstrap": where.bootstrap,
            "kafka_replication_factor": REPLICATION_FACTOR,
            "kafka_min_insync_replicas": MIN_INSYNC_REPLICAS,
            "spark_master": where.spark_master_url,
            "spark_cores_max": SPARK_WORKERS * WORKER_CORES,
            "spark_executor_cores": WORKER_CORES,
            "collector_send_timeout_s": COLLECTOR_SEND_TIMEOUT_S,
        }
    )


def prepare_brokers(settings: Settings) -> None:
    settings = cluster_settings(settings)  # the replication the configs write
    nodes = layout(settings).brokers(settings.kafka_dir)
    # Each node's storage is formatted by a JVM of its own: the three at once, not in turn.
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        for prepared in [pool.submit(kafka.prepare, settings, node, nodes) for node in nodes]:
            prepared.result()


def spark_class() -> str:
    """pyspark's own launcher: runs the standalone Master and Worker from the wheel's jars."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise RuntimeError("pyspark is not installed: run `make install`")
    return str(Path(spec.origin).parent / "bin" / "spark-class")


def alive_workers(settings: Settings) -> set[int]:
    """The ports of the workers the master counts ALIVE (its web UI's JSON)."""
    url = f"http://127.0.0.1:{layout(settings).spark_master_ui_port}/json/"
    try:
        state = httpx.get(url, timeout=2).json()
    except (httpx.HTTPError, ValueError):
        return set()
    return {worker["port"] for worker in state.get("workers", []) if worker.get("state") == "ALIVE"}


def _instance(settings: Settings, n: int) -> Settings:
    return settings.model_copy(update={"instance": str(n)})


def cluster_components(settings: Settings) -> list[Component]:
    """Every process of the cluster, in the order `tally status` lists them; started in the
    groups of ENGINES_PRIORITY, SPARK_MASTER_PRIORITY, SPARK_WORKERS_PRIORITY and
    SERVICES_PRIORITY."""
    settings = cluster_settings(settings)
    single = {
        component.name: dataclasses.replace(
            component, priority=ENGINES_PRIORITY if component.name == "clickhouse" else SERVICES_PRIORITY
        )
        for component in components(settings)
    }
    return [
        *_brokers(settings),
        single["clickhouse"],
        *_spark_cluster(settings),
        *_archivers(settings, single["archiver"]),
        single["spark"],
        single["alerts"],
        single["jobs"],
        *_collectors(settings, single["collector"]),
        single["dashboard"],
    ]


def _brokers(settings: Settings) -> list[Component]:
    where = layout(settings)
    return [
        Component(
            f"kafka-{node.node_id}",
            [
                *where.broker_command_prefix(node.node_id),
                *kafka.broker_command(settings, node, heap=BROKER_HEAP),
            ],
            # Together: a broker waits for a quorum of controllers before it listens.
            priority=ENGINES_PRIORITY,
            port=node.port,
            healthy=lambda node=node: port_open(node.port, node.host),
            start_timeout_s=120,
            stop_grace_s=30,
        )
        for node in where.brokers(settings.kafka_dir)
    ]


def _spark_cluster(settings: Settings) -> list[Component]:
    where = layout(settings)
    daemon = {"SPARK_DAEMON_MEMORY": SPARK_DAEMON_MEMORY, "SPARK_DAEMON_JAVA_OPTS": SPARK_DAEMON_JAVA_OPTS}
    master = Component(
        "spark-master",
        [
            spark_class(),
            "org.apache.spark.deploy.master.Master",
            *("--host", where.host, "--port", str(where.spark_master_port)),
            *("--webui-port", str(where.spark_master_ui_port)),
        ],
        priority=SPARK_MASTER_PRIORITY,
        port=where.spark_master_port,
        healthy=lambda: http_ok(f"http://127.0.0.1:{where.spark_master_ui_port}/json/"),
        environment=daemon,
    )
    workers = []
    for n in range(1, SPARK_WORKERS + 1):
        port, ui_port = where.worker_ports(n)
        folder = settings.home_dir / "spark" / f"worker-{n}"
        workers.append(
            Component(
                f"spark-worker-{n}",
                [
                    spark_class(),
                    "org.apache.spark.deploy.worker.Worker",
                    *("--host", where.host, "--port", str(port), "--webui-port", str(ui_port)),
                    *("--cores", str(WORKER_CORES), "--memory", WORKER_MEMORY),
                    *("--work-dir", str(folder / "work")),
                    where.spark_master_url,
                ],
                priority=SPARK_WORKERS_PRIORITY,
                port=port,
                # Healthy once the master counts it: only then can it take executors.
                healthy=lambda port=port: port in alive_workers(settings),
                # Executors' shuffle and state scratch stays under this worker's folder.
                environment={**daemon, "SPARK_LOCAL_DIRS": str(folder / "local")},
            )
        )
    return [master, *workers]


def _archivers(settings: Settings, archiver: Component) -> list[Component]:
    return [
        Component(
            f"archiver-{n}",
            archiver.command,
            priority=archiver.priority,
            port=None,
            healthy=lambda n=n: heartbeat.is_fresh(_instance(settings, n), "archiver"),
            detail=archiver.detail,
            environment={"TALLY_INSTANCE": str(n)},
        )
        for n in range(1, ARCHIVERS + 1)
    ]


def _collectors(settings: Settings, collector: Component) -> list[Component]:
    return [
        Component(
            f"collector-{n}",
            collector.command,
            priority=collector.priority,
            port=port,
            healthy=lambda port=port: http_ok(f"http://127.0.0.1:{port}/healthz"),
            environment={"TALLY_COLLECTOR_PORT": str(port), "TALLY_INSTANCE": str(n)},
        )
        for n, port in enumerate(layout(settings).collector_ports(settings), start=1)
    ]


def controller_ports(settings: Settings) -> list[int]:
    settings = cluster_settings(settings)
    return [node.controller_port for node in layout(settings).brokers(settings.kafka_dir)]
