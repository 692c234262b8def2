"""`tally bench --only cluster`: the single node and the cluster mode side by side, in one run.

Each mode gets a fresh home of its own under $TALLY_HOME/bench-cluster/ and is started the
way a user starts it (`tally up -d`, `tally up -d --cluster`), on the ports from
TALLY_CLUSTER_BASE_PORT on. The same offered load goes to each in turn: `events` page views
at OFFERED_RATE/s, open loop, from the same two sender processes (one per collector on the
cluster, both to the one collector on the single node), the same seeds, no bots. Reported
per mode: the accepted rate, the latency of the 202s (from each request's scheduled time, so
a backlog shows), how long until the archive held every accepted event, and the load average
around the run. The modes run one after the other with nothing else of the bench running,
so they share the same background; on a shared machine that background is still whatever
else runs there, which the load averages show.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from loadgen.__main__ import LoadPlan, run_plan
from loadgen.ground_truth import GroundTruth
from loadgen.runner import RunSummary
from loadgen.traffic import TrafficMix
from ops.local.cluster import PORTS_USED, ClusterLayout
from storage.client import connect
from tally.settings import Settings

MODES = ("single", "cluster")
OFFERED_RATE = 600  # page views/s: beyond what either mode takes on two cores, so it measures capacity
SENDERS = 2
SITE = "cluster.bench.example.com"
# The archive is complete once it holds every accepted event; give up after this long.
ARCHIVE_TIMEOUT_S = 900


@dataclass(frozen=True)
class Mode:
    """One mode's own home and ports, and how the bench talks to it."""

    name: str
    home: Path
    base_port: int

    @property
    def with_cluster(self) -> bool:
        return self.name == "cluster"

    def environment(self) -> dict[str, str]:
        after = self.base_port + PORTS_USED
        return {
            **os.environ,
            "TALLY_HOME": str(self.home),
            "TALLY_CLUSTER_BASE_PORT": str(self.base_port),
            "TALLY_COLLECTOR_PORT": str(after),
            "TALLY_DASHBOARD_PORT": str(after + 1),
            "TALLY_CLICKHOUSE_URL": f"http://127.0.0.1:{after + 2}",
            "TALLY_KAFKA_BOOTSTRAP": f"127.0.0.1:{after + 3}",
            "TALLY_KAFKA_CONTROLLER_PORT": str(after + 4),
        }

    def settings(self) -> Settings:
        after = self.base_port + PORTS_USED
        return Settings(
            home=self.home,
            cluster_base_port=self.base_port,
            collector_port=after,
            clickhouse_url=f"http://127.0.0.1:{after + 2}",
        )

    def collector_urls(self) -> list[str]:
        """Where the senders post: one per sender, spread over the mode's collectors."""
        settings = self.settings()
        ports = (
            ClusterLayout(self.base_port).collector_ports(settings)
            if self.with_cluster
            else [settings.collector_port]
        )
        return [f"http://127.0.0.1:{ports[n % len(ports)]}" for n in range(SENDERS)]

    def tally(self, *args: str, timeout: float = 900) -> None:
        result = subprocess.run(
            [sys.executable, "-m", "ops.cli", *args],
            env=self.environment(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            said = (result.stdout + result.stderr)[-400:]
            raise RuntimeError(f"tally {' '.join(args)} ({self.name}): {said}")


def bench_cluster(settings: Settings, events: int) -> dict[str, object]:
    """Both modes in turn under the same offered load; their figures side by side."""
    duration_s = events / OFFERED_RATE
    results: dict[str, object] = {
        "offered_rate": OFFERED_RATE,
        "offered_events": events,
        "duration_s": round(duration_s, 1),
        "senders": SENDERS,
    }
    for name in MODES:
        mode = Mode(name, settings.home_dir / "bench-cluster" / name, settings.cluster_base_port)
        results[name] = measure_mode(mode, duration_s)
    return results


def measure_mode(mode: Mode, duration_s: float) -> dict[str, object]:
    shutil.rmtree(mode.home, ignore_errors=True)  # a fresh home: the same start for both modes
    started = time.monotonic()
    try:
        mode.tally("up", "-d", *(["--cluster"] if mode.with_cluster else []))
        up_s = time.monotonic() - started
        mode.tally("sites", "add", SITE)
        time.sleep(5)  # every collector refreshes its registry of sites
        load_before = _load()
        sent_at = time.monotonic()
        summary, truth = _offer(mode, duration_s)
        load_after_sending = _load()
        accepted = len(truth.counted())
        archived_after_s = _archive_complete(mode.settings(), accepted, sent_at)
        return {
            "started_in_s": round(up_s, 1),
            "sent": summary.sent,
            "accepted": summary.accepted,
            "statuses": {str(status): count for status, count in summary.statuses.items()},
            "accepted_per_s": round(summary.accepted / summary.elapsed_s, 1) if summary.elapsed_s else 0,
            "sending_took_s": round(summary.elapsed_s, 1),
            "p50_s": round(summary.percentile(0.5), 3),
            "p95_s": round(summary.percentile(0.95), 3),
            "archive_complete_after_s": archived_after_s,
            "load_average_before": load_before,
            "load_average_after_sending": load_after_sending,
            "load_average_at_end": _load(),
        }
    finally:
        mode.tally("down")
        shutil.rmtree(mode.home, ignore_errors=True)


def _offer(mode: Mode, duration_s: float) -> tuple[RunSummary, GroundTruth]:
    """The offered load from SENDERS processes (one core cannot send 600/s in Python)."""
    ingest_key = mode.settings().resolved_ingest_key()
    no_bots = TrafficMix(bot_fraction=0.0)
    plans = [
        LoadPlan(url, OFFERED_RATE / SENDERS, duration_s, [SITE], 0, no_bots, 0, seed, ingest_key)
        for seed, url in enumerate(mode.collector_urls(), start=1)
    ]
    with multiprocessing.get_context("spawn").Pool(SENDERS) as pool:
        parts = pool.map(run_plan, plans)
    summary, truth = RunSummary(), GroundTruth()
    for part_summary, part_truth in parts:
        summary.merge(part_summary)
        truth.merge(part_truth)
    return summary, truth


def _archive_complete(settings: Settings, accepted: int, since: float) -> float | None:
    """Seconds from the first send until the archive held every accepted event (None: not
    within ARCHIVE_TIMEOUT_S)."""
    client = connect(settings)
    query = "SELECT count() FROM events WHERE site = {site:String}"
    while time.monotonic() - since < ARCHIVE_TIMEOUT_S:
        if client.query(query, parameters={"site": SITE}).result_rows[0][0] >= accepted:
            return round(time.monotonic() - since, 1)
        time.sleep(1)
    return None


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]
