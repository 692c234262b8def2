"""The benchmark's arithmetic and report, without a stack."""

from __future__ import annotations

from pathlib import Path

from bench.report import headline, markdown, visibility_latencies, write_report
from loadgen.runner import percentile


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
        "machine": {
            "host": "h",
            "cpu": "x",
            "cores": 2,
            "memory_gib": 24,
            "os": "linux",
            "python": "3.11",
            "java": "17",
            "load_average_at_start": [0.1],
        },
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
    assert figures["collector throughput"].endswith("batches 30,000 events/s")
    assert figures["archiver throughput"] == "failed: StackError: archiver did not start"
    assert figures["Spark sustained throughput"] == "not measured"
    assert figures["RSS, idle"] == "1,700 MiB total"
