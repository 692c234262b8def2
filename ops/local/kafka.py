"""The local Apache Kafka broker: one KRaft node (broker + controller) run from the jars
that `make install` resolves from Maven Central into .deps/kafka.

This module only prepares the broker (config files, storage format) and says how to run
it; the supervisor (or a test fixture) owns the process. See docs/local-platform.md for
what it took to run Kafka this way.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tally.settings import Settings

# A fixed cluster id: the local data dir is formatted once and reused across restarts.
LOCAL_CLUSTER_ID = "tallyLocalKRaftNode01A"

_LOG4J2 = """\
Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: kafka.server.KafkaRaftServer
        level: INFO
      - name: kafka.server.BrokerServer
        level: INFO
"""


@dataclass(frozen=True)
class BrokerNode:
    """One KRaft node (broker and controller in one process) of the local log."""

    node_id: int
    host: str
    port: int
    controller_port: int
    # Its config, log4j2 file and `data` folder.
    folder: Path

    @property
    def config(self) -> Path:
        return self.folder / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.folder / "data"

    def voter(self) -> str:
        return f"{self.node_id}@{self.host}:{self.controller_port}"


def single_node(settings: Settings) -> BrokerNode:
    """The one broker of `tally up`: $TALLY_HOME/kafka, on the ports of the settings."""
    return BrokerNode(1, "127.0.0.1", settings.kafka_port, settings.kafka_controller_port, settings.kafka_dir)


def server_properties(
    settings: Settings, node: BrokerNode | None = None, voters: Sequence[BrokerNode] = ()
) -> str:
    """server.properties for one KRaft node; `voters`: every controller of the quorum (by
    default the node alone)."""
    node = node or single_node(settings)
    quorum = list(voters) or [node]
    broker = f"{node.host}:{node.port}"
    controller = f"{node.host}:{node.controller_port}"
    replicas = settings.kafka_replication_factor
    min_isr = settings.kafka_min_insync_replicas
    lines = [
        "process.roles=broker,controller",
        f"node.id={node.node_id}",
        f"controller.quorum.voters={','.join(voter.voter() for voter in quorum)}",
        f"listeners=PLAINTEXT://{broker},CONTROLLER://{controller}",
        f"advertised.listeners=PLAINTEXT://{broker}",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "inter.broker.listener.name=PLAINTEXT",
        f"log.dirs={node.data_dir}",
        f"num.partitions={settings.pageviews_partitions}",
        # Kafka's internal topics as replicated as Tally's (one node: not at all).
        f"offsets.topic.replication.factor={replicas}",
        f"default.replication.factor={replicas}",
        f"min.insync.replicas={min_isr}",
        f"transaction.state.log.replication.factor={replicas}",
        f"transaction.state.log.min.isr={min_isr}",
        f"share.coordinator.state.topic.replication.factor={replicas}",
        f"share.coordinator.state.topic.min.isr={min_isr}",
        "group.initial.rebalance.delay.ms=0",
        "auto.create.topics.enable=false",
        # Keep a week of raw events locally; the archive keeps them for good.
        "log.retention.hours=168",
    ]
    if len(quorum) > 1:
        lines += [
            # A dead or cut-off broker is fenced (and leaves every ISR, so acks=all goes on
            # with the other two) after 4 s rather than Kafka's 9: well inside the collector's
            # 10 s send timeout, so that a broker's death costs a pause, not a 503.
            "broker.session.timeout.ms=4000",
            "broker.heartbeat.interval.ms=1000",
            # A follower that answers but lags is dropped from the ISR after 10 s, not 30.
            "replica.lag.time.max.ms=10000",
            "unclean.leader.election.enable=false",
        ]
    return "\n".join([*lines, ""])


def prepare(settings: Settings, node: BrokerNode | None = None, voters: Sequence[BrokerNode] = ()) -> Path:
    """Write the node's config and format its storage once; returns the config path."""
    node = node or single_node(settings)
    if not any(settings.kafka_jars.glob("kafka_2.13-*.jar")):
        raise RuntimeError(f"Kafka jars missing in {settings.kafka_jars}: run `make install`")
    node.folder.mkdir(parents=True, exist_ok=True)
    node.config.write_text(server_properties(settings, node, voters))
    (node.folder / "log4j2.yaml").write_text(_LOG4J2)
    if not (node.data_dir / "meta.properties").exists():
        _format_storage(settings, node)
    return node.config


def _format_storage(settings: Settings, node: BrokerNode) -> None:
    result = subprocess.run(
        [
            *_java(node, settings, heap="128m"),
            "kafka.tools.StorageTool",
            "format",
            "-t",
            LOCAL_CLUSTER_ID,
            "-c",
            str(node.config),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"formatting Kafka storage failed: {result.stdout}{result.stderr}")


def _java(node: BrokerNode, settings: Settings, heap: str) -> list[str]:
    return [
        "java",
        f"-Xms{heap}",
        f"-Xmx{heap}",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={node.folder / 'log4j2.yaml'}",
        "-cp",
        f"{settings.kafka_jars}/*",
    ]


def broker_command(settings: Settings, node: BrokerNode | None = None, heap: str = "") -> list[str]:
    """The command line that runs a broker in the foreground (what kafka-server-start.sh runs)."""
    node = node or single_node(settings)
    return [*_java(node, settings, heap=heap or settings.kafka_heap), "kafka.Kafka", str(node.config)]
