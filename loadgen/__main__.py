"""`tally loadgen` / `python -m loadgen`: realistic traffic against the collector, with
ground truth. Loopback targets only; bounded in count and time unless --duration 0."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import click
import httpx
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from loadgen.ground_truth import GroundTruth
from loadgen.runner import RunSummary, run
from loadgen.traffic import TrafficMix, TrafficModel, site_names
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings

console = Console()
PROGRESS_INTERVAL_S = 0.1
SCRAPER_RATE = 2.0  # page views/s per scraper: far over any sensible hourly limit


@dataclass(frozen=True)
class LoadPlan:
    target: str
    rate: float
    duration_s: float
    sites: list[str]
    visitors: int
    mix: TrafficMix
    batch_size: int
    seed: int
    ingest_key: str

    def share(self, index: int, processes: int) -> LoadPlan:
        """One process's part: an equal share of the rate and of the visitors, its own seed."""
        return LoadPlan(
            self.target,
            self.rate / processes,
            self.duration_s,
            self.sites,
            self.visitors // processes,
            self.mix,
            self.batch_size,
            self.seed * 1000 + index,
            self.ingest_key,
        )


def run_plan(plan: LoadPlan, progress: Progress | None = None) -> tuple[RunSummary, GroundTruth]:
    model = TrafficModel(plan.sites, seed=plan.seed, visitors=plan.visitors, mix=plan.mix)
    on_progress = None
    if progress is not None:
        task = progress.add_task(
            "sending", total=int(plan.rate * plan.duration_s) or None, accepted=0, rejected=0
        )

        last_update = 0.0

        def on_progress(summary: RunSummary) -> None:
            # Called at every send and every answer; the line redraws 10 times a second, so
            # the sender updates it no more often than that (rich's update costs a lock each).
            nonlocal last_update
            if (now := time.monotonic()) - last_update < PROGRESS_INTERVAL_S:
                return
            last_update = now
            progress.update(
                task, completed=summary.sent, accepted=summary.accepted, rejected=summary.rejected
            )

    summary, truth = asyncio.run(
        run(
            plan.target,
            model,
            plan.rate,
            plan.duration_s,
            plan.ingest_key,
            plan.batch_size,
            on_progress=on_progress,
        )
    )
    if progress is not None:  # the last counts, which the interval may have skipped
        progress.update(task, completed=summary.sent, accepted=summary.accepted, rejected=summary.rejected)
    return summary, truth


def live_progress() -> Progress:
    """One line, redrawn while the run goes: sent (of planned), accepted, rejected."""
    return Progress(
        TextColumn("sent"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("accepted {task.fields[accepted]} · rejected {task.fields[rejected]}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def run_processes(plan: LoadPlan, processes: int, quiet: bool = False) -> tuple[RunSummary, GroundTruth]:
    """Several processes when one core cannot keep the rate; results merged."""
    if processes == 1 and quiet:
        return run_plan(plan)
    if processes == 1:
        with live_progress() as progress:
            return run_plan(plan, progress)
    context = multiprocessing.get_context("spawn")
    with context.Pool(processes) as pool:
        parts = pool.map(run_plan, [plan.share(index, processes) for index in range(processes)])
    summary, truth = RunSummary(), GroundTruth()
    for part_summary, part_truth in parts:
        summary.merge(part_summary)
        truth.merge(part_truth)
    return summary, truth


def print_summary(summary: RunSummary) -> None:
    achieved = summary.sent / summary.elapsed_s if summary.elapsed_s else 0.0
    rejected = {status: count for status, count in summary.statuses.items() if status != 202}
    console.print(
        f"sent {summary.sent} · accepted {summary.accepted} · rejected {rejected or 'none'} · "
        f"{achieved:.0f}/s · latency of the accepted p50 {summary.percentile(0.5) * 1000:.1f} ms "
        f"p95 {summary.percentile(0.95) * 1000:.1f} ms p99 {summary.percentile(0.99) * 1000:.1f} ms"
    )


def register_sites(settings: Settings, sites: list[str]) -> None:
    """Register the traffic's sites in the store, so the collector takes their events (it
    accepts a site from the moment it is registered)."""
    client = connect(settings)
    try:
        for domain in sites:
            add_site(client, domain)
    finally:
        client.close()


def check_collector(target: str) -> None:
    """Fail before sending when nothing answers at the target (one line, not a count of errors)."""
    try:
        answer = httpx.get(f"{target}/healthz", timeout=5)
    except httpx.HTTPError as error:
        raise click.ClickException(
            f"no collector answers at {target} ({type(error).__name__}) — start the stack with 'tally up -d'"
        ) from None
    if answer.status_code != 200:
        raise click.ClickException(
            f"{target} does not answer like a Tally collector (/healthz: {answer.status_code})"
        )


def _loopback_only(target: str) -> None:
    url = urlparse(target)
    host = url.hostname or ""
    if not (host == "localhost" or host.startswith("127.") or host == "::1"):
        raise click.BadParameter(f"{host} is not a loopback address; load is only ever sent to this machine")
    if url.scheme != "http":  # the sender speaks plain HTTP/1.1 (loadgen/wire.py), as collectors listen
        raise click.BadParameter(
            f"{target}: give the collector's http:// address, e.g. http://127.0.0.1:8080"
        )


# What each option may be: a typo is refused on the command line, before the stack is touched.
RATE = click.FloatRange(min=0, min_open=True)
SECONDS = click.FloatRange(min=0)
SHARE = click.FloatRange(0, 1)
COUNT = click.IntRange(min=0)
AT_LEAST_ONE = click.IntRange(min=1)


@click.command("loadgen")
@click.option("--rate", type=RATE, default=50.0, show_default=True, help="Page views per second.")
@click.option(
    "--duration", type=SECONDS, default=10.0, show_default=True, help="Seconds; 0 runs until stopped."
)
@click.option(
    "--sites", type=AT_LEAST_ONE, default=2, show_default=True, help="Number of sites (siteN.example.com)."
)
@click.option(
    "--visitors", type=COUNT, default=0, help="Size of the visitor pool (0: a new visitor per session)."
)
@click.option("--bot-fraction", type=SHARE, default=0.05, show_default=True)
@click.option("--scrapers", type=COUNT, default=0, help="Clients sending far over the rate limit.")
@click.option(
    "--late-fraction", type=SHARE, default=0.0, help="Share of page views delivered late (batch API)."
)
@click.option("--late-delay", type=SECONDS, default=600.0, show_default=True, help="How late, in seconds.")
@click.option(
    "--batch", "batch_size", type=COUNT, default=0, help="Send through /api/events in batches of N."
)
@click.option("--processes", type=AT_LEAST_ONE, default=1, show_default=True)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option(
    "--truth", type=click.Path(dir_okay=False, path_type=Path), help="Where to write the ground truth."
)
@click.option("--target", default=None, help="Collector base URL (default: the local collector).")
@click.option("--demo", is_flag=True, help="Demo traffic: sites named demoN.example.com, runs quietly.")
def main(
    rate: float,
    duration: float,
    sites: int,
    visitors: int,
    bot_fraction: float,
    scrapers: int,
    late_fraction: float,
    late_delay: float,
    batch_size: int,
    processes: int,
    seed: int,
    truth: Path | None,
    target: str | None,
    demo: bool,
) -> None:
    """Realistic page views against the collector; prints a summary and writes ground truth."""
    settings = Settings()
    target = target or f"http://127.0.0.1:{settings.collector_port}"
    _loopback_only(target)
    mix = TrafficMix(
        bot_fraction=bot_fraction,
        scrapers=scrapers,
        scraper_fraction=min(0.5, scrapers * SCRAPER_RATE / rate),
        late_fraction=late_fraction,
        late_delay_s=late_delay,
    )
    plan = LoadPlan(
        target,
        rate,
        duration,
        site_names(sites, demo),
        visitors,
        mix,
        batch_size,
        seed,
        settings.resolved_ingest_key(),
    )
    register_sites(settings, plan.sites)
    check_collector(target)
    summary, ground_truth = run_processes(plan, processes, quiet=demo)
    print_summary(summary)
    if summary.refusal:
        raise click.ClickException(f"the collector at {target} refused an event: {summary.refusal}")
    if truth or not demo:
        path = truth or settings.home_dir / "loadgen" / f"truth-seed{seed}.jsonl"
        ground_truth.write(path)
        console.print(f"ground truth: {path} ({len(ground_truth.counted())} counted page views)")


if __name__ == "__main__":
    main()
