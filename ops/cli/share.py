"""Read-only dashboard links to one site (`tally share`)."""

from __future__ import annotations

import sys

import click
from rich.table import Table

from ops.cli.context import Stack, console
from ops.cli_errors import TallyGroup, UserError


class ShareGroup(TallyGroup):
    """`tally share SITE` creates; `list` and `revoke` are subcommands (a site is never named so:
    it has a dot)."""

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["create", *args]
        return super().resolve_command(ctx, args)


@click.group(cls=ShareGroup)
def share() -> None:
    """Read-only dashboard links to one site: `tally share SITE [--label L] [--password]`."""


@share.command("create")
@click.argument("site")
@click.option("--label", default="", help="Who or what the link is for (shown in lists).")
@click.option(
    "--password", "ask_password", is_flag=True, help="Ask for a password (prompt, or a line on stdin)."
)
@click.pass_obj
def share_create(stack: Stack, site: str, label: str, ask_password: bool) -> None:
    """Create a read-only link to SITE's dashboard; the URL is shown only now."""
    from storage import shared_links
    from storage.sites import normalise

    site = normalise(site)  # a typo is reported before the store is asked
    password = read_new_password() if ask_password else None
    settings = stack.settings
    created = shared_links.create_link(stack.client, site, label, password)
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
@click.pass_obj
def share_list(stack: Stack, site: str) -> None:
    """SITE's shared links: id, created, label, password, state."""
    from storage import shared_links

    links = shared_links.list_links(stack.client, site)
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
@click.pass_obj
def share_revoke(stack: Stack, site: str, link_id: str) -> None:
    """Revoke SITE's link ID: it stops working at once, also for pages already open."""
    from storage import shared_links

    shared_links.revoke_link(stack.client, site, link_id)
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


COMMANDS = (share,)
