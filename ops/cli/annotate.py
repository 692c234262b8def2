"""`tally annotations`: notes on a site's timeline (storage/annotations.py), as the Overview's chart
and the email reports show them: added, listed (Tally's own included) and removed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click

from ops.cli.context import Stack, console

DEFAULT_DAYS = 30


@click.group()
def annotations() -> None:
    """Notes on a site's timeline: releases, campaigns, incidents; deploys from a CI pipeline."""


@annotations.command("add")
@click.argument("site")
@click.argument("text")
@click.option("--date", "day", default=None, help="The date it is about (YYYY-MM-DD), in the site's zone.")
@click.option("--at", "instant", default=None, help="The moment instead (ISO-8601; UTC without an offset).")
@click.option("--kind", default="note", show_default=True, help="note or deploy.")
@click.option("--author", default=None, help="Who writes it (default: the operator's email).")
@click.pass_obj
def annotations_add(
    stack: Stack, site: str, text: str, day: str | None, instant: str | None, kind: str, author: str | None
) -> None:
    """Add TEXT to SITE's timeline on --date or --at (default: now)."""
    from storage import annotations as store

    if day is not None and instant is not None:
        raise click.UsageError("give --date or --at, not both")
    # Every field is checked before the store is asked: a typo is one line, whatever the stack.
    text, kind = store.clean_text(text), store.clean_kind(kind)
    when = store.parse_day(day, "--date") if day is not None else None
    if instant is not None:
        when = store.parse_instant(instant, "--at")
    note = store.add(
        stack.client, site, when or datetime.now(UTC), text, author or stack.settings.owner_email, kind
    )
    shown = note.day.isoformat() if note.day else note.at.isoformat().replace("+00:00", "Z")
    console.print(f"added annotation {note.id} to {note.site} at {shown}", highlight=False)


@annotations.command("list")
@click.argument("site")
@click.option("--from", "first", default=None, help="First date (YYYY-MM-DD; default: 30 days ago).")
@click.option("--to", "last", default=None, help="Last date, included (YYYY-MM-DD; default: today).")
@click.pass_obj
def annotations_list(stack: Stack, site: str, first: str | None, last: str | None) -> None:
    """SITE's annotations, oldest first: id, when, kind, author, text (tab-separated)."""
    from storage import annotations as store
    from storage.sites import site_timezone

    end_day = store.parse_day(last, "--to") if last else datetime.now(UTC).date()
    start_day = store.parse_day(first, "--from") if first else end_day - timedelta(days=DEFAULT_DAYS)
    if end_day < start_day:
        raise click.UsageError("--to is before --from")
    name = store.registered(stack.client, site)
    timezone = site_timezone(stack.client, name)
    start, end = store.day_range(start_day, timezone)[0], store.day_range(end_day, timezone)[1]
    for note in store.list_annotations(stack.client, name, start, end):
        when = note.day.isoformat() if note.day else note.at.isoformat().replace("+00:00", "Z")
        click.echo("\t".join([note.id, when, note.kind, note.author, note.text]))


@annotations.command("remove")
@click.argument("site")
@click.argument("annotation_id", metavar="ID")
@click.pass_obj
def annotations_remove(stack: Stack, site: str, annotation_id: str) -> None:
    """Remove note ID (as listed) from SITE's timeline."""
    from storage import annotations as store

    removed = store.remove(stack.client, site, annotation_id)
    console.print(f"removed annotation {removed.id} from {removed.site}", highlight=False)


COMMANDS = (annotations,)
