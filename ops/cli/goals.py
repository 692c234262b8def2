"""A site's goals: custom events and pages that count as conversions."""

from __future__ import annotations

import click

from ops.cli.context import Stack, console


@click.group()
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
@click.pass_obj
def goals_add(stack: Stack, site: str, event: str, page: str, currency: str) -> None:
    """Count EVENT (a custom event's name) or --page PATTERN as a goal of SITE."""
    from storage import goals as goal_store

    goal = goal_store.make_goal(site, event, page, currency)  # a typo is reported before the store is asked
    added = goal_store.add_goal(stack.client, goal)
    console.print(f"added goal {added.name!r} to {added.site}", highlight=False)


@goals.command("list")
@click.argument("site")
@click.pass_obj
def goals_list(stack: Stack, site: str) -> None:
    """SITE's goals: name, kind, what it matches, currency."""
    from storage import goals as goal_store
    from storage.sites import normalise

    for goal in goal_store.list_goals(stack.client, normalise(site)):
        matched = goal.event_name or goal.page_pattern
        click.echo("\t".join([goal.name, goal.kind, matched, goal.currency]).rstrip())


@goals.command("remove")
@click.argument("site")
@click.argument("name")
@click.pass_obj
def goals_remove(stack: Stack, site: str, name: str) -> None:
    """Stop counting goal NAME of SITE (its events stay in the archive)."""
    from storage import goals as goal_store

    removed = goal_store.remove_goal(stack.client, site, name)
    console.print(f"removed goal {removed.name!r} from {removed.site}", highlight=False)


COMMANDS = (goals,)
