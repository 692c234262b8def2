"""What the soak (test_soak.py) samples of a running local stack, every few seconds: the memory
and open files of every supervised process, how far the archiver and the stream jobs are behind
the log, the store's active parts, the stream jobs' state on disk and the disk the whole home
uses. The parsers are pure functions of what /proc, Kafka and the checkpoints say, tested in
tests/unit/test_soak_samples.py."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from archiver.log import committed_offsets, log_ranges
from ops.local import supervisor
from storage.client import connect
from stream_jobs.offset_log import read_end_offsets
from tally.settings import Settings


@dataclass(frozen=True)
class Memory:
    """Bytes resident (RSS) and the proportional share of them (PSS: a page shared by n
    processes counts 1/n in each, so PSS adds up across processes where RSS double-counts)."""

    rss: int
    pss: int


def parse_smaps_rollup(text: str) -> Memory:
    """/proc/<pid>/smaps_rollup: one header line, then `Name:   <n> kB` lines."""
    sizes: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        value = rest.split()
        if len(value) == 2 and value[1] == "kB" and value[0].isdigit():
            sizes[name.strip()] = int(value[0]) * 1024
    if "Rss" not in sizes or "Pss" not in sizes:
        raise ValueError(f"no Rss or Pss in smaps_rollup: {text[:200]!r}")
    return Memory(rss=sizes["Rss"], pss=sizes["Pss"])


@dataclass(frozen=True)
class ProcessSample:
    """One supervised component with its children (Spark's JVM is its driver's child)."""

    pid: int
    rss: int
    pss: int
    open_files: int  # file descriptors: files, sockets, pipes


def family(pid: int) -> list[int]:
    """The process and all its descendants, those that still run."""
    try:
        process = psutil.Process(pid)
        return [pid, *(child.pid for child in process.children(recursive=True))]
    except psutil.NoSuchProcess:
        return []


def sample_process(pid: int) -> ProcessSample | None:
    """Memory and descriptors of `pid` and its children, summed; None if it is gone."""
    rss = pss = open_files = 0
    members = family(pid)
    for member in members:
        try:
            memory = parse_smaps_rollup(Path(f"/proc/{member}/smaps_rollup").read_text())
            descriptors = len(os.listdir(f"/proc/{member}/fd"))
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited between the listing and the read
        rss, pss, open_files = rss + memory.rss, pss + memory.pss, open_files + descriptors
    return ProcessSample(pid, rss, pss, open_files) if members else None


def behind(log: Mapping[int, tuple[int, int]], positions: Mapping[int, int]) -> int:
    """Events a reader has still to read: per partition, from its position (the earliest
    retained offset if it has none there yet) to the log's end."""
    return sum(
        max(0, end - max(start, positions.get(partition, start))) for partition, (start, end) in log.items()
    )


def last_committed_batch(checkpoint: Path) -> int | None:
    """The newest micro-batch whose commit the query's checkpoint records (`commits/<id>`)."""
    commits = checkpoint / "commits"
    ids = [int(entry.name) for entry in commits.iterdir() if entry.name.isdigit()] if commits.is_dir() else []
    return max(ids, default=None)


def stream_positions(checkpoint: Path, topic: str) -> dict[int, int] | None:
    """Per partition of `topic`, the offset the query has read up to (exclusive) in its last
    committed batch: empty before its first (it has all of the log still to read), None if that
    batch read no `topic` (another source's query)."""
    batch = last_committed_batch(checkpoint)
    return {} if batch is None else read_end_offsets(checkpoint, batch).get(topic)


def disk_bytes(path: Path) -> int:
    """Bytes allocated on disk under `path` (as `du`), for files that outlive the walk: Kafka,
    ClickHouse and Spark delete files while it runs."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            except FileNotFoundError:
                continue
    return total


def readers_behind(settings: Settings) -> tuple[int, dict[str, int]]:
    """Events the archiver has not committed, and per streaming query reading the page views,
    events it has not committed a batch for."""
    log = asyncio.run(log_ranges(settings))
    archiver = behind(log, asyncio.run(committed_offsets(settings, sorted(log))))
    queries = sorted(settings.checkpoints_dir.iterdir()) if settings.checkpoints_dir.is_dir() else []
    positions = {query.name: stream_positions(query, settings.pageviews_topic) for query in queries}
    streams = {name: behind(log, read) for name, read in positions.items() if read is not None}
    return archiver, streams


def active_parts(settings: Settings) -> dict[str, int]:
    """Active parts of each table in Tally's database (what merges must keep bounded)."""
    rows = (
        connect(settings)
        .query(
            "SELECT table, count() FROM system.parts WHERE active AND database = currentDatabase() "
            "GROUP BY table"
        )
        .result_rows
    )
    return {table: int(count) for table, count in rows}


def state_bytes(settings: Settings) -> dict[str, int]:
    """Per streaming query, its state store's bytes on disk (`<checkpoint>/state`)."""
    checkpoints = settings.checkpoints_dir
    queries = sorted(checkpoints.iterdir()) if checkpoints.is_dir() else []
    return {query.name: disk_bytes(query / "state") for query in queries if (query / "state").is_dir()}


#: The soak's phases: load sent while the stack warms up (JVMs compiling, Spark's first batches,
#: caches filling: growth that stops), load measured, and after the load until the readers have
#: reached the log's end. Growth is measured in LOAD only; the bounds hold in every phase.
WARM_UP, LOAD, DRAIN = "warm-up", "load", "drain"
PHASES = (WARM_UP, LOAD, DRAIN)


@dataclass(frozen=True)
class Sample:
    at_s: float  # since the sampling began
    phase: str  # PHASES: what the load generator was doing
    load_average_1m: float
    processes: dict[str, ProcessSample]
    archiver_behind: int
    streams_behind: dict[str, int]
    parts: dict[str, int]
    state_bytes: dict[str, int]
    home_bytes: int

    @property
    def total_pss(self) -> int:
        return sum(process.pss for process in self.processes.values())

    @property
    def open_files(self) -> int:
        return sum(process.open_files for process in self.processes.values())

    @property
    def active_parts(self) -> int:
        return sum(self.parts.values())

    def as_json(self) -> dict:
        return asdict(self)


def take_sample(settings: Settings, at_s: float, phase: str) -> Sample:
    # supervisord's own list (not `tally status`, whose health checks query every component)
    processes = {
        info["name"]: sampled
        for info in supervisor.rpc(settings).supervisor.getAllProcessInfo()
        if info["pid"] and (sampled := sample_process(info["pid"]))
    }
    archiver, streams = readers_behind(settings)
    return Sample(
        at_s=round(at_s, 1),
        phase=phase,
        load_average_1m=round(os.getloadavg()[0], 2),
        processes=processes,
        archiver_behind=archiver,
        streams_behind=streams,
        parts=active_parts(settings),
        state_bytes=state_bytes(settings),
        home_bytes=disk_bytes(settings.home_dir),
    )


@dataclass
class Sampler:
    """Samples the stack every `interval_s` in a thread, from `start()` to `stop()`; `phase`
    is what the next samples record (the test moves it on)."""

    settings: Settings
    interval_s: float
    samples: list[Sample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    phase: str = WARM_UP
    _stopped: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Sampler:
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="soak-sampler", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stopped.is_set():
            due = time.monotonic() + self.interval_s
            try:
                self.samples.append(take_sample(self.settings, time.monotonic() - self._started, self.phase))
            except Exception as failed:  # a sample missed (a component restarting) is reported, not fatal
                self.errors.append(f"{time.monotonic() - self._started:.0f}s: {failed!r}"[:300])
            self._stopped.wait(max(0.0, due - time.monotonic()))

    def stop(self) -> list[Sample]:
        self._stopped.set()
        self._thread.join(60)
        return self.samples
