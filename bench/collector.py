"""Collector throughput and latency, next to the ceiling of a bare Starlette app measured
in the same run (wrk from Debian as the load, on loopback, bounded in time).

Needs the stack's Kafka and ClickHouse running (`tally up -d`); starts its own collector
and bare app on free ports, one process each (uvicorn's default: the comparison holds the
worker count equal). The load is realistic (bench/wrk/traffic.lua): a user-agent mix with a
long tail the collector's caches have never seen, client IPs through a trusted proxy,
referrers and UTM tags, a sender's event_id on each event. Beside events/s and latency each
scenario reports the server's CPU time per request, which says where a gap comes from even
when the two runs see different background load (reported too: the load average).
`python -m bench.collector` prints the figures.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import psutil

from ops.local.ports import free_port
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings

WRK_SCRIPTS = Path(__file__).with_name("wrk")
BENCH_SITE = "bench.example.com"


@dataclass(frozen=True)
class WrkResult:
    scenario: str
    requests_per_s: float
    events_per_s: float
    p50_ms: float
    p99_ms: float
    non_2xx: int
    errors: int
    server_cpu_us_per_request: float
    load_average_1m: float


@contextmanager
def _server(
    command: list[str], url: str, env: dict[str, str], health_path: str
) -> Iterator[subprocess.Popen]:
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(url + health_path, timeout=1).status_code < 500:
                        break
                except httpx.TransportError:
                    if time.monotonic() > deadline or process.poll() is not None:
                        output.seek(0)
                        said = output.read().decode(errors="replace").strip().splitlines()[-5:]
                        raise RuntimeError(f"{command} did not start: {' | '.join(said)}") from None
                    time.sleep(0.2)
            yield process
        finally:
            process.terminate()
            process.wait(20)


def run_wrk(
    server: subprocess.Popen,
    url: str,
    script: str,
    scenario: str,
    duration_s: int,
    connections: int,
    events_per_request: int = 1,
    **env: str,
) -> WrkResult:
    if not shutil.which("wrk"):
        raise RuntimeError("wrk is not installed (apt-get install wrk)")
    cpu_before = psutil.Process(server.pid).cpu_times()
    result = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{duration_s}s",
            "--timeout",
            "10s",
            "-s",
            str(WRK_SCRIPTS / script),
            url,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "BENCH_WRK_DIR": str(WRK_SCRIPTS), **env},
        timeout=duration_s + 60,
        check=True,
    )
    cpu_after = psutil.Process(server.pid).cpu_times()
    cpu_s = (cpu_after.user + cpu_after.system) - (cpu_before.user + cpu_before.system)
    line = next(line for line in result.stdout.splitlines() if line.startswith("BENCH "))
    figures = json.loads(line.removeprefix("BENCH "))
    seconds = figures["duration_us"] / 1e6
    ok_requests = figures["requests"] - figures["non_2xx"]
    return WrkResult(
        scenario=scenario,
        requests_per_s=round(figures["requests"] / seconds, 1),
        events_per_s=round(ok_requests * events_per_request / seconds, 1),
        p50_ms=round(figures["p50_us"] / 1000, 2),
        p99_ms=round(figures["p99_us"] / 1000, 2),
        non_2xx=figures["non_2xx"],
        errors=figures["errors"],
        server_cpu_us_per_request=round(cpu_s * 1e6 / max(figures["requests"], 1), 1),
        load_average_1m=round(os.getloadavg()[0], 2),
    )


def run_collector_bench(
    settings: Settings, duration_s: int = 10, connections: int = 64, batch: int = 100
) -> dict:
    """Bare app ceiling, collector single events, collector batches — one run, one machine."""
    add_site(connect(settings), BENCH_SITE)
    # The stack's own settings (its store, its log, its keys), whatever ports it runs on.
    env = os.environ | settings.environment()
    results = []
    bare_port = free_port()
    bare = f"http://127.0.0.1:{bare_port}"
    bare_command = [sys.executable, "-m", "bench.bare_asgi", str(bare_port)]
    with _server(bare_command, bare, env, "/api/event") as server:
        ceiling = run_wrk(server, bare, "single_event.lua", "bare_starlette_202", duration_s, connections)
        results.append(ceiling)
    collector_port = free_port()
    collector = f"http://127.0.0.1:{collector_port}"
    collector_env = env | {"TALLY_COLLECTOR_PORT": str(collector_port)}
    # It reads the site registry before it answers /healthz (collector/app.py): no wait for the site.
    with _server([sys.executable, "-m", "collector.app"], collector, collector_env, "/healthz") as server:
        results.append(
            run_wrk(server, collector, "single_event.lua", "collector_single_event", duration_s, connections)
        )
        results.append(
            run_wrk(
                server,
                collector,
                "batch.lua",
                f"collector_batch_{batch}",
                duration_s,
                max(4, connections // 8),
                events_per_request=batch,
                BENCH_BATCH=str(batch),
                BENCH_INGEST_KEY=settings.resolved_ingest_key(),
            )
        )
    ceiling = results[0].requests_per_s
    return {
        "results": [asdict(result) for result in results],
        "single_event_share_of_ceiling": round(results[1].events_per_s / ceiling, 3) if ceiling else None,
        "duration_s": duration_s,
        "connections": connections,
        "worker_processes": 1,
        "consumers": "archiver and stream jobs paused",
    }


if __name__ == "__main__":
    print(json.dumps(run_collector_bench(Settings()), indent=2))
