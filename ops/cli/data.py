"""The data itself: a site's history imported from other tools (`tally import`), read-only SQL
on the archive (`tally query`) and raw events out of it (`tally export`)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

import click
from rich.console import Console

from ops.cli.context import Stack, console
from ops.cli_errors import UserError


@click.command("import")
@click.argument("site")
@click.argument("file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--from", "origin", type=click.Choice(["plausible", "ga4"]), help="Whose export FILE is.")
@click.option("--list", "listing", is_flag=True, help="List the files SITE's imported history holds.")
@click.option("--remove", "removed", metavar="FILE_OR_ID", help="Take one imported file out of the history.")
@click.pass_obj
def import_history(
    stack: Stack, site: str, file: Path | None, origin: str | None, listing: bool, removed: str | None
) -> None:
    """Import SITE's history from FILE: Plausible's CSV export (the zip or its CSVs) or a GA4
    CSV export, as daily aggregates; the same file twice changes nothing. With --list, show
    what SITE's imported history holds; with --remove, take a file (its name or id) out of it."""
    from storage import imports
    from storage.sites import normalise

    site = normalise(site)  # a typo is reported before the file is read
    if listing:
        list_imported(stack, site)
        return
    if removed is not None:
        record = imports.remove_import(stack.client, site, removed)
        click.echo(f"removed {record.file_name} ({record.first_day} to {record.last_day}) from {site}")
        return
    if file is None or origin is None:
        raise UserError("name the export and whose it is: tally import SITE FILE --from plausible|ga4")
    files = imports.read_files(file, origin)  # type: ignore[arg-type]
    result = imports.import_files(stack.client, site, files, origin)  # type: ignore[arg-type]
    if result.already:
        click.echo(f"already imported into {site}, unchanged: {', '.join(result.already)}")
    if result.imported:
        first, last = result.days or ("-", "-")
        rows = sum(len(f.rows) for f in result.imported)
        click.echo(
            f"imported {len(result.imported)} file(s) into {site}: {first} to {last}, {rows} daily rows "
            "(shown where reports include imports: API include.imports, the dashboard's marker)"
        )
        if note := result.overlap_note():
            click.echo(note)


def list_imported(stack: Stack, site: str) -> None:
    """One line per imported file (name, origin, first and last day, rows, id), then the cut."""
    from storage import imports
    from storage.calendar import zone
    from storage.sites import site_timezone

    client = stack.client
    records = imports.list_imports(client, site)
    for record in records:
        click.echo(
            f"{record.file_name}\t{record.origin}\t{record.first_day}\t{record.last_day}\t{record.row_count}"
            f"\t{record.import_id}"
        )
    if not records:
        click.echo(f"nothing imported into {site}")
        return
    native_from = imports.native_first_day(client, site, zone(site_timezone(client, site)))
    if native_from is not None:
        click.echo(f"the site's own events start on {native_from}: imported days from then on are not used")


@click.command()
@click.argument("sql")
@click.option("--format", "output_format", type=click.Choice(["table", "csv", "json"]), default="table")
@click.pass_obj
def query(stack: Stack, sql: str, output_format: str) -> None:
    """Read-only SQL on the raw archive (table `events`)."""
    from ops.cli_output import print_result
    from storage import readonly_sql

    try:
        result = readonly_sql.run(stack.settings, sql)
    except readonly_sql.QueryRefused as error:
        refused = UserError(f"query refused: {error}")
        refused.exit_code = 2
        raise refused from None
    print_result(result, output_format, console)
    if result.truncated:
        Console(stderr=True).print(f"[yellow]note:[/yellow] result cut at {readonly_sql.MAX_ROWS} rows")


@click.command()
@click.option("--site", required=True, help="The site whose raw events to export.")
@click.option("--from", "start", type=click.DateTime(), help="UTC start (inclusive).")
@click.option("--to", "end", type=click.DateTime(), help="UTC end (exclusive).")
@click.option("--format", "output_format", type=click.Choice(["parquet", "csv"]), default="parquet")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="File to write (default: stdout).")
@click.option(
    "--figure",
    metavar="METRIC",
    help="Only the events behind a figure: pageviews, visitors, events or conversions "
    "(as /api/v1/export/events; with --period, --filters, --goal, --property/--value).",
)
@click.option(
    "--period", default=None, help="With --figure: today, 7d, 30d, month, … instead of --from/--to."
)
@click.option("--filters", default=None, help='With --figure: JSON, as the API takes it: {"country": "DE"}.')
@click.option("--goal", default=None, help="With --figure events or conversions: that goal's events.")
@click.option("--property", "property_", default=None, help="With --figure: one row of a breakdown by it.")
@click.option("--value", default=None, help="With --property: the row's value.")
@click.pass_obj
def export(
    stack: Stack,
    site: str,
    start: datetime | None,
    end: datetime | None,
    output_format: str,
    output: str | None,
    figure: str | None,
    **question: str | None,
) -> None:
    """Raw events of one site out of the archive, streamed (bounded memory); with --figure, exactly
    the events a figure of the stats API counts, with their partition and offset."""
    if figure is None:
        if start is None or end is None:
            raise UserError("--from and --to are required (or --figure with --period)")
        asked = [name for name, value in question.items() if value is not None]
        if asked:
            raise UserError(f"--{asked[0].rstrip('_')}: only with --figure")
    target = open(output, "wb") if output else sys.stdout.buffer  # noqa: SIM115 - closed below
    try:
        if figure is None:
            from storage.export import export_events

            rows = export_events(
                stack.settings,
                site,
                start.replace(tzinfo=UTC),
                end.replace(tzinfo=UTC),
                output_format,
                target,  # type: ignore[union-attr]
            )
            summary = f"{rows} events"
        else:
            summary = export_figure(stack, site, start, end, output_format, figure, question, target)
    except BaseException:
        if output:  # a failed export leaves no file that looks like a (short) export
            target.close()
            Path(output).unlink(missing_ok=True)
        raise
    finally:
        if output:
            target.close()
    Console(stderr=True).print(f"exported {site}: {summary}")


def export_figure(
    stack: Stack,
    site: str,
    start: datetime | None,
    end: datetime | None,
    output_format: str,
    figure: str,
    question: dict[str, str | None],
    target: BinaryIO,
) -> str:
    """The events behind `figure`, asked as `/api/v1/export/events` asks (its parameters, its
    checks: dashboard/http_api/parameters.py); returns what they add up to."""
    from dashboard.http_api import parameters
    from storage import queries
    from storage.definitions import CurrentDefinitions
    from storage.export import figure_events, stream_figure
    from storage.sites import site_timezone

    given = {
        "site": site,
        "from": None if start is None else start.replace(tzinfo=UTC).isoformat(),
        "to": None if end is None else end.replace(tzinfo=UTC).isoformat(),
        "metric": figure,
        "format": output_format,
        "period": question["period"],
        "filters": question["filters"],
        "goal": question["goal"],
        "property": question["property_"],
        "value": question["value"],
    }
    arguments, choice = parameters.export_arguments(
        {name: [value] for name, value in given.items() if value is not None}
    )
    client = stack.client
    definitions = CurrentDefinitions(stack.settings, lambda: client)  # as the API reads them
    name = parameters.site(arguments)
    first_day = queries.first_day(client, name) if arguments.get("period") == "all" else None
    q = parameters.window_queries(
        arguments, datetime.now(UTC), definitions.settings(), site_timezone(client, name), first_day
    )[0]
    q = parameters.breakdown_row(q, choice.breakdown)
    version = definitions.version()
    number = 0 if version is None else version.number
    found = figure_events(client, q, choice.metric, parameters.export_goal(arguments), number)
    for chunk in stream_figure(client, found, choice.output_format):
        target.write(chunk)
    return (
        f"{found.rows} events; {choice.metric}={found.figure} "
        f"(definitions version {number}; {found.figure_rule})"
    )


COMMANDS = (
    import_history,
    query,
    export,
)
