"""The `tally` command line (DESIGN.md, "The tally CLI")."""

from __future__ import annotations

import json
import signal
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from bench.sections import SECTION_NAMES, events_help
from loadgen.__main__ import main as loadgen_command
from ops.cli_errors import TallyGroup, UserError
from tally.settings import Settings

console = Console()


def current_settings() -> Settings:
    """The user's settings as the stack in $TALLY_HOME runs them (a cluster: its brokers, its master)."""
    from ops.local.stack import current_settings as as_running

    return as_running(Settings())


@click.group(cls=TallyGroup)
def main() -> None:
    """Tally: self-hosted, real-time web analytics on an event log."""


@main.command()
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
    progress = lambda line: console.print(line, highlight=False)  # noqa: E731 - a one-line callback
    stack.up(settings, demo=demo, progress=progress, with_cluster=with_cluster)
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


@main.command()
def down() -> None:
    """Stop every component; keep the data."""
    from ops.local import stack

    stack.down(Settings())
    console.print("stopped")


@main.command()
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


@main.command()
def init() -> None:
    """Create the Kafka topics and apply the ClickHouse migrations (idempotent)."""
    from storage.schema import apply_migrations
    from tally.topics import ensure_topics_sync

    settings = current_settings()
    created = ensure_topics_sync(settings)
    applied = apply_migrations(settings)
    console.print(f"topics created: {created or 'none'}; migrations applied: {applied or 'none'}")


@main.group()
def sites() -> None:
    """The sites Tally accepts events for."""


@sites.command("add")
@click.argument("domain")
def sites_add(domain: str) -> None:
    """Accept events for DOMAIN (as in data-site="DOMAIN")."""
    from storage import sites as registry
    from storage.client import connect

    domain = registry.normalise(domain)  # a typo is reported before the store is asked
    added = registry.add_site(connect(current_settings()), domain)
    console.print(f'added {added}: embed <script defer data-site="{added}" src=".../tracker.js"></script>')


@sites.command("list")
def sites_list() -> None:
    """The registered sites."""
    from storage import sites as registry
    from storage.client import connect

    for domain in registry.list_sites(connect(current_settings())):
        click.echo(domain)


@sites.command("remove")
@click.argument("domain")
def sites_remove(domain: str) -> None:
    """Stop accepting events for DOMAIN (its data stays)."""
    from storage import sites as registry
    from storage.client import connect

    domain = registry.normalise(domain)
    if not registry.remove_site(connect(current_settings()), domain):
        raise UserError(f"{domain} is not registered (see 'tally sites list')")
    console.print(f"removed {domain}")


@main.group()
def goals() -> None:
    """A site's goals: custom events and pages that count as conversions."""


@goals.command("add")
@click.argument("site")
@click.argument("event", required=False, default="")
@click.option(
    "--page", "page", default="", help='A page goal: a path pattern, * any characters ("/checkout/*").'
)
@click.option(
    "--currency", default="", help="A revenue goal: the ISO-4217 currency its amounts count in (EUR)."
)
def goals_add(site: str, event: str, page: str, currency: str) -> None:
    """Count EVENT (a custom event's name) or --page PATTERN as a goal of SITE."""
    from storage import goals as goal_store
    from storage.client import connect

    goal = goal_store.make_goal(site, event, page, currency)  # a typo is reported before the store is asked
    added = goal_store.add_goal(connect(current_settings()), goal)
    console.print(f"added goal {added.name!r} to {added.site}", highlight=False)


@goals.command("list")
@click.argument("site")
def goals_list(site: str) -> None:
    """SITE's goals: name, kind, what it matches, currency."""
    from storage import goals as goal_store
    from storage.client import connect
    from storage.sites import normalise

    for goal in goal_store.list_goals(connect(current_settings()), normalise(site)):
        matched = goal.event_name or goal.page_pattern
        click.echo("\t".join([goal.name, goal.kind, matched, goal.currency]).rstrip())


@goals.command("remove")
@click.argument("site")
@click.argument("name")
def goals_remove(site: str, name: str) -> None:
    """Stop counting goal NAME of SITE (its events stay in the archive)."""
    from storage import goals as goal_store
    from storage.client import connect

    removed = goal_store.remove_goal(connect(current_settings()), site, name)
    console.print(f"removed goal {removed.name!r} from {removed.site}", highlight=False)


class ShareGroup(TallyGroup):
    """`tally share SITE` creates; `list` and `revoke` are subcommands (a site is never named so:
    it has a dot)."""

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["create", *args]
        return super().resolve_command(ctx, args)


@main.group(cls=ShareGroup)
def share() -> None:
    """Read-only dashboard links to one site: `tally share SITE [--label L] [--password]`."""


@share.command("create")
@click.argument("site")
@click.option("--label", default="", help="Who or what the link is for (shown in lists).")
@click.option(
    "--password", "ask_password", is_flag=True, help="Ask for a password (prompt, or a line on stdin)."
)
def share_create(site: str, label: str, ask_password: bool) -> None:
    """Create a read-only link to SITE's dashboard; the URL is shown only now."""
    from storage import shared_links
    from storage.client import connect
    from storage.sites import normalise

    site = normalise(site)  # a typo is reported before the store is asked
    password = read_new_password() if ask_password else None
    settings = current_settings()
    try:
        created = shared_links.create_link(connect(settings), site, label, password)
    except shared_links.SharedLinkError as error:
        raise UserError(str(error)) from None
    base = f"http://{settings.dashboard_host}:{settings.dashboard_port}"
    click.echo(f"{base}{created.path()}")
    click.echo(
        f"shared link {created.link.id} for {site}"
        f"{' (password-protected)' if password else ''}: copy the URL now, it is not shown again; "
        f"behind a TLS proxy use its address instead of {base}",
        err=True,
    )


@share.command("list")
@click.argument("site")
def share_list(site: str) -> None:
    """SITE's shared links: id, created, label, password, state."""
    from storage import shared_links
    from storage.client import connect

    links = shared_links.list_links(connect(current_settings()), site)
    if not links:
        console.print(f"no shared links for {site} (create one with 'tally share {site}')", highlight=False)
        return
    table = Table("id", "created (UTC)", "label", "password", "state")
    for link in links:
        table.add_row(
            link.id,
            link.created_at.strftime("%Y-%m-%d %H:%M"),
            link.label or "-",
            "yes" if link.has_password else "no",
            "revoked" if link.revoked else "live",
        )
    console.print(table)


@share.command("revoke")
@click.argument("site")
@click.argument("link_id", metavar="ID")
def share_revoke(site: str, link_id: str) -> None:
    """Revoke SITE's link ID: it stops working at once, also for pages already open."""
    from storage import shared_links
    from storage.client import connect

    try:
        shared_links.revoke_link(connect(current_settings()), site, link_id)
    except shared_links.SharedLinkError as error:
        raise UserError(str(error)) from None
    console.print(f"revoked {link_id} ({site})", highlight=False)


def read_new_password() -> str:
    """From a prompt on a terminal, else the first line of stdin: never a command-line argument,
    which would land in shell history and the process list."""
    if sys.stdin.isatty():
        password = click.prompt("Password for the link", hide_input=True, confirmation_prompt=True)
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise UserError("--password: the password is empty")
    return password


@main.command()
@click.argument("sql")
@click.option("--format", "output_format", type=click.Choice(["table", "csv", "json"]), default="table")
def query(sql: str, output_format: str) -> None:
    """Read-only SQL on the raw archive (table `events`)."""
    from ops.cli_output import print_result
    from storage import readonly_sql

    try:
        result = readonly_sql.run(current_settings(), sql)
    except readonly_sql.QueryRefused as error:
        refused = UserError(f"query refused: {error}")
        refused.exit_code = 2
        raise refused from None
    print_result(result, output_format, console)
    if result.truncated:
        Console(stderr=True).print(f"[yellow]note:[/yellow] result cut at {readonly_sql.MAX_ROWS} rows")


@main.command()
@click.option("--site", required=True, help="The site whose raw events to export.")
@click.option("--from", "start", required=True, type=click.DateTime(), help="UTC start (inclusive).")
@click.option("--to", "end", required=True, type=click.DateTime(), help="UTC end (exclusive).")
@click.option("--format", "output_format", type=click.Choice(["parquet", "csv"]), default="parquet")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="File to write (default: stdout).")
def export(site: str, start: datetime, end: datetime, output_format: str, output: str | None) -> None:
    """Raw events of one site out of the archive, streamed (bounded memory)."""
    from storage.export import export_events

    target = open(output, "wb") if output else sys.stdout.buffer  # noqa: SIM115 - closed below
    try:
        rows = export_events(
            current_settings(),
            site,
            start.replace(tzinfo=UTC),
            end.replace(tzinfo=UTC),
            output_format,
            target,
        )
    except BaseException:
        if output:  # a failed export leaves no file that looks like a (short) export
            target.close()
            Path(output).unlink(missing_ok=True)
        raise
    finally:
        if output:
            target.close()
    Console(stderr=True).print(f"exported {site}: {rows} events")


main.add_command(loadgen_command, "loadgen")


@main.command()
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

    report = run_bench(current_settings(), console, only=only, events=events)
    json_path, md_path = write_report(report)
    console.print(f"report: {md_path} and {json_path}")


@main.command()
@click.option("--force", is_flag=True, help="Go on although the log has expired its oldest events.")
def replay(force: bool) -> None:
    """Rebuild the derived tables from the log. Stops the stream jobs, recomputes every table
    into <table>_replay, swaps them in, and starts the stream jobs again; the dashboard keeps
    reading the old tables until the swap."""
    from ops.local.replay import run_replay

    run_replay(current_settings(), progress=lambda line: console.print(line, highlight=False), force=force)


@main.command()
@click.option("--no-repair", is_flag=True, help="Only report; archive no hole.")
def verify(no_repair: bool) -> None:
    """Audit the archive against the log (repairing holes) and the derived tables against the
    archive; exits 1 if anything is still wrong."""
    from storage.archive_audit import AuditUnavailable
    from storage.archive_audit import verify as audit

    try:
        report = audit(current_settings(), fix=not no_repair)
    except AuditUnavailable as error:
        raise UserError(str(error)) from None
    for line in report.lines():
        console.print(line, highlight=False, soft_wrap=True)
    sys.exit(0 if report.ok else 1)


if __name__ == "__main__":
    main(prog_name="tally")  # `python -m ops.cli` speaks as the `tally` it is
