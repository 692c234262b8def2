"""`tally props`: a site's custom properties (storage/custom_properties.py), the allow-list the
dashboard's Properties report offers, as Plausible's site setting and its Sites API
(`GET|PUT|DELETE /api/v1/sites/custom-props`) have it. It never changes what is recorded."""

from __future__ import annotations

import click

from ops.cli.context import Stack, console


@click.group()
def props() -> None:
    """A site's custom properties: the ones its Properties report offers (none listed: all)."""


@props.command("list")
@click.argument("site")
@click.pass_obj
def props_list(stack: Stack, site: str) -> None:
    """SITE's custom properties, one a line (nothing when the report offers every property)."""
    from storage import custom_properties as store
    from storage.sites import registered

    for name in store.list_properties(stack.client, registered(stack.client, site, store.InvalidProperty)):
        click.echo(name)


@props.command("add")
@click.argument("site")
@click.argument("name")
@click.pass_obj
def props_add(stack: Stack, site: str, name: str) -> None:
    """Offer property NAME in SITE's Properties report."""
    from storage import custom_properties as store

    store.clean_name(name)  # a bad name is one line before the store is asked
    added = store.add_property(stack.client, site, name)
    said = "added" if added else "already listed:"
    console.print(f"{said} property {name!r} of {site}", highlight=False)


@props.command("remove")
@click.argument("site")
@click.argument("name")
@click.pass_obj
def props_remove(stack: Stack, site: str, name: str) -> None:
    """Stop offering property NAME in SITE's report (its values stay recorded)."""
    from storage import custom_properties as store

    store.clean_name(name)
    if not store.remove_property(stack.client, site, name):
        raise store.InvalidProperty(f"property: {name!r} is not one of {site}'s custom properties")
    console.print(f"removed property {name!r} of {site}", highlight=False)


COMMANDS = (props,)
