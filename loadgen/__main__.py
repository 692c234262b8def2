"""`python -m loadgen` / `tally loadgen`: realistic traffic against the collector."""

from __future__ import annotations

import asyncio

import click
from rich.console import Console
from rich.progress import Progress

from loadgen.runner import RunSummary, run
from loadgen.traffic import TrafficModel, site_names
from tally.settings import Settings

console = Console()


def print_summary(summary: RunSummary) -> None:
    achieved = summary.sent / summary.elapsed_s if summary.elapsed_s else 0.0
    console.print(
        f"sent {summary.sent} · accepted {summary.accepted} · by status {dict(summary.statuses)} · "
        f"{achieved:.0f}/s · latency p50 {summary.percentile(0.5) * 1000:.1f} ms "
        f"p95 {summary.percentile(0.95) * 1000:.1f} ms p99 {summary.percentile(0.99) * 1000:.1f} ms"
    )


@click.command()
@click.option("--rate", type=float, default=50.0, show_default=True, help="Page views per second.")
@click.option(
    "--duration", type=float, default=10.0, show_default=True, help="Seconds; 0 runs until stopped."
)
@click.option("--sites", type=int, default=2, show_default=True, help="Number of sites.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--target", default=None, help="Collector base URL (default: the local collector).")
@click.option("--demo", is_flag=True, help="Demo traffic: sites named demoN.example.com, runs quietly.")
def main(rate: float, duration: float, sites: int, seed: int, target: str | None, demo: bool) -> None:
    settings = Settings()
    target = target or f"http://127.0.0.1:{settings.collector_port}"
    model = TrafficModel(site_names(sites, demo), seed=seed)
    if demo or not duration:
        summary = asyncio.run(run(target, model, rate, duration))
    else:
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("sending", total=int(rate * duration))
            summary = asyncio.run(run(target, model, rate, duration, on_sent=lambda: progress.advance(task)))
    print_summary(summary)


if __name__ == "__main__":
    main()
