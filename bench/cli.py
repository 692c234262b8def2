"""`tally bench`: the benchmarks register their own command with the CLI (pyproject.toml's
`tally.commands` entry points), so the operator package need not import them."""

from __future__ import annotations

import click
from rich.console import Console

from bench.sections import SECTION_NAMES, events_help
from ops.local.stack import current_settings
from tally.settings import Settings


@click.command("bench")
@click.option(
    "--only",
    type=click.Choice(SECTION_NAMES),
    help="Run this section alone; its report is <date>-<host>-<section>.* (a full run's is kept).",
)
@click.option("--events", type=click.IntRange(min=1), metavar="N", help=events_help())
def bench(only: str | None, events: int | None) -> None:
    """Benchmark the local stack (started if needed); writes bench/results/*.json and *.md.

    Sections, in run order: latency (event to visible through the agg source at 1,000
    page views/s), dashboard, collector, archiver, stream. A full run takes about 10 minutes.
    """
    from bench.report import run_bench, write_report

    console = Console()
    report = run_bench(current_settings(Settings()), console, only=only, events=events)
    json_path, md_path = write_report(report)
    console.print(f"report: {md_path} and {json_path}")
