"""What the soak reads and how it reports (tests/fault/soak_samples.py, soak_report.py): the
kernel's memory rollup, a reader's distance from the log's end, a streaming query's committed
position, disk use, and the growth per hour it reports for each process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fault.soak_report import growth_per_hour, markdown, soak_report, write_report
from tests.fault.soak_samples import (
    DRAIN,
    LOAD,
    WARM_UP,
    Memory,
    ProcessSample,
    Sample,
    behind,
    disk_bytes,
    family,
    parse_smaps_rollup,
    sample_process,
    stream_positions,
)

MIB = 2**20

# /proc/<pid>/smaps_rollup as Linux 6 writes it (the Pss_* lines since 5.x).
ROLLUP = """5575b1e63000-7ffe6d55a000 ---p 00000000 00:00 0                          [rollup]
Rss:                1608 kB
Pss:                 215 kB
Pss_Dirty:           112 kB
Pss_Anon:            112 kB
Pss_File:            103 kB
Shared_Clean:       1456 kB
Private_Dirty:       112 kB
Swap:                  0 kB
SwapPss:               0 kB
"""


def test_the_rollup_gives_rss_and_pss_in_bytes() -> None:
    assert parse_smaps_rollup(ROLLUP) == Memory(rss=1608 * 1024, pss=215 * 1024)


def test_a_rollup_without_pss_is_refused() -> None:
    with pytest.raises(ValueError, match="Pss"):
        parse_smaps_rollup("Rss:  1608 kB\n")


def test_a_process_is_sampled_with_its_children() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        alone = sample_process(child.pid)
        with_children = sample_process(os.getpid())
        assert child.pid in family(os.getpid())
        assert alone is not None and with_children is not None
        # the child's descriptors and memory are in its parent's sample
        assert with_children.open_files >= alone.open_files + 3
        assert with_children.pss > alone.pss > 0
        assert with_children.rss >= with_children.pss
    finally:
        child.kill()
        child.wait()
    assert sample_process(child.pid) is None


def test_a_reader_is_behind_by_what_it_has_still_to_read() -> None:
    log = {0: (0, 100), 1: (40, 90), 2: (0, 10), 3: (500, 700)}
    # partition 0 read to its end; 1 from 60; 2 never (from its start); 3 from a position
    # the log no longer holds (retention): from the earliest retained offset
    assert behind(log, {0: 100, 1: 60, 3: 20}) == 0 + 30 + 10 + 200
    assert behind(log, {p: end for p, (_, end) in log.items()}) == 0


# A Spark 4 offset log entry: version, batch metadata, one line per source.
def offset_entry(ends: dict[int, int]) -> str:
    source = json.dumps({"pageviews": {str(p): end for p, end in ends.items()}})
    return f'v1\n{{"batchWatermarkMs":0,"batchTimestampMs":1}}\n{source}\n'


def test_a_query_is_where_its_last_committed_batch_ends(tmp_path: Path) -> None:
    assert stream_positions(tmp_path, "pageviews") == {}  # before its first batch
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    for batch, ends in enumerate([{0: 5, 1: 3}, {0: 9, 1: 8}, {0: 20, 1: 30}]):
        (tmp_path / "offsets" / str(batch)).write_text(offset_entry(ends))
    for batch in (0, 1):  # batch 2 is planned (its offsets written) but not committed
        (tmp_path / "commits" / str(batch)).write_text("v1\n{}\n")
        (tmp_path / "commits" / f".{batch}.crc").write_bytes(b"\0")
    assert stream_positions(tmp_path, "pageviews") == {0: 9, 1: 8}
    assert stream_positions(tmp_path, "other-topic") is None  # a query of another source


def test_disk_use_counts_allocated_bytes_of_every_file_below(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "one").write_bytes(b"x" * 100_000)
    (tmp_path / "a" / "b" / "two").write_bytes(b"y" * 10)
    files = [tmp_path / "a" / "one", tmp_path / "a" / "b" / "two"]
    assert disk_bytes(tmp_path) == sum(f.stat().st_blocks * 512 for f in files) >= 100_000
    assert disk_bytes(tmp_path / "none") == 0


def test_growth_per_hour_compares_the_first_and_last_third() -> None:
    steady = [(t * 10.0, 500.0) for t in range(9)]
    assert growth_per_hour(steady) == 0
    # 1 MiB more every 10 s: 360 MiB an hour
    leaking = [(t * 10.0, 100.0 + t) for t in range(9)]
    assert growth_per_hour(leaking) == pytest.approx(360)
    # one spike in the middle third moves nothing
    spiky = [(t * 10.0, 900.0 if t == 4 else 500.0) for t in range(9)]
    assert growth_per_hour(spiky) == 0
    assert growth_per_hour(leaking[:2]) is None
    assert growth_per_hour([(5.0, 1.0), (5.0, 2.0), (5.0, 3.0)]) is None


def sample(at_s: float, archiver_pss_mib: float, phase: str = LOAD, pid: int = 10, parts: int = 20) -> Sample:
    return Sample(
        at_s=at_s,
        phase=phase,
        load_average_1m=2.0,
        processes={
            "archiver": ProcessSample(
                pid, int(archiver_pss_mib * 1.5 * MIB), int(archiver_pss_mib * MIB), 40
            ),
            "kafka": ProcessSample(20, 900 * MIB, 800 * MIB, 300),
        },
        archiver_behind=0,
        streams_behind={"activity": 5},
        parts={"events": parts},
        state_bytes={"activity": 4 * MIB},
        home_bytes=100 * MIB,
    )


def test_the_report_gives_each_process_its_growth_and_each_bound_its_highest_sample(tmp_path: Path) -> None:
    samples = [sample(t * 60.0, 100 + t, pid=10 if t < 4 else 11) for t in range(9)]
    samples[5] = sample(300.0, 105, pid=11, parts=350)  # one sample over the parts bound
    # before and after the load phase: in the bounds, not in the growth
    samples = [sample(-60.0, 20, phase=WARM_UP), *samples, sample(600.0, 5000, phase=DRAIN)]
    run = {
        "started_at": "2026-11-29T10:00:00+00:00",
        "rate": 100.0,
        "duration_s": 540.0,
        "warm_up_s": 60.0,
        "sample_interval_s": 60.0,
        "sent": 54_000,
        "statuses": {"202": 54_000},
        "archived": 54_000,
        "archived_distinct": 54_000,
        "exactly_once": True,
        "drained_after_s": 4.0,
        "verified": True,
    }
    report = soak_report(samples, run, {"host": "testhost", "cores": 2})
    archiver = report["processes"]["archiver"]
    assert archiver["pss_growth_mib_per_h"] == pytest.approx(60.0)  # 1 MiB a minute
    assert archiver["pss_first_mib"] == 100 and archiver["pss_last_mib"] == 108
    assert archiver["pids"] == 2  # restarted once
    assert report["processes"]["kafka"]["pss_growth_mib_per_h"] == 0
    bounds = {bound["bound"]: bound for bound in report["bounds"]}
    assert bounds["total PSS of the stack (GiB)"]["highest"] == pytest.approx(5800 / 1024, abs=0.001)
    assert bounds["active parts in ClickHouse"] == {
        "bound": "active parts in ClickHouse",
        "limit": 300,
        "highest": 350,
        "held": False,
    }
    assert bounds["open files of the stack"]["held"] and bounds["open files of the stack"]["highest"] == 340

    json_path, md_path = write_report(report, tmp_path)
    assert json_path.name == "2026-11-29-testhost-soak.json" and md_path.name == "2026-11-29-testhost-soak.md"
    assert json.loads(json_path.read_text())["processes"]["archiver"]["pids"] == 2
    text = md_path.read_text()
    assert text == markdown(report)
    assert "| archiver | 100.0 | 108.0 | 108.0 | 60.0 |" in text
    assert "| active parts in ClickHouse | 300 | 350 | **no** |" in text
