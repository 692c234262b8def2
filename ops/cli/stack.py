"""The stack itself: start, stop and check it (`up`, `down`, `status`), set it up (`init`), rebuild
the derived tables from the log (`replay`, and `upgrade` after installing a newer version) and
audit the archive against the log (`verify`)."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import date
from typing import TYPE_CHECKING

import click
from rich.progress import MofNCompleteColumn, Progress
from rich.table import Table

from ops.cli.context import Stack, console, progress
from ops.cli_errors import UserError
from tally.settings import Settings

if TYPE_CHECKING:
    from storage.expired_history import ExpiredHistory


@click.command()
@click.option("-d", "detach", is_flag=True, help="Return once every component is healthy.")
@click.option("--demo", is_flag=True, help="Also run demo traffic against the collector.")
@click.option(
    "--cluster",
    "with_cluster",
    is_flag=True,
    help="Three Kafka brokers, a Spark master and two workers, two collectors, two archivers "
    "(ports from TALLY_CLUSTER_BASE_PORT on; docs/operations.md).",
)
def up(detach: bool, demo: bool, with_cluster: bool) -> None:
    """Start every local component in order, wait until healthy, print the URLs."""
    from ops.local import cluster, stack

    settings = Settings()
    stack.up(settings, demo=demo, progress=progress, with_cluster=with_cluster)
    settings = stack.current_settings(settings)  # a cluster's ports: as it stored them
    console.print(
        f"dashboard  http://127.0.0.1:{settings.dashboard_port}/  (api key in {settings.home_dir}/api_key)"
    )
    collector_ports = (
        cluster.layout(settings).collector_ports(settings) if with_cluster else [settings.collector_port]
    )
    for port in collector_ports:
        console.print(f"collector  http://127.0.0.1:{port}/api/event")
    console.print(f"logs       {settings.logs_dir}")
    if detach:
        return
    console.print("running in the foreground: Ctrl-C stops everything")
    stopped = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopped.set())
    stopped.wait()
    console.print("stopping…")
    stack.down(settings)


@click.command()
def down() -> None:
    """Stop every component; keep the data."""
    from ops.local import stack

    stack.down(Settings())
    console.print("stopped")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(as_json: bool) -> None:
    """Health of each component; exits 1 if any is down."""
    from ops.local import stack

    statuses = stack.status(Settings())
    if as_json:
        click.echo(json.dumps([s.__dict__ for s in statuses], indent=2))
    else:
        table = Table("component", "state", "healthy", "pid", "port", "detail")
        for s in statuses:
            table.add_row(
                s.name,
                s.state,
                "yes" if s.healthy else "[red]no[/red]",
                str(s.pid or "-"),
                str(s.port or "-"),
                s.detail,
            )
        console.print(table)
    sys.exit(0 if all(s.healthy for s in statuses) else 1)


@click.command()
@click.pass_obj
def init(stack: Stack) -> None:
    """Create the Kafka topics and apply the ClickHouse migrations (idempotent)."""
    from storage.client import connect
    from storage.schema import apply_migrations
    from tally.topics import ensure_topics_sync

    settings = stack.settings
    connect(settings)  # first: a stack that is down is said at once, not after the broker's minute
    created = ensure_topics_sync(settings)
    applied = apply_migrations(settings)
    console.print(f"topics created: {created or 'none'}; migrations applied: {applied or 'none'}")


@click.command()
@click.option(
    "--force", is_flag=True, help="Go on although the log has expired events the archive does not hold."
)
@click.pass_obj
def replay(stack: Stack, force: bool) -> None:
    """Rebuild the derived tables from the log. Stops the stream jobs, recomputes every table
    into <table>_replay, swaps them in, and starts the stream jobs again; the dashboard keeps
    reading the old tables until the swap. Days the log has expired are rebuilt from the
    archive."""
    from ops.local.replay import run_replay

    with archive_days_bar() as history_progress:
        run_replay(stack.settings, progress=progress, force=force, history_progress=history_progress)


@click.command()
@click.pass_obj
def upgrade(stack: Stack) -> None:
    """After installing a newer Tally: create missing topics, apply the store's migrations, and
    rebuild every derived table as `tally replay` does (the days the log has expired from the
    archive, so no history is lost), then start the stream jobs again."""
    from ops.local.replay import run_replay
    from storage.client import connect
    from tally.topics import ensure_topics_sync

    settings = stack.settings
    connect(settings)  # first: a stack that is down is said at once
    created = ensure_topics_sync(settings)
    console.print(f"topics created: {created or 'none'}")
    # The migrations run inside the replay, once it has stopped the live stream jobs.
    with archive_days_bar() as history_progress:
        run_replay(settings, progress=progress, history_progress=history_progress)
    console.print("upgrade: done")


@contextlib.contextmanager
def archive_days_bar() -> Iterator[Callable[[ExpiredHistory], Callable[[str, date], None]]]:
    """A progress bar over the site-days a rebuild takes from the archive, once it knows them."""
    with Progress(*Progress.get_default_columns(), MofNCompleteColumn(), console=console) as bar:

        def start(history: ExpiredHistory) -> Callable[[str, date], None]:
            task = bar.add_task(f"days before {history.cut} from the archive", total=history.days)
            return lambda _site, _day: bar.advance(task)

        yield start


@click.command()
@click.option("--no-repair", is_flag=True, help="Only report; archive no hole.")
@click.option("--site", default=None, help="Compare the derived tables of this site only.")
@click.option(
    "--full",
    is_flag=True,
    help="Check every archived offset, not only those since the archive was last found whole, "
    "and set the clean marks to what is found (after rows were deleted or restored by hand, or "
    "a second archiver was paused).",
)
@click.pass_obj
def verify(stack: Stack, no_repair: bool, site: str | None, full: bool) -> None:
    """Audit the archive against the log (repairing holes) and the derived tables against the
    archive; exits 1 if anything is still wrong. The audit checks each partition from its clean
    mark (the offset below which an earlier audit found it whole) unless --full. A site-day that
    differs only by events the stream jobs have not processed yet, or by late ones (older than
    the allowed lateness, which the archive answers), is listed as explained, not wrong."""
    from archiver.audit import AuditUnavailable
    from archiver.audit import verify as audit

    try:
        report = audit(stack.settings, fix=not no_repair, site=site, full=full)
    except AuditUnavailable as error:
        raise UserError(str(error)) from None
    for line in report.lines():
        console.print(line, highlight=False, soft_wrap=True)
    sys.exit(0 if report.ok else 1)


COMMANDS = (up, down, status, init, replay, upgrade, verify)
