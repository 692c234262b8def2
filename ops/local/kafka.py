"""The local Apache Kafka broker: one KRaft node (broker + controller) run from the jars
that `make install` resolves from Maven Central into .deps/kafka.

This module only prepares the broker (config files, storage format) and says how to run
it; the supervisor (or a test fixture) owns the process. See docs/local-platform.md for
what it took to run Kafka this way.
"""

from __future__ import annotations

import subprocess
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


def server_properties(settings: Settings) -> str:
    """server.properties for a single-node KRaft broker on loopback."""
    broker = f"127.0.0.1:{settings.kafka_port}"
    controller = f"127.0.0.1:{settings.kafka_controller_port}"
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@{controller}",
            f"listeners=PLAINTEXT://{broker},CONTROLLER://{controller}",
            f"advertised.listeners=PLAINTEXT://{broker}",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "inter.broker.listener.name=PLAINTEXT",
            f"log.dirs={settings.kafka_dir / 'data'}",
            f"num.partitions={settings.pageviews_partitions}",
            # One node: internal topics cannot be replicated.
            "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=false",
            # Keep a week of raw events locally; the archive keeps them for good.
            "log.retention.hours=168",
            "",
        ]
    )


def prepare(settings: Settings) -> Path:
    """Write the config and format the storage once; returns the config path."""
    if not any(settings.kafka_jars.glob("kafka_2.13-*.jar")):
        raise RuntimeError(f"Kafka jars missing in {settings.kafka_jars}: run `make install`")
    settings.kafka_dir.mkdir(parents=True, exist_ok=True)
    config = settings.kafka_dir / "server.properties"
    config.write_text(server_properties(settings))
    (settings.kafka_dir / "log4j2.yaml").write_text(_LOG4J2)
    if not (settings.kafka_dir / "data" / "meta.properties").exists():
        _format_storage(settings, config)
    return config


def _format_storage(settings: Settings, config: Path) -> None:
    result = subprocess.run(
        [
            *_java(settings, heap="128m"),
            "kafka.tools.StorageTool",
            "format",
            "-t",
            LOCAL_CLUSTER_ID,
            "-c",
            str(config),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"formatting Kafka storage failed: {result.stdout}{result.stderr}")


def _java(settings: Settings, heap: str) -> list[str]:
    return [
        "java",
        f"-Xms{heap}",
        f"-Xmx{heap}",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={settings.kafka_dir / 'log4j2.yaml'}",
        "-cp",
        f"{settings.kafka_jars}/*",
    ]


def broker_command(settings: Settings) -> list[str]:
    """The command line that runs the broker in the foreground (what kafka-server-start.sh runs)."""
    return [
        *_java(settings, heap=settings.kafka_heap),
        "kafka.Kafka",
        str(settings.kafka_dir / "server.properties"),
    ]
