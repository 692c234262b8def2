"""Team accounts (`tally users`): members and their roles per site, invitations, API keys, the
audit log."""

from __future__ import annotations

import click

from ops.cli.context import Stack
from ops.cli_errors import TallyGroup


@click.group(cls=TallyGroup)
def users() -> None:
    """Team accounts: roles per site (owner, admin, viewer), API keys, the audit log. The
    operator's password stays the first owner of every site (as TALLY_OWNER_EMAIL)."""


def _role_option(default: str | None = None):  # type: ignore[no-untyped-def]
    return click.option(
        "--role",
        required=default is None,
        default=default,
        help="owner (everything, incl. users), admin (settings, goals, shares), viewer (read-only).",
    )


@users.command("invite")
@click.argument("email")
@click.option("--site", required=True, help="The site the invitee gets a role on.")
@_role_option()
@click.pass_obj
def users_invite(stack: Stack, email: str, site: str, role: str) -> None:
    """Print a one-time invitation link (7 days) for EMAIL to SITE with ROLE; no mail is sent."""
    from dashboard import invitations
    from storage import users as accounts

    email, role = accounts.clean_email(email), accounts.clean_role(role)  # before the store is asked
    settings = stack.settings
    base = invitations.dashboard_url(settings)
    made = invitations.invite(settings, stack.client, _operator(stack), email, site, role, base)
    click.echo(made.link)
    click.echo(
        f"invitation for {email} ({role}): send them the link; it works once, for 7 days, and is not "
        f"shown again; behind a TLS proxy use its address instead of {base}",
        err=True,
    )


def _operator(stack: Stack):  # type: ignore[no-untyped-def]
    """The operator at the CLI, as the audit log names them (TALLY_OWNER_EMAIL)."""
    from storage import users as accounts

    return accounts.Actor(stack.settings.owner_email, is_operator=True)


@users.group("invites", cls=TallyGroup, invoke_without_command=True)
@click.option("--site", default=None, help="Only this site's invitations.")
@click.pass_context
def users_invites(context: click.Context, site: str | None) -> None:
    """Waiting invitations: id, email, site, role, status (pending: waits for your approval;
    open: its link is out), who invited, expiry. Subcommands approve and revoke them."""
    if context.invoked_subcommand is not None:
        return
    from storage import users as accounts

    stack: Stack = context.obj
    for invite in accounts.list_invites(stack.client, site):
        fields = [invite.id, invite.email, invite.site, invite.role, invite.status, invite.inviter]
        click.echo("\t".join([*fields, f"{invite.expires_at:%Y-%m-%d %H:%M}"]))


@users_invites.command("approve")
@click.argument("invite_id", metavar="ID")
@click.pass_obj
def invites_approve(stack: Stack, invite_id: str) -> None:
    """Approve pending invitation ID (an owner's, to an address with no account, made with no
    SMTP server): print its link, for you to send to the address yourself."""
    from dashboard import invitations
    from storage import users as accounts

    settings = stack.settings
    approved, token = accounts.approve(stack.client, _operator(stack), invite_id)
    click.echo(f"{invitations.dashboard_url(settings)}{invitations.INVITE_PATH}{token}")
    click.echo(
        f"approved the invitation of {approved.email} to {approved.site} ({approved.role}, invited by "
        f"{approved.inviter}): send the link to that address only; it works once, for 7 days",
        err=True,
    )


@users_invites.command("revoke")
@click.argument("invite_id", metavar="ID")
@click.pass_obj
def invites_revoke(stack: Stack, invite_id: str) -> None:
    """Revoke waiting invitation ID: its link stops working."""
    from storage import users as accounts

    revoked = accounts.revoke(stack.client, _operator(stack), invite_id)
    click.echo(f"revoked the invitation of {revoked.email} to {revoked.site}")


@users.command("list")
@click.option("--site", default=None, help="Only this site's members.")
@click.pass_obj
def users_list(stack: Stack, site: str | None) -> None:
    """Members: email, site, role (the operator's password is the first owner of every site)."""
    from storage import users as accounts

    settings = stack.settings
    click.echo(f"{settings.owner_email}\t{site or '*'}\towner (the operator's password)")
    for email, member_site, role in accounts.list_users(stack.client, site):
        click.echo(f"{email}\t{member_site}\t{role}")


@users.command("role")
@click.argument("email")
@click.option("--site", required=True)
@_role_option()
@click.pass_obj
def users_role(stack: Stack, email: str, site: str, role: str) -> None:
    """Give EMAIL the ROLE on SITE (a member's role changes for pages already open, too)."""
    from storage import users as accounts

    accounts.change_role(stack.client, _operator(stack), email, site, role)
    click.echo(f"{accounts.clean_email(email)} is {role} of {site}")


@users.command("remove")
@click.argument("email")
@click.option("--site", default=None, help="Only take the role on this site away.")
@click.pass_obj
def users_remove(stack: Stack, email: str, site: str | None) -> None:
    """Remove EMAIL's account (its sessions end, its API keys are revoked), or its role on --site."""
    from storage import users as accounts

    accounts.remove_member(stack.client, _operator(stack), email, site)
    click.echo(f"removed {accounts.clean_email(email)}{f' from {site}' if site else ''}")


@users.command("audit")
@click.option("--limit", default=50, type=click.IntRange(1, 10_000), help="How many entries (newest first).")
@click.option("--site", default=None, help="Only the entries about this site (as its owners see them).")
@click.pass_obj
def users_audit(stack: Stack, limit: int, site: str | None) -> None:
    """Sign-ins (ok / failed), API key use (at most one entry per key per minute) and changes to
    members, invitations and settings; the last field is the site it concerns (- for
    account-level rows)."""
    from storage import users as accounts
    from storage.sites import normalise

    sites = [normalise(site)] if site else None
    for entry in accounts.audit(stack.client, sites, limit=limit):
        fields = [
            f"{entry.ts:%Y-%m-%d %H:%M:%S}",
            entry.action,
            entry.email,
            entry.key_id or "-",
            entry.outcome,
        ]
        click.echo("\t".join([*fields, entry.address or "-", entry.detail, entry.site or "-"]))


@users.group("keys", cls=TallyGroup)
def users_keys() -> None:
    """Members' API keys, limited to sites: read-only, or --scope manage (their role's settings)."""


@users_keys.command("create")
@click.argument("email")
@click.option("--site", "sites", multiple=True, required=True, help="A site the key may read (repeatable).")
@click.option("--label", default="", help="What the key is for.")
@click.option(
    "--scope",
    type=click.Choice(["read", "manage"]),
    default="read",
    show_default=True,
    help="read: the stats API only; manage: also the settings and accounts API, as EMAIL's role allows.",
)
@click.pass_obj
def keys_create(stack: Stack, email: str, sites: tuple[str, ...], label: str, scope: str) -> None:
    """Create a key for EMAIL; it is printed once."""
    from storage import users as accounts

    key, token = accounts.create_key(stack.client, email, list(sites), label, scope)
    click.echo(token)
    click.echo(
        f"key {key.id} of {key.email} for {', '.join(key.sites)} ({key.scope}): copy it now, "
        "it is not shown again",
        err=True,
    )


@users_keys.command("list")
@click.argument("email")
@click.pass_obj
def keys_list(stack: Stack, email: str) -> None:
    """EMAIL's keys: id, sites, created, state, scope, label."""
    from storage import users as accounts

    for key in accounts.list_keys(stack.client, email):
        state = "revoked" if key.revoked else "live"
        fields = [
            key.id,
            ",".join(key.sites),
            f"{key.created_at:%Y-%m-%d %H:%M}",
            state,
            key.scope,
            key.label,
        ]
        click.echo("\t".join(fields).rstrip())


@users_keys.command("revoke")
@click.argument("key_id", metavar="ID")
@click.pass_obj
def keys_revoke(stack: Stack, key_id: str) -> None:
    """Revoke key ID: the next request with it gets a 401."""
    from storage import users as accounts

    key = accounts.revoke_key(stack.client, key_id)
    click.echo(f"revoked {key.id} ({key.email})")


COMMANDS = (users,)
