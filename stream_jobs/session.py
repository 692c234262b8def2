"""The SparkSession every streaming query of Tally runs in.

Locally (`local[2]`) the driver is the whole engine, so its memory is set explicitly: the
local stack (Kafka, ClickHouse, Spark, the services) has to fit in 4 GiB RSS. On a cluster
(`TALLY_SPARK_MASTER=spark://…`, or spark-submit) only the master and the jars come from
here; nothing below assumes the executors share this machine.
"""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

from tally.settings import Settings

# One state-store instance (and task) per core of local[2]: every batch commits each instance,
# so Spark's default of 200 would cost 200 commits a batch (4 measured slower than 2 here).
# A query keeps the number it started with in its checkpoint.
SHUFFLE_PARTITIONS = 2
ROCKSDB_STATE_STORE = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def is_local(master: str) -> bool:
    return master.startswith("local")


def build_spark_session(settings: Settings, app_name: str = "tally-stream-jobs") -> SparkSession:
    """Start (or join) the SparkSession configured from `settings`; takes 7-11 s cold here."""
    if is_local(settings.spark_master):
        # Otherwise Spark binds to the external interface. Not on a cluster: executors on
        # other machines must reach the driver.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # Shuffle and state scratch under TALLY_HOME rather than /tmp. Through the environment
        # (the launched JVM inherits it): spark.local.dir draws a warning on every start.
        local_dir = settings.home_dir / "spark"
        local_dir.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("SPARK_LOCAL_DIRS", str(local_dir))
    builder = (
        SparkSession.builder.appName(app_name)
        .master(settings.spark_master)
        .config("spark.jars", ",".join(str(jar) for jar in settings.spark_jars))
        # Only effective when this call launches the JVM (python -m stream_jobs.app, tests);
        # spark-submit passes --driver-memory itself.
        .config("spark.driver.memory", settings.spark_driver_memory)
        .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
        # Event time is UTC; the machine's zone must not shift parsing or window bounds.
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        # Streaming plans cannot use adaptive execution; saying so spares a warning per query.
        .config("spark.sql.adaptive.enabled", "false")
        # The PageViewEvent has 26 fields; Spark's default of 25 truncates plans in the log.
        .config("spark.sql.debug.maxToStringFields", "100")
        # A console progress bar is noise in a service log.
        .config("spark.ui.showConsoleProgress", "false")
        # Hadoop's file system sets each checkpoint file's mode itself from its own umask
        # (022 by default), not the process's: keep checkpoints (they hold visitor ids) private.
        .config("spark.hadoop.fs.permissions.umask-mode", "077")
        # The activity query keeps every open visitor's page views as state: RocksDB keeps it
        # off the JVM heap, and changelog checkpointing writes only what a batch changed.
        .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_STATE_STORE)
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
    )
    if not is_local(settings.spark_master):
        builder = _on_cluster(builder, settings)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _on_cluster(builder: SparkSession.Builder, settings: Settings) -> SparkSession.Builder:
    """Client mode on a cluster: this process is the driver; spark.jars (above) is served by
    it to every executor, the Kafka connector and the stateful operator's jar alike."""
    return (
        builder.config("spark.driver.host", settings.spark_driver_host)
        .config("spark.executor.memory", settings.spark_executor_memory)
        .config("spark.executor.cores", str(settings.spark_executor_cores))
        .config("spark.cores.max", str(settings.spark_cores_max))
    )
