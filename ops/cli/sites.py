"""The sites Tally accepts events for: register, time zone, visitor identity, remove, and the
traffic each one does not count (exclusions)."""

from __future__ import annotations

import click

from ops.cli.context import Stack, console
from ops.cli_errors import UserError

# Who the audit row names for the CLI: whoever runs it has the stack's files, the operator.
OPERATOR = "operator (cli)"


@click.group()
def sites() -> None:
    """The sites Tally accepts events for."""


@sites.command("add")
@click.argument("domain")
@click.option(
    "--timezone", "timezone", help="IANA time zone its days start in, e.g. Europe/Berlin (default UTC)."
)
@click.pass_obj
def sites_add(stack: Stack, domain: str, timezone: str | None) -> None:
    """Accept events for DOMAIN (as in data-site="DOMAIN")."""
    from storage import sites as registry

    domain = registry.normalise(domain)  # a typo is reported before the store is asked
    if timezone is not None:
        timezone = registry.checked_timezone(timezone)
    added = registry.add_site(stack.client, domain, timezone)
    console.print(f'added {added}: embed <script defer data-site="{added}" src=".../tracker.js"></script>')


@sites.command("timezone")
@click.argument("domain")
@click.argument("zone")
@click.pass_obj
def sites_timezone(stack: Stack, domain: str, zone: str) -> None:
    """Set DOMAIN's time zone (IANA name, e.g. Europe/Berlin): where its days, weeks and months start."""
    from storage import sites as registry

    domain, zone = registry.normalise(domain), registry.checked_timezone(zone)
    if not registry.set_timezone(stack.client, domain, zone):
        raise UserError(f"{domain} is not registered (see 'tally sites list')")
    console.print(f"{domain}: days start at midnight {zone}")


@sites.command("identity")
@click.argument("domain")
@click.option(
    "--rotation",
    default=None,
    help="How long a visitor id lives: daily (default), weekly or monthly. Without it: the one in force.",
)
@click.pass_obj
def sites_identity(stack: Stack, domain: str, rotation: str | None) -> None:
    """Show or set how long DOMAIN's visitor ids live (docs/privacy.md): daily (a visitor is
    recognisable within a UTC day), weekly (an ISO week) or monthly (a calendar month)."""
    from storage import site_identity
    from storage import sites as registry

    domain = registry.normalise(domain)  # a typo is reported before the store is asked
    if rotation is None:
        if domain not in registry.list_sites(stack.client):
            raise UserError(f"{domain} is not registered (see 'tally sites list')")
        history = site_identity.identity_history(stack.client, domain)
        since = history[-1].since
        click.echo(
            f"{domain}: visitor ids rotate {history[-1].rotation}"
            + (f" since {since:%Y-%m-%d %H:%M} UTC" if since else "")
        )
        return
    chosen = site_identity.checked_rotation(rotation)
    if not site_identity.set_rotation(stack.client, domain, chosen, actor=OPERATOR):
        raise UserError(f"{domain} is not registered (see 'tally sites list')")
    console.print(f"{domain}: visitor ids rotate {chosen} from now on ({PERIODS[chosen]})")


# What a visitor id's lifetime means, in the CLI's answer.
PERIODS = {
    "daily": "a visitor is recognised within one UTC day",
    "weekly": "a visitor is recognised within one ISO week, Monday to Sunday UTC",
    "monthly": "a visitor is recognised within one calendar month UTC",
}


@sites.command("list")
@click.pass_obj
def sites_list(stack: Stack) -> None:
    """The registered sites and their time zones (tab-separated)."""
    from storage import sites as registry

    for domain, zone in registry.list_timezones(stack.client):
        click.echo(f"{domain}\t{zone}")


@sites.command("remove")
@click.argument("domain")
@click.option(
    "--erase-events",
    is_flag=True,
    help="Also erase its events: the archive's rows and every figure derived from them (asks first).",
)
@click.option("--yes", is_flag=True, help="Do not ask for the domain before erasing.")
@click.pass_obj
def sites_remove(stack: Stack, domain: str, erase_events: bool, yes: bool) -> None:
    """Stop accepting events for DOMAIN (its data stays, unless --erase-events: then also of a
    DOMAIN removed earlier)."""
    from storage import erasures, users
    from storage import sites as registry

    domain = registry.normalise(domain)
    registered = domain in registry.list_sites(stack.client)
    if not registered and not erase_events:
        raise UserError(f"{domain} is not registered (see 'tally sites list')")
    # An unregistered site may still be erased: one removed earlier with its events kept.
    if erase_events and not yes:
        typed = click.prompt(
            f"This erases every archived event of {domain} and every figure derived from them; "
            "it cannot be undone. Type the domain to confirm",
            default="",
            show_default=False,
        )
        if typed.strip().lower() != domain:
            raise UserError(f"not confirmed: nothing removed ({typed.strip()[:100]!r} is not {domain})")
    if registered:
        registry.remove_site(stack.client, domain)
    if not erase_events:
        console.print(f"removed {domain}")
        return
    # After the registry lost the site: every event the collector took for it came before the cutoff.
    erased = erasures.erase_site(stack.client, domain, OPERATOR)
    detail = f"{domain}: removed with 'tally sites remove'; events erased: {erasures.summary(erased)}"
    users.record(stack.client, "site_removed", OPERATOR, "ok", detail=detail, site=domain)
    console.print(f"removed {domain}; {erasures.summary(erased)}")


_EXCLUSION_OPTIONS = [
    click.option("--ip", "ips", multiple=True, help="A client IP or CIDR range, v4 or v6 (10.0.0.0/8)."),
    click.option(
        "--path", "paths", multiple=True, help='A page path pattern, * any characters ("/admin/*").'
    ),
    click.option("--country", "countries", multiple=True, help="An ISO 3166 two-letter country code (DE)."),
]


def exclusion_options(command):  # type: ignore[no-untyped-def]
    for option in reversed(_EXCLUSION_OPTIONS):
        command = option(command)
    return command


@sites.command("exclude")
@click.argument("site")
@exclusion_options
@click.pass_obj
def sites_exclude(
    stack: Stack, site: str, ips: tuple[str, ...], paths: tuple[str, ...], countries: tuple[str, ...]
) -> None:
    """Stop counting SITE's traffic from --ip ranges, to --path patterns or from --country codes
    (each repeatable). Applied by the collector within seconds; the archive never holds it."""
    from storage import exclusions as store

    wanted = store.make_exclusions(site, list(ips), list(paths), list(countries))  # checked before the store
    store.add_exclusions(stack.client, wanted)
    for exclusion in wanted:
        click.echo(f"excluded {exclusion.kind} {exclusion.value} from {exclusion.site}")


@sites.command("unexclude")
@click.argument("site")
@exclusion_options
@click.pass_obj
def sites_unexclude(
    stack: Stack, site: str, ips: tuple[str, ...], paths: tuple[str, ...], countries: tuple[str, ...]
) -> None:
    """Count SITE's traffic from these --ip, --path, --country again (from now on)."""
    from storage import exclusions as store

    wanted = store.make_exclusions(site, list(ips), list(paths), list(countries))
    missing = store.remove_exclusions(stack.client, wanted)
    if missing:
        names = ", ".join(f"{e.kind} {e.value}" for e in missing)
        raise UserError(f"not excluded from {wanted[0].site}: {names} (see 'tally sites exclusions {site}')")
    for exclusion in wanted:
        click.echo(f"removed exclusion {exclusion.kind} {exclusion.value} from {exclusion.site}")


@sites.command("exclusions")
@click.argument("site")
@click.pass_obj
def sites_exclusions(stack: Stack, site: str) -> None:
    """SITE's exclusions, one per line: kind (ip, path, country) and value."""
    from storage import exclusions as store

    for exclusion in store.list_exclusions(stack.client, site):
        click.echo(f"{exclusion.kind}\t{exclusion.value}")


COMMANDS = (sites,)
