"""Saved funnels (`tally funnels`): named step lists per site."""

from __future__ import annotations

import click

from ops.cli.context import Stack


@click.group()
def funnels() -> None:
    """Saved funnels: named step lists per site, computed in the background so they open fast."""


@funnels.command("add")
@click.argument("site")
@click.argument("name")
@click.argument("steps", nargs=-1, required=True, metavar="STEP...")
@click.pass_obj
def funnels_add(stack: Stack, site: str, name: str, steps: tuple[str, ...]) -> None:
    """Save STEP... (2 to 8: a path such as /product/*, or a custom event's name) as funnel NAME of SITE."""
    from storage import saved_funnels

    parsed = [saved_funnels.parse_step(step) for step in steps]
    added = saved_funnels.add_funnel(stack.client, site, name, parsed)
    click.echo(f"added funnel {added.name!r} to {added.site} ({len(added.steps)} steps)")


@funnels.command("list")
@click.argument("site")
@click.pass_obj
def funnels_list(stack: Stack, site: str) -> None:
    """SITE's funnels: name, then the steps."""
    from storage import saved_funnels

    for funnel in saved_funnels.list_funnels(stack.client, site):
        click.echo("\t".join([funnel.name, *(step.value for step in funnel.steps)]))


@funnels.command("remove")
@click.argument("site")
@click.argument("name")
@click.pass_obj
def funnels_remove(stack: Stack, site: str, name: str) -> None:
    """Remove funnel NAME of SITE (its stored days stay until another funnel's steps match them)."""
    from storage import saved_funnels

    removed = saved_funnels.remove_funnel(stack.client, site, name)
    click.echo(f"removed funnel {removed.name!r} from {removed.site}")


COMMANDS = (funnels,)
