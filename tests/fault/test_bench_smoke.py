"""`tally bench`'s sections that drive the local stack still run against it: each, at a tiny size,
on the shared stack (tests/fault/conftest.py), returns its figures. A benchmark that only runs
by hand rots (the dashboard section once answered a 500 for weeks because a callback gained an
input); this is the smoke test that keeps them honest. The figures themselves mean nothing here:
they are measured on a busy machine, and `tally bench` on a quiet one is where they count.

The dashboard section has its own smoke test (tests/integration/test_bench_dashboard_smoke.py).
Not run here: `stream` (a second Spark application, about two minutes), `alerts` (needs a stack
started with TALLY_ALERT_WEBHOOK_PRIVATE=1) and `cluster` (starts two stacks of its own; the
cluster tests cover those stacks).
"""

from __future__ import annotations

import pytest

from bench.archiver import bench_archiver
from bench.collector import run_collector_bench
from bench.report import bench_latency
from tests.fault.scenario import recovered
from tests.fixtures.local_stack import LocalStack

pytestmark = pytest.mark.integration


def test_latency_section_sees_every_event_it_sent_through_the_agg_source(local_stack: LocalStack) -> None:
    figures = bench_latency(local_stack.settings, events=200, rate=200)

    assert figures["offered"] == figures["sent"] == figures["visible"] == 200, figures
    assert figures["failed"] == 0
    assert 0 < figures["p50_s"] <= figures["p95_s"] <= figures["p99_s"]


def test_archiver_section_archives_its_whole_backlog(local_stack: LocalStack) -> None:
    figures = bench_archiver(local_stack.settings, count=2_000)

    assert figures["events"] == 2_000 and figures["events_per_s"] > 0, figures
    # It stopped and started the stack's archiver: the next test finds the stack whole.
    recovered(local_stack, "every component healthy again", 120)


def test_collector_section_measures_the_bare_app_single_events_and_batches(local_stack: LocalStack) -> None:
    figures = run_collector_bench(local_stack.settings, duration_s=3, connections=8, batch=10)

    runs = {run["scenario"]: run for run in figures["results"]}
    assert set(runs) == {"bare_starlette_202", "collector_single_event", "collector_batch_10"}, runs
    for name, run in runs.items():
        assert run["events_per_s"] > 0, (name, run)
    assert figures["single_event_share_of_ceiling"] > 0
