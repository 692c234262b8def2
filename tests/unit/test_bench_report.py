"""The benchmark's arithmetic, report and command line, without a stack."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from rich.console import Console

import bench.report
from bench.report import headline, markdown, run_sections, visibility_latencies, write_report
from bench.sections import SECTION_NAMES, selected
from loadgen.runner import percentile
from ops.cli import main as tally

MACHINE = {
    "host": "h",
    "cpu": "x",
    "cores": 2,
    "memory_gib": 24,
    "os": "linux",
    "python": "3.11",
    "java": "17",
    "load_average_at_start": [0.1],
}
LATENCY = {
    "rate": 1000,
    "offered": 30000,
    "sent": 30000,
    "sent_per_s": 998,
    "failed": 0,
    "visible": 29990,
    "p50_s": 1.2,
    "p95_s": 3.4,
    "p99_s": 4.5,
}


@pytest.fixture(autouse=True)
def root_handlers_restored() -> Iterator[None]:
    """The CLI's group routes logging to its log file: keep that out of the other tests."""
    handlers = list(logging.getLogger().handlers)
    yield
    for handler in logging.getLogger().handlers:
        if handler not in handlers:
            logging.getLogger().removeHandler(handler)
            handler.close()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TALLY_HOME", str(tmp_path / "home"))
    return tmp_path


def test_each_event_is_visible_at_the_first_poll_that_counts_it() -> None:
    acked = [0.0, 0.1, 0.2, 1.0]
    polls = [(0.05, 0), (0.5, 2), (0.9, 3), (1.5, 4)]
    assert visibility_latencies(acked, polls) == [0.5, 0.4, 0.7, 0.5]


def test_events_never_counted_have_no_latency() -> None:
    assert visibility_latencies([0.0, 1.0], [(0.5, 1)]) == [0.5]


def test_percentile() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.95), percentile([], 0.5)) == (51.0, 96.0, 0.0)


def test_report_is_written_as_json_and_markdown(tmp_path: Path) -> None:
    report = {
        "started_at": "2026-11-22T02:00:00+00:00",
        "machine": MACHINE,
        "collector": {"results": []},
    }
    json_path, md_path = write_report(report, tmp_path)
    assert json_path.name == "2026-11-22-h.json"
    text = md_path.read_text()
    assert text == markdown(report)
    assert "## collector" in text and "2 cores" in text


def test_headline_gives_each_target_its_figure_or_why_not() -> None:
    report = {
        "collector": {
            "results": [
                {"scenario": "bare_starlette_202", "events_per_s": 20000.0, "p50_ms": 2, "p99_ms": 5},
                {"scenario": "collector_single_event", "events_per_s": 5000.0, "p50_ms": 9, "p99_ms": 40},
                {"scenario": "collector_batch_100", "events_per_s": 30000.0, "p50_ms": 20, "p99_ms": 90},
            ]
        },
        "archiver": {"error": "StackError: archiver did not start"},
        "rss_idle_mib": {"total": 1700.4},
    }
    figures = {measure: figure for measure, figure, _ in headline(report)}
    assert figures["collector throughput"].startswith("5,000 events/s single")
    assert "25% of bare Starlette's 20,000/s" in figures["collector throughput"]
    assert figures["collector throughput"].endswith("batches 30,000 events/s (target ≥ 50,000)")
    assert figures["archiver throughput"] == "failed: StackError: archiver did not start"
    assert figures["Spark sustained throughput"] == "not measured"
    assert figures["RSS, idle"] == "1,700 MiB total"


def tally_bench(*arguments: str) -> Result:
    return CliRunner().invoke(tally, ["bench", *arguments], prog_name="tally")


def partial_report(section: str, figures: dict) -> dict:
    return {
        "started_at": "2026-11-23T02:00:00+00:00",
        "machine": MACHINE,
        "sections": [section],
        "events": None,
        "rss_idle_mib": {"total": 1500.0},
        section: figures,
        "rss_after_mib": {"total": 1600.0},
    }


def test_partial_run_reports_the_other_sections_as_not_run() -> None:
    report = partial_report("latency", LATENCY)
    figures = {measure: figure for measure, figure, _ in headline(report)}
    assert figures["event to visible (agg)"] == (
        "p50 1.2 s, p95 3.4 s, p99 4.5 s at 1,000/s; 29,990 of 30,000 sent visible"
    )
    for measure in ("collector throughput", "archiver throughput", "Spark sustained throughput"):
        assert figures[measure] == "not run"
    assert figures["dashboard and API latency"] == "not run"
    assert figures["RSS, idle"] == "1,500 MiB total"
    text = markdown(report)
    not_run = "not run: alerts, dashboard, collector, archiver, stream, storage, cluster."
    assert f"Partial run: latency, each section's default size; {not_run}" in text
    assert "| event to visible (agg) | p50 1.2 s" in text and "≤ 5 s p95 at 1,000/s" in text
    assert "## latency" in text and "## collector" not in text


def test_latency_says_when_the_sender_fell_behind_the_rate() -> None:
    report = partial_report("latency", {**LATENCY, "sent_per_s": 700})
    figures = {measure: figure for measure, figure, _ in headline(report)}
    assert figures["event to visible (agg)"].endswith("sender reached 700/s")


def test_report_from_before_sections_is_still_read() -> None:
    report = {
        "started_at": "2026-11-22T06:59:50+00:00",
        "machine": MACHINE,
        "event_to_visible": {"rate": 300, "events": 9000, "visible": 9000, "p50_s": 8.485, "p95_s": 14.216},
    }
    figures = {measure: figure for measure, figure, _ in headline(report)}
    assert figures["event to visible (agg)"] == "p50 8.485 s, p95 14.216 s at 300/s"
    assert figures["archiver throughput"] == "not measured"  # ran, but left no figure
    text = markdown(report)
    assert "Sections: all" in text and '"p95_s": 14.216' in text


def test_partial_report_does_not_overwrite_the_full_runs(tmp_path: Path) -> None:
    full = {"started_at": "2026-11-23T01:00:00+00:00", "machine": MACHINE, "sections": list(SECTION_NAMES)}
    full_json, _ = write_report(full, tmp_path)
    partial = {**partial_report("collector", {"results": []}), "events": 5}
    partial_json, partial_md = write_report(partial, tmp_path)
    assert (full_json.name, partial_json.name, partial_md.name) == (
        "2026-11-23-h.json",
        "2026-11-23-h-collector.json",
        "2026-11-23-h-collector.md",
    )
    assert full_json.exists()
    assert "Partial run: collector, --events 5 (unused: no section run takes a size); not run:" in (
        partial_md.read_text()
    )


def test_only_the_selected_section_runs_with_the_size_given() -> None:
    calls: list[tuple[str, int | None]] = []
    runners = {
        name: (lambda size, name=name: calls.append((name, size)) or {"ran": name}) for name in SECTION_NAMES
    }
    quiet = Console(quiet=True)
    assert run_sections(selected("archiver"), runners, 5000, quiet) == {"archiver": {"ran": "archiver"}}
    assert calls == [("archiver", 5000)]
    calls.clear()
    run_sections(selected(None), runners, None, quiet)
    assert calls == [
        ("latency", 30_000),
        ("alerts", 10),
        ("dashboard", 10_000_000),
        ("collector", None),  # wrk runs for a fixed time: it takes no size, even with --events
        ("archiver", 200_000),
        ("stream", 200_000),
        ("storage", 200_000),
        ("cluster", 12_000),
    ]


def test_a_failing_section_is_reported_not_raised() -> None:
    def broken(_size: int | None) -> dict:
        raise RuntimeError("archiver did not start")

    results = run_sections(selected("archiver"), {"archiver": broken}, None, Console(quiet=True))
    assert results == {"archiver": {"error": "RuntimeError: archiver did not start"}}


def test_bench_options_reach_the_run(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[tuple[str | None, int | None]] = []

    def fake_run(settings: object, console: Console, only: str | None, events: int | None) -> dict:
        runs.append((only, events))
        return partial_report(only or "collector", {"results": []})

    monkeypatch.setattr(bench.report, "run_bench", fake_run)
    monkeypatch.setattr(bench.report, "write_report", lambda report: (home / "r.json", home / "r.md"))
    assert tally_bench("--only", "latency", "--events", "2000").exit_code == 0
    assert tally_bench().exit_code == 0
    assert runs == [("latency", 2000), (None, None)]


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        (["--only", "nope"], "tally: invalid value for '--only': 'nope' is not one of 'latency',"),
        (["--events", "0"], "tally: invalid value for '--events': 0 is not in the range x>=1"),
        (["--events", "many"], "tally: invalid value for '--events': 'many' is not a valid integer"),
    ],
)
def test_bench_typo_is_one_line_and_exit_2(home: Path, arguments: list[str], complaint: str) -> None:
    result = tally_bench(*arguments)
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(complaint) and line.endswith("see 'tally bench --help'")


def cluster_mode_figures(accepted_per_s: float, p50_s: float, archived_after_s: float) -> dict:
    return {
        "accepted_per_s": accepted_per_s,
        "p50_s": p50_s,
        "p95_s": p50_s * 2,
        "archive_complete_after_s": archived_after_s,
    }


def test_cluster_section_puts_both_modes_side_by_side_without_the_stack_memory() -> None:
    report = partial_report(
        "cluster",
        {
            "offered_rate": 600,
            "offered_events": 12_000,
            "single": cluster_mode_figures(85.0, 1.5, 148.0),
            "cluster": cluster_mode_figures(57.0, 2.5, 217.0),
        },
    )
    # The section starts stacks of its own: no stack of $TALLY_HOME was measured.
    del report["rss_idle_mib"], report["rss_after_mib"]
    figures = {measure: figure for measure, figure, _ in headline(report)}
    assert figures["single node vs cluster"] == (
        "single 85.0/s accepted, p50 1.5 s, p95 3.0 s, archive complete after 148.0 s; "
        "cluster 57.0/s accepted, p50 2.5 s, p95 5.0 s, archive complete after 217.0 s "
        "(12,000 offered at 600/s)"
    )
    assert figures["collector throughput"] == "not run"
    assert figures["RSS, idle"] == "not measured"
    text = markdown(report)
    assert "## cluster" in text and "## rss_idle_mib" not in text


def test_only_the_cluster_section_needs_no_stack_in_the_home() -> None:
    assert [section.name for section in selected(None) if not section.needs_stack] == ["cluster"]
