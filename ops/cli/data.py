"""The data itself: a site's history imported from other tools (`tally import`), read-only SQL
on the archive (`tally query`) and raw events out of it (`tally export`)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

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
@click.option("--from", "start", required=True, type=click.DateTime(), help="UTC start (inclusive).")
@click.option("--to", "end", required=True, type=click.DateTime(), help="UTC end (exclusive).")
@click.option("--format", "output_format", type=click.Choice(["parquet", "csv"]), default="parquet")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="File to write (default: stdout).")
@click.pass_obj
def export(
    stack: Stack, site: str, start: datetime, end: datetime, output_format: str, output: str | None
) -> None:
    """Raw events of one site out of the archive, streamed (bounded memory)."""
    from storage.export import export_events

    target = open(output, "wb") if output else sys.stdout.buffer  # noqa: SIM115 - closed below
    try:
        rows = export_events(
            stack.settings,
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


COMMANDS = (
    import_history,
    query,
    export,
)
