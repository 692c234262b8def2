"""Saved segments (`tally segments`): named filter expressions per site."""

from __future__ import annotations

import click

from ops.cli.context import Stack


@click.group()
def segments() -> None:
    """Saved segments: named filter expressions per site (Plausible's v2 filter syntax)."""


@segments.command("add")
@click.argument("site")
@click.argument("name")
@click.argument("filters", metavar="FILTERS-JSON")
@click.pass_obj
def segments_add(stack: Stack, site: str, name: str, filters: str) -> None:
    """Save FILTERS-JSON as segment NAME of SITE, e.g. '[["is", "visit:country", ["DE"]]]'."""
    from dashboard.segments import checked
    from storage import segments as segment_store
    from storage.sites import normalise

    site, name = normalise(site), segment_store.checked_name(name)
    parsed = segment_store.parse_filters(filters)
    checked(parsed)  # what Tally cannot answer is refused before the store is asked
    added = segment_store.add_segment(stack.client, site, name, parsed)
    click.echo(
        f'added segment {added.name!r} to {added.site} (id {added.id}: ["is", "segment", [{added.id}]])'
    )


@segments.command("list")
@click.argument("site")
@click.pass_obj
def segments_list(stack: Stack, site: str) -> None:
    """SITE's segments: id, name, filters."""
    import json as json_module

    from storage import segments as segment_store

    for segment in segment_store.list_segments(stack.client, site):
        click.echo(f"{segment.id}\t{segment.name}\t{json_module.dumps(segment.filters)}")


@segments.command("rename")
@click.argument("site")
@click.argument("name")
@click.argument("new_name", metavar="NEW-NAME")
@click.pass_obj
def segments_rename(stack: Stack, site: str, name: str, new_name: str) -> None:
    """Rename segment NAME (or its id) of SITE to NEW-NAME; its id and filters stay."""
    from storage import segments as segment_store

    renamed = segment_store.rename_segment(stack.client, site, name, new_name)
    click.echo(f"renamed segment {name!r} of {renamed.site} to {renamed.name!r} (id {renamed.id})")


@segments.command("update")
@click.argument("site")
@click.argument("name")
@click.argument("filters", metavar="FILTERS-JSON")
@click.pass_obj
def segments_update(stack: Stack, site: str, name: str, filters: str) -> None:
    """Replace the filters of segment NAME (or its id) of SITE with FILTERS-JSON."""
    from dashboard.segments import checked
    from storage import segments as segment_store

    parsed = segment_store.parse_filters(filters)
    checked(parsed)
    updated = segment_store.replace_filters(stack.client, site, name, parsed)
    click.echo(f"segment {updated.name!r} of {updated.site} (id {updated.id}) now filters {filters}")


@segments.command("remove")
@click.argument("site")
@click.argument("name")
@click.pass_obj
def segments_remove(stack: Stack, site: str, name: str) -> None:
    """Remove segment NAME (or its id) of SITE."""
    from storage import segments as segment_store

    removed = segment_store.remove_segment(stack.client, site, name)
    click.echo(f"removed segment {removed.name!r} from {removed.site}")


COMMANDS = (segments,)
