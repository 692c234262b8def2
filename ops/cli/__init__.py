"""The `tally` command line (DESIGN.md, "The tally CLI"): the `main` group, and one module per
command group, each registered here with one line (docs/architecture.md, "Adding a CLI command")."""

from __future__ import annotations

from importlib.metadata import entry_points

import click

from ops.cli import (
    accounts,
    alerts,
    annotate,
    channels,
    data,
    funnels,
    goals,
    mcp,
    props,
    reports,
    segments,
    share,
    sites,
    stack,
    stats,
    whatif,
)
from ops.cli.context import Stack
from ops.cli_errors import TallyGroup


@click.group(cls=TallyGroup)
@click.pass_context
def main(ctx: click.Context) -> None:
    """Tally: self-hosted, real-time web analytics on an event log."""
    ctx.ensure_object(Stack)  # settings and store client, made when a command first asks


# Each module's COMMANDS, what it adds to `tally` (its group, or its top-level commands); a new
# group is a new module and one more name here.
MODULES = (
    stack,
    sites,
    goals,
    props,
    annotate,
    channels,
    accounts,
    alerts,
    reports,
    segments,
    funnels,
    share,
    data,
    whatif,
    stats,
    mcp,
)
for module in MODULES:
    for command in module.COMMANDS:
        main.add_command(command)
# Commands other packages register themselves (pyproject.toml, `tally.commands`: `tally bench`,
# `tally loadgen`), so that this package imports none of them.
for command in entry_points(group="tally.commands"):
    main.add_command(command.load(), command.name)
