"""A site's channel rules: sources counted in a channel of the owner's choosing."""

from __future__ import annotations

import click

from ops.cli.context import Stack, console


@click.group()
def channels() -> None:
    """A site's channel rules: sources that belong to a channel of the owner's choosing,
    checked in order before the default grouping (GA4's)."""


@channels.command("add")
@click.argument("site")
@click.option("--source", required=True, help="A source name or domain (partner.io: subdomains match too).")
@click.option("--channel", required=True, help="A default channel (Affiliates) or a name of your own.")
@click.option("--medium", default="", help="Only sessions with this utm_medium (default: any).")
@click.pass_obj
def channels_add(stack: Stack, site: str, source: str, channel: str, medium: str) -> None:
    """Count SITE's sessions from --source [with --medium] in --channel (checked after its other rules)."""
    from storage import channel_rules as store

    rule = store.make_rule(source, channel, medium)  # a typo is reported before the store is asked
    added = store.add_rule(stack.client, site, rule)
    console.print(
        f"added rule {added.position}: {rule.source} -> {rule.channel} on {added.site}", highlight=False
    )


@channels.command("list")
@click.argument("site")
@click.pass_obj
def channels_list(stack: Stack, site: str) -> None:
    """SITE's rules in the order they are checked: source, channel, medium (empty for any)."""
    from storage import channel_rules as store
    from storage.sites import normalise

    for rule in store.list_rules(stack.client, normalise(site)):
        click.echo("\t".join([rule.source, rule.channel, rule.medium]).rstrip())


@channels.command("remove")
@click.argument("site")
@click.option("--source", required=True, help="The rule's source.")
@click.option("--medium", default="", help="The rule's medium, if it has one.")
@click.pass_obj
def channels_remove(stack: Stack, site: str, source: str, medium: str) -> None:
    """Remove SITE's rule for --source [and --medium]: its sessions fall back to the other rules."""
    from storage import channel_rules as store
    from storage.sites import normalise

    removed = store.remove_rule(stack.client, site, source, medium)
    console.print(
        f"removed rule {removed.source} -> {removed.channel} from {normalise(site)}", highlight=False
    )


COMMANDS = (channels,)
