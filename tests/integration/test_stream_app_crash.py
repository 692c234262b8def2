"""The Spark application killed with SIGKILL mid-stream and restarted leaves the same tables
as an uninterrupted run over the same log.

The application runs as under `tally up`: `python -m stream_jobs.app` in its own process
group (the Python driver and the JVM it launched); the whole group is killed at once, as a
container's OOM kill or a power cut would. It is killed halfway through writing a
micro-batch: it reaches the store through a proxy (tests/fixtures/store_proxy.py) that holds
its insert into `rate_limit_counters`, so the batch's rollups and sessions are written and the
rest is not when the kill lands. The uninterrupted run to compare with is a run of the same
query from a fresh checkpoint over the whole log (stream_jobs.replay.rebuild), in this test
session's Spark.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from storage import tables
from storage.client import connect
from stream_jobs.context import REPLAY_SUFFIX
from stream_jobs.queries import REPLAYED_QUERIES as QUERIES  # those with tables and a watermark
from stream_jobs.replay import DERIVED_TABLES, rebuild
from tally.settings import PROJECT_ROOT, Settings
from tests.fixtures.clickhouse import Endpoint
from tests.fixtures.events import page_view
from tests.fixtures.spark import (
    isolated_settings,
    minutes_ago,
    mixed_traffic,
    produce,
    published_watermark,
    site_names,
    table_contents,
    wait_until,
)
from tests.fixtures.store_proxy import store_proxy

pytestmark = pytest.mark.integration


def test_sigkill_of_the_driver_mid_stream_leaves_the_tables_of_an_uninterrupted_run(
    spark: SparkSession, tmp_path: Path, kafka_bootstrap: str, clickhouse_endpoint: Endpoint
) -> None:
    settings = isolated_settings(
        tmp_path / "home", kafka_bootstrap, clickhouse_endpoint, rate_limit=5, rate_window_s=600
    )
    sites = site_names(3)
    t = minutes_ago(120)
    produce(settings, mixed_traffic(sites, t, minutes=3))
    with store_proxy(settings.clickhouse_url) as proxy:
        proxied = settings.model_copy(update={"clickhouse_url": proxy.url})
        with running_app(proxied, tmp_path / "app-1.log") as app:
            started = wait_until(lambda: queries_with_batches(settings), lambda n: n == len(QUERIES))
            assert started == len(QUERIES)
            # A bigger round. Only a batch with page views writes rate-limit panes, after its
            # rollups and sessions: held there, it is the batch in flight when the driver dies.
            proxy.faults.held_table = tables.RATE_LIMIT_COUNTERS
            second_round = t + timedelta(minutes=3)
            produce(settings, mixed_traffic(sites, second_round, minutes=30, seed=1))
            assert wait_until(lambda: proxy.faults.inserts_held, lambda n: n > 0) > 0
            assert rollup_rows_since(settings, second_round) > 0, "the batch wrote its rollups"
            os.killpg(app.pid, signal.SIGKILL)
            app.wait()
    in_flight = [name for name in QUERIES if uncommitted_batches(settings.checkpoints_dir / name)]
    assert in_flight, "the kill should land while a micro-batch is running"

    last = t + timedelta(minutes=90)
    with running_app(settings, tmp_path / "app-2.log"):
        produce(settings, mixed_traffic(sites, t + timedelta(minutes=33), minutes=2, seed=2))
        produce(settings, [page_view(sites[0], "clock", last)])
        watermark = last - timedelta(seconds=settings.watermark_s)
        for name in QUERIES:
            seen = wait_until(lambda name=name: published_watermark(settings, name), lambda w: w >= watermark)
            assert seen >= watermark, name

    rebuild(spark, settings)
    for table in DERIVED_TABLES:
        assert table_contents(settings, table) == table_contents(settings, table, REPLAY_SUFFIX), table
    assert table_contents(settings, "sessions") and table_contents(settings, "rate_limit_blocks")


@contextmanager
def running_app(settings: Settings, log_path: Path) -> Iterator[subprocess.Popen]:
    """`python -m stream_jobs.app` configured by environment, in a process group of its own;
    stopped with SIGTERM on the way out (unless the test killed it)."""
    environment = os.environ | settings.environment()
    with log_path.open("wb") as log:
        app = subprocess.Popen(
            [sys.executable, "-m", "stream_jobs.app"],
            cwd=PROJECT_ROOT,
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield app
        finally:
            if app.poll() is None:
                # The driver only: it stops its queries and its JVM. (TERM to the group would
                # take the JVM down under it; harmless, as every stop is, but noisy.)
                os.kill(app.pid, signal.SIGTERM)
                try:
                    app.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(app.pid, signal.SIGKILL)
                    app.wait()


def uncommitted_batches(checkpoint: Path) -> set[int]:
    """Batches Spark planned (offsets written) but did not commit: they run again on restart."""
    planned = {int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()}
    committed = {int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()}
    return planned - committed


def rollup_rows_since(settings: Settings, start: datetime) -> int:
    rows = connect(settings).query(
        "SELECT count() FROM rollup_minute WHERE bucket >= {start:DateTime('UTC')}",
        parameters={"start": start},
    )
    return int(rows.result_rows[0][0])


def queries_with_batches(settings: Settings) -> int:
    return int(connect(settings).query("SELECT uniqExact(query_name) FROM stream_batches").result_rows[0][0])
