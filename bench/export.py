"""The events behind a figure, exported at scale: `GET /api/v1/export/events` for the page views
of a synthetic archive (bench/dashboard.py's, written straight into `events`), through a real
dashboard server this benchmark starts on the running store. Reports the rows, the bytes, rows/s
as the client reads them, and the dashboard process's peak resident memory (VmHWM) before and
after the export: bounded memory is the claim.

    python -m bench.export --events 1200000 [--format csv]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pyarrow.parquet as pq

from bench.dashboard import SPAN, bench_site, ensure_archive
from tally.settings import Settings

STARTUP_TIMEOUT_S = 120


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set size (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"no VmHWM for process {pid}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_dashboard(settings: Settings, port: int, log: Path) -> subprocess.Popen:
    environment = os.environ | settings.environment() | {"TALLY_DASHBOARD_PORT": str(port)}
    command = [sys.executable, "-m", "dashboard.app"]
    process = subprocess.Popen(command, env=environment, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.5)
    process.terminate()
    raise RuntimeError(f"the dashboard did not start within {STARTUP_TIMEOUT_S} s; see {log}")


def run_export_bench(settings: Settings, events: int, output_format: str) -> dict[str, object]:
    now = datetime.now(UTC)
    seeded = ensure_archive(settings, events, now)
    port = free_port()
    process = start_dashboard(settings, port, settings.home_dir / "bench-export-dashboard.log")
    try:
        before = peak_rss_mib(process.pid)
        query = {
            "site": bench_site(events),
            "from": (now - SPAN - timedelta(days=1)).isoformat(),
            "to": (now + timedelta(minutes=1)).isoformat(),
            "metric": "pageviews",
            "format": output_format,
        }
        headers = {"Authorization": f"Bearer {settings.resolved_api_key()}"}
        started = time.monotonic()
        size = 0
        url = f"http://127.0.0.1:{port}/api/v1/export/events"
        kept = settings.home_dir / f"bench-export.{output_format}"
        with (
            httpx.stream("GET", url, params=query, headers=headers, timeout=3600) as answer,
            kept.open("wb") as file,
        ):
            answer.raise_for_status()
            first_byte_s = round(time.monotonic() - started, 2)
            for chunk in answer.iter_bytes():
                size += len(chunk)
                file.write(chunk)
            figure = answer.headers["X-Tally-Figure"]
            rows = int(answer.headers["X-Tally-Rows"])
        elapsed = time.monotonic() - started
        # The file's rows against the aggregate's figure for the same question, from the archive.
        aggregate = httpx.get(
            f"http://127.0.0.1:{port}/api/v1/stats/aggregate",
            params={key: query[key] for key in ("site", "from", "to")} | {"source": "raw"},
            headers=headers,
            timeout=600,
        ).json()
        in_file = pq.ParquetFile(kept).metadata.num_rows if output_format == "parquet" else None
        kept.unlink()
        return {
            "archive_events": events,
            "seeded": seeded,
            "format": output_format,
            "figure": figure,
            "rows": rows,
            "rows_in_file": in_file,
            "aggregate_pageviews": aggregate["pageviews"],
            "bytes": size,
            "seconds": round(elapsed, 2),
            "first_byte_s": first_byte_s,
            "rows_per_s": round(rows / elapsed),
            "dashboard_peak_rss_mib_before": before,
            "dashboard_peak_rss_mib_after": peak_rss_mib(process.pid),
        }
    finally:
        process.terminate()
        process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_200_000)
    parser.add_argument("--format", choices=["parquet", "csv"], default="parquet")
    arguments = parser.parse_args()
    print(json.dumps(run_export_bench(Settings(), arguments.events, arguments.format), indent=2))


if __name__ == "__main__":
    main()
