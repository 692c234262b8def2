"""The soak's report (test_soak.py): the bounds it asserts and what it measured against them,
each process's memory growth per hour, and the samples themselves; written as JSON and as a
markdown table to bench/results/<date>-<host>-soak.{json,md}, beside the benchmarks'.

Growth is the slope between the first and the last third of the samples of the load phase (the
mean of each third against the mean of its times), after the warm-up: one sample's noise is
averaged away, and a process that is still settling shows it in the first third only."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import mean

from tests.fault.soak_samples import LOAD, Sample

MIB = 2**20
GIB = 2**30

#: The bounds the soak asserts at every sample: (name, limit, what one sample measures).
BOUNDS: tuple[tuple[str, float, Callable[[Sample], float]], ...] = (
    ("active parts in ClickHouse", 300, lambda sample: sample.active_parts),
    ("total PSS of the stack (GiB)", 4, lambda sample: sample.total_pss / GIB),
    ("open files of the stack", 2000, lambda sample: sample.open_files),
)


def growth_per_hour(points: Sequence[tuple[float, float]]) -> float | None:
    """(time s, value) points → the value's growth per hour, first third against last third;
    None with fewer than three points or no time between the thirds."""
    third = len(points) // 3
    if third == 0:
        return None
    first, last = points[:third], points[-third:]
    elapsed_s = mean(t for t, _ in last) - mean(t for t, _ in first)
    if elapsed_s <= 0:
        return None
    return (mean(v for _, v in last) - mean(v for _, v in first)) / elapsed_s * 3600


def bounds(samples: Sequence[Sample]) -> list[dict]:
    """Each bound with the highest value any sample measured, and whether it held."""
    checked = []
    for name, limit, measure in BOUNDS:
        highest = max((measure(sample) for sample in samples), default=0.0)
        checked.append({"bound": name, "limit": limit, "highest": round(highest, 3), "held": highest < limit})
    return checked


def _mib(value: float | None) -> float | None:
    return None if value is None else round(value / MIB, 1)


def process_figures(samples: Sequence[Sample]) -> dict[str, dict]:
    """Per supervised process, over the samples of the load phase: PSS first, last, highest and its
    growth per hour; highest RSS and open files; how many pids it had (restarts show)."""
    loaded = [sample for sample in samples if sample.phase == LOAD]
    names = sorted({name for sample in loaded for name in sample.processes})
    figures = {}
    for name in names:
        seen = [(sample.at_s, sample.processes[name]) for sample in loaded if name in sample.processes]
        pss = [(at, process.pss) for at, process in seen]
        figures[name] = {
            "pss_first_mib": _mib(pss[0][1]),
            "pss_last_mib": _mib(pss[-1][1]),
            "pss_highest_mib": _mib(max(value for _, value in pss)),
            "pss_growth_mib_per_h": _mib(growth_per_hour(pss)),
            "rss_highest_mib": _mib(max(process.rss for _, process in seen)),
            "open_files_highest": max(process.open_files for _, process in seen),
            "pids": len({process.pid for _, process in seen}),
        }
    return figures


def series_figures(samples: Sequence[Sample]) -> dict[str, dict]:
    """The stack-wide series: first, last, highest and growth per hour in the load phase."""
    loaded = [sample for sample in samples if sample.phase == LOAD]
    series: dict[str, Callable[[Sample], float]] = {
        "total PSS (MiB)": lambda s: s.total_pss / MIB,
        "open files": lambda s: s.open_files,
        "active parts": lambda s: s.active_parts,
        "archiver behind the log (events)": lambda s: s.archiver_behind,
        "stream jobs behind the log (events)": lambda s: max(s.streams_behind.values(), default=0),
        "stream state on disk (MiB)": lambda s: sum(s.state_bytes.values()) / MIB,
        "TALLY_HOME on disk (MiB)": lambda s: s.home_bytes / MIB,
    }
    figures = {}
    for name, measure in series.items():
        points = [(sample.at_s, float(measure(sample))) for sample in loaded]
        growth = growth_per_hour(points)
        figures[name] = {
            "first": round(points[0][1], 1) if points else None,
            "last": round(points[-1][1], 1) if points else None,
            "highest": round(max(v for _, v in points), 1) if points else None,
            "growth_per_h": None if growth is None else round(growth, 1),
        }
    return figures


def soak_report(samples: Sequence[Sample], run: dict, machine: dict) -> dict:
    """Everything the soak writes: `run` holds the rate, duration, the traffic's answers and
    the exactly-once and verify outcomes; `machine` as `tally bench` records it."""
    loads = [sample.load_average_1m for sample in samples]
    return {
        **run,
        "machine": machine,
        "load_average_1m": {
            "lowest": min(loads, default=None),
            "mean": round(mean(loads), 2) if loads else None,
            "highest": max(loads, default=None),
        },
        "bounds": bounds(samples),
        "processes": process_figures(samples),
        "series": series_figures(samples),
        "samples": [sample.as_json() for sample in samples],
    }


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, bool):
        return "yes" if value else "**no**"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]


def markdown(report: dict) -> str:
    machine, load = report["machine"], report["load_average_1m"]
    lines = [
        f"# Soak — {report['rate']:g} page views/s for {report['duration_s']:g} s ({report['started_at']})",
        "",
        f"Machine: {machine.get('host')}, {machine.get('cpu')}, {machine.get('cores')} cores, "
        f"{machine.get('memory_gib')} GiB; load average (1 min) over the samples "
        f"{load['lowest']} to {load['highest']}, mean {load['mean']}. One sample every "
        f"{report['sample_interval_s']:g} s ({len(report['samples'])} samples; "
        f"growth: first against last third of the samples of the load phase, after "
        f"{report['warm_up_s']:g} s of warm-up under the same load).",
        "",
        f"Traffic: {report['sent']:,} sent, answers {report['statuses']}; archived "
        f"{report['archived']:,} rows, {report['archived_distinct']:,} distinct event ids; every 202 "
        f"archived once: {_cell(report['exactly_once'])}; readers back at the log's end "
        f"{_cell(report['drained_after_s'])} s after the load stopped; `tally verify --full` clean: "
        f"{_cell(report['verified'])}.",
        "",
        "## Bounds (asserted at every sample: warm-up, load and drain)",
        "",
        *_table(
            ["bound", "limit", "highest sample", "held"],
            [(b["bound"], b["limit"], b["highest"], b["held"]) for b in report["bounds"]],
        ),
        "",
        "## Memory per process (PSS, with its children)",
        "",
        *_table(
            [
                "process",
                "first MiB",
                "last MiB",
                "highest MiB",
                "growth MiB/h",
                "RSS highest MiB",
                "open files highest",
                "pids",
            ],
            [
                (
                    name,
                    f["pss_first_mib"],
                    f["pss_last_mib"],
                    f["pss_highest_mib"],
                    f["pss_growth_mib_per_h"],
                    f["rss_highest_mib"],
                    f["open_files_highest"],
                    f["pids"],
                )
                for name, f in report["processes"].items()
            ],
        ),
        "",
        "## The stack",
        "",
        *_table(
            ["series", "first", "last", "highest", "growth per hour"],
            [
                (name, f["first"], f["last"], f["highest"], f["growth_per_h"])
                for name, f in report["series"].items()
            ],
        ),
    ]
    if report.get("sampling_errors"):
        lines += ["", "Samples missed: " + "; ".join(report["sampling_errors"])]
    return "\n".join(lines) + "\n"


def write_report(report: dict, directory: Path) -> tuple[Path, Path]:
    """`<date>-<host>-soak.json` and `.md` in `directory` (the benchmarks' naming)."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"{report['started_at'][:10]}-{report['machine']['host']}-soak"
    json_path, md_path = directory / f"{stem}.json", directory / f"{stem}.md"
    json_path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    md_path.write_text(markdown(report))
    return json_path, md_path
