"""The dashboard benchmark at a tiny size (issue 32: "benchmarks that cannot rot"): every Dash
callback and every API request it times answers 200 on the real ClickHouse engine, so a callback
that gains an input, or a report that changes, breaks this test instead of the next 10M-event run.
Figures are not asserted (speed is measured by `tally bench`, not in tests)."""

from __future__ import annotations

import pytest

from bench.dashboard import run_dashboard_bench
from tally.settings import Settings

pytestmark = pytest.mark.integration


@pytest.mark.slow  # builds a 2,000-event archive and its rollups, then times each request once
def test_every_callback_and_api_request_of_the_dashboard_bench_answers(dashboard_settings: Settings) -> None:
    report = run_dashboard_bench(dashboard_settings, events=2_000, rounds=1)
    timed = set(report["callbacks"])
    assert {"top metrics, filtered", "funnel (3 steps)", "explore SQL (1,000 rows)"} <= timed
    issue_35_tabs = {
        "journeys (next 3 steps from the entry)",
        "web vitals (trend + pages)",
        "retention (12 weeks)",
    }
    assert issue_35_tabs <= timed
    asked = set(report["api"])
    assert {"aggregate (agg)", "funnel, 3 steps (raw)", "v2: bounce rate by page (archive)"} <= asked
    issue_35_reports = {
        "journeys, 3 steps into /pricing (raw)",
        "web vitals by page (raw)",
        "retention, 12 weeks (agg)",
    }
    assert issue_35_reports <= asked
    assert report["archive"]["events"] == 2_000
    for name, figures in {**report["callbacks"], **report["api"]}.items():
        assert "error" not in figures and figures["p95_ms"] >= 0, (name, figures)
