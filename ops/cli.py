"""The `tally` command line (DESIGN.md, "The tally CLI")."""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from importlib.metadata import entry_points
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from ops import stats_cli
from ops.cli_errors import TallyGroup, UserError
from tally.clock import as_utc
from tally.settings import Settings

console = Console()


def current_settings() -> Settings:
    """The user's settings as the stack in $TALLY_HOME runs them (a cluster: its brokers, its master)."""
    from ops.local.stack import current_settings as as_running

    return as_running(Settings())


@click.group(cls=TallyGroup)
def main() -> None:
    """Tally: self-hosted, real-time web analytics on an event log."""


@main.command()
@click.option("-d", "detach", is_flag=True, help="Return once every component is healthy.")
@click.option("--demo", is_flag=True, help="Also run demo traffic against the collector.")
@click.option(
    "--cluster",
    "with_cluster",
    is_flag=True,
    help="Three Kafka brokers, a Spark master and two workers, two collectors, two archivers "
    "(ports from TALLY_CLUSTER_BASE_PORT on; docs/operations.md).",
)
def up(detach: bool, demo: bool, with_cluster: bool) -> None:
    """Start every local component in order, wait until healthy, print the URLs."""
    from ops.local import cluster, stack

    settings = Settings()
    progress = lambda line: console.print(line, highlight=False)  # noqa: E731 - a one-line callback
    stack.up(settings, demo=demo, progress=progress, with_cluster=with_cluster)
    settings = stack.current_settings(settings)  # a cluster's ports: as it stored them
    console.print(
        f"dashboard  http://127.0.0.1:{settings.dashboard_port}/  (api key in {settings.home_dir}/api_key)"
    )
    collector_ports = (
        cluster.layout(settings).collector_ports(settings) if with_cluster else [settings.collector_port]
    )
    for port in collector_ports:
        console.print(f"collector  http://127.0.0.1:{port}/api/event")
    console.print(f"logs       {settings.logs_dir}")
    if detach:
        return
    console.print("running in the foreground: Ctrl-C stops everything")
    stopped = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopped.set())
    stopped.wait()
    console.print("stopping…")
    stack.down(settings)


@main.command()
def down() -> None:
    """Stop every component; keep the data."""
    from ops.local import stack

    stack.down(Settings())
    console.print("stopped")


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(as_json: bool) -> None:
    """Health of each component; exits 1 if any is down."""
    from ops.local import stack

    statuses = stack.status(Settings())
    if as_json:
        click.echo(json.dumps([s.__dict__ for s in statuses], indent=2))
    else:
        table = Table("component", "state", "healthy", "pid", "port", "detail")
        for s in statuses:
            table.add_row(
                s.name,
                s.state,
                "yes" if s.healthy else "[red]no[/red]",
                str(s.pid or "-"),
                str(s.port or "-"),
                s.detail,
            )
        console.print(table)
    sys.exit(0 if all(s.healthy for s in statuses) else 1)


@main.command()
def init() -> None:
    """Create the Kafka topics and apply the ClickHouse migrations (idempotent)."""
    from storage.schema import apply_migrations
    from tally.topics import ensure_topics_sync

    settings = current_settings()
    created = ensure_topics_sync(settings)
    applied = apply_migrations(settings)
    console.print(f"topics created: {created or 'none'}; migrations applied: {applied or 'none'}")


@main.group()
def sites() -> None:
    """The sites Tally accepts events for."""


@sites.command("add")
@click.argument("domain")
@click.option(
    "--timezone", "timezone", help="IANA time zone its days start in, e.g. Europe/Berlin (default UTC)."
)
def sites_add(domain: str, timezone: str | None) -> None:
    """Accept events for DOMAIN (as in data-site="DOMAIN")."""
    from storage import sites as registry
    from storage.client import connect

    domain = registry.normalise(domain)  # a typo is reported before the store is asked
    if timezone is not None:
        timezone = registry.checked_timezone(timezone)
    added = registry.add_site(connect(current_settings()), domain, timezone)
    console.print(f'added {added}: embed <script defer data-site="{added}" src=".../tracker.js"></script>')


@sites.command("timezone")
@click.argument("domain")
@click.argument("zone")
def sites_timezone(domain: str, zone: str) -> None:
    """Set DOMAIN's time zone (IANA name, e.g. Europe/Berlin): where its days, weeks and months start."""
    from storage import sites as registry
    from storage.client import connect

    domain, zone = registry.normalise(domain), registry.checked_timezone(zone)
    if not registry.set_timezone(connect(current_settings()), domain, zone):
        raise UserError(f"{domain} is not registered (see 'tally sites list')")
    console.print(f"{domain}: days start at midnight {zone}")


@sites.command("list")
def sites_list() -> None:
    """The registered sites and their time zones (tab-separated)."""
    from storage import sites as registry
    from storage.client import connect

    for domain, zone in registry.list_timezones(connect(current_settings())):
        click.echo(f"{domain}\t{zone}")


@sites.command("remove")
@click.argument("domain")
def sites_remove(domain: str) -> None:
    """Stop accepting events for DOMAIN (its data stays)."""
    from storage import sites as registry
    from storage.client import connect

    domain = registry.normalise(domain)
    if not registry.remove_site(connect(current_settings()), domain):
        raise UserError(f"{domain} is not registered (see 'tally sites list')")
    console.print(f"removed {domain}")


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
def sites_exclude(
    site: str, ips: tuple[str, ...], paths: tuple[str, ...], countries: tuple[str, ...]
) -> None:
    """Stop counting SITE's traffic from --ip ranges, to --path patterns or from --country codes
    (each repeatable). Applied by the collector within seconds; the archive never holds it."""
    from storage import exclusions as store
    from storage.client import connect

    wanted = store.make_exclusions(site, list(ips), list(paths), list(countries))  # checked before the store
    store.add_exclusions(connect(current_settings()), wanted)
    for exclusion in wanted:
        click.echo(f"excluded {exclusion.kind} {exclusion.value} from {exclusion.site}")


@sites.command("unexclude")
@click.argument("site")
@exclusion_options
def sites_unexclude(
    site: str, ips: tuple[str, ...], paths: tuple[str, ...], countries: tuple[str, ...]
) -> None:
    """Count SITE's traffic from these --ip, --path, --country again (from now on)."""
    from storage import exclusions as store
    from storage.client import connect

    wanted = store.make_exclusions(site, list(ips), list(paths), list(countries))
    missing = store.remove_exclusions(connect(current_settings()), wanted)
    if missing:
        names = ", ".join(f"{e.kind} {e.value}" for e in missing)
        raise UserError(f"not excluded from {wanted[0].site}: {names} (see 'tally sites exclusions {site}')")
    for exclusion in wanted:
        click.echo(f"removed exclusion {exclusion.kind} {exclusion.value} from {exclusion.site}")


@sites.command("exclusions")
@click.argument("site")
def sites_exclusions(site: str) -> None:
    """SITE's exclusions, one per line: kind (ip, path, country) and value."""
    from storage import exclusions as store
    from storage.client import connect

    for exclusion in store.list_exclusions(connect(current_settings()), site):
        click.echo(f"{exclusion.kind}\t{exclusion.value}")


@main.group()
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
def goals_add(site: str, event: str, page: str, currency: str) -> None:
    """Count EVENT (a custom event's name) or --page PATTERN as a goal of SITE."""
    from storage import goals as goal_store
    from storage.client import connect

    goal = goal_store.make_goal(site, event, page, currency)  # a typo is reported before the store is asked
    added = goal_store.add_goal(connect(current_settings()), goal)
    console.print(f"added goal {added.name!r} to {added.site}", highlight=False)


@goals.command("list")
@click.argument("site")
def goals_list(site: str) -> None:
    """SITE's goals: name, kind, what it matches, currency."""
    from storage import goals as goal_store
    from storage.client import connect
    from storage.sites import normalise

    for goal in goal_store.list_goals(connect(current_settings()), normalise(site)):
        matched = goal.event_name or goal.page_pattern
        click.echo("\t".join([goal.name, goal.kind, matched, goal.currency]).rstrip())


@goals.command("remove")
@click.argument("site")
@click.argument("name")
def goals_remove(site: str, name: str) -> None:
    """Stop counting goal NAME of SITE (its events stay in the archive)."""
    from storage import goals as goal_store
    from storage.client import connect

    removed = goal_store.remove_goal(connect(current_settings()), site, name)
    console.print(f"removed goal {removed.name!r} from {removed.site}", highlight=False)


@main.group()
def channels() -> None:
    """A site's channel rules: sources that belong to a channel of the owner's choosing,
    checked in order before the default grouping (GA4's)."""


@channels.command("add")
@click.argument("site")
@click.option("--source", required=True, help="A source name or domain (partner.io: subdomains match too).")
@click.option("--channel", required=True, help="A default channel (Affiliates) or a name of your own.")
@click.option("--medium", default="", help="Only sessions with this utm_medium (default: any).")
def channels_add(site: str, source: str, channel: str, medium: str) -> None:
    """Count SITE's sessions from --source [with --medium] in --channel (checked after its other rules)."""
    from storage import channel_rules as store
    from storage.client import connect

    rule = store.make_rule(source, channel, medium)  # a typo is reported before the store is asked
    added = store.add_rule(connect(current_settings()), site, rule)
    console.print(
        f"added rule {added.position}: {rule.source} -> {rule.channel} on {added.site}", highlight=False
    )


@channels.command("list")
@click.argument("site")
def channels_list(site: str) -> None:
    """SITE's rules in the order they are checked: source, channel, medium (empty for any)."""
    from storage import channel_rules as store
    from storage.client import connect
    from storage.sites import normalise

    for rule in store.list_rules(connect(current_settings()), normalise(site)):
        click.echo("\t".join([rule.source, rule.channel, rule.medium]).rstrip())


@channels.command("remove")
@click.argument("site")
@click.option("--source", required=True, help="The rule's source.")
@click.option("--medium", default="", help="The rule's medium, if it has one.")
def channels_remove(site: str, source: str, medium: str) -> None:
    """Remove SITE's rule for --source [and --medium]: its sessions fall back to the other rules."""
    from storage import channel_rules as store
    from storage.client import connect
    from storage.sites import normalise

    removed = store.remove_rule(connect(current_settings()), site, source, medium)
    console.print(
        f"removed rule {removed.source} -> {removed.channel} from {normalise(site)}", highlight=False
    )


@main.group(cls=TallyGroup)
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
def users_invite(email: str, site: str, role: str) -> None:
    """Print a one-time invitation link (7 days) for EMAIL to SITE with ROLE; no mail is sent."""
    from dashboard import invitations
    from storage import users as accounts
    from storage.client import connect

    email, role = accounts.clean_email(email), accounts.clean_role(role)  # before the store is asked
    settings = current_settings()
    base = invitations.dashboard_url(settings)
    made = invitations.invite(settings, connect(settings), _operator(), email, site, role, base)
    click.echo(made.link)
    click.echo(
        f"invitation for {email} ({role}): send them the link; it works once, for 7 days, and is not "
        f"shown again; behind a TLS proxy use its address instead of {base}",
        err=True,
    )


def _operator():  # type: ignore[no-untyped-def]
    """The operator at the CLI, as the audit log names them (TALLY_OWNER_EMAIL)."""
    from storage import users as accounts

    return accounts.Actor(current_settings().owner_email, is_operator=True)


@users.group("invites", cls=TallyGroup, invoke_without_command=True)
@click.option("--site", default=None, help="Only this site's invitations.")
@click.pass_context
def users_invites(context: click.Context, site: str | None) -> None:
    """Waiting invitations: id, email, site, role, status (pending: waits for your approval;
    open: its link is out), who invited, expiry. Subcommands approve and revoke them."""
    if context.invoked_subcommand is not None:
        return
    from storage import users as accounts
    from storage.client import connect

    for invite in accounts.list_invites(connect(current_settings()), site):
        fields = [invite.id, invite.email, invite.site, invite.role, invite.status, invite.inviter]
        click.echo("\t".join([*fields, f"{invite.expires_at:%Y-%m-%d %H:%M}"]))


@users_invites.command("approve")
@click.argument("invite_id", metavar="ID")
def invites_approve(invite_id: str) -> None:
    """Approve pending invitation ID (an owner's, to an address with no account, made with no
    SMTP server): print its link, for you to send to the address yourself."""
    from dashboard import invitations
    from storage import users as accounts
    from storage.client import connect

    settings = current_settings()
    approved, token = accounts.approve(connect(settings), _operator(), invite_id)
    click.echo(f"{invitations.dashboard_url(settings)}{invitations.INVITE_PATH}{token}")
    click.echo(
        f"approved the invitation of {approved.email} to {approved.site} ({approved.role}, invited by "
        f"{approved.inviter}): send the link to that address only; it works once, for 7 days",
        err=True,
    )


@users_invites.command("revoke")
@click.argument("invite_id", metavar="ID")
def invites_revoke(invite_id: str) -> None:
    """Revoke waiting invitation ID: its link stops working."""
    from storage import users as accounts
    from storage.client import connect

    revoked = accounts.revoke(connect(current_settings()), _operator(), invite_id)
    click.echo(f"revoked the invitation of {revoked.email} to {revoked.site}")


@users.command("list")
@click.option("--site", default=None, help="Only this site's members.")
def users_list(site: str | None) -> None:
    """Members: email, site, role (the operator's password is the first owner of every site)."""
    from storage import users as accounts
    from storage.client import connect

    settings = current_settings()
    click.echo(f"{settings.owner_email}\t{site or '*'}\towner (the operator's password)")
    for email, member_site, role in accounts.list_users(connect(settings), site):
        click.echo(f"{email}\t{member_site}\t{role}")


@users.command("role")
@click.argument("email")
@click.option("--site", required=True)
@_role_option()
def users_role(email: str, site: str, role: str) -> None:
    """Give EMAIL the ROLE on SITE (a member's role changes for pages already open, too)."""
    from storage import users as accounts
    from storage.client import connect

    accounts.change_role(connect(current_settings()), _operator(), email, site, role)
    click.echo(f"{accounts.clean_email(email)} is {role} of {site}")


@users.command("remove")
@click.argument("email")
@click.option("--site", default=None, help="Only take the role on this site away.")
def users_remove(email: str, site: str | None) -> None:
    """Remove EMAIL's account (its sessions end, its API keys are revoked), or its role on --site."""
    from storage import users as accounts
    from storage.client import connect

    accounts.remove_member(connect(current_settings()), _operator(), email, site)
    click.echo(f"removed {accounts.clean_email(email)}{f' from {site}' if site else ''}")


@users.command("audit")
@click.option("--limit", default=50, type=click.IntRange(1, 10_000), help="How many entries (newest first).")
@click.option("--site", default=None, help="Only the entries about this site (as its owners see them).")
def users_audit(limit: int, site: str | None) -> None:
    """Sign-ins (ok / failed), API key use (at most one entry per key per minute) and changes to
    members, invitations and settings; the last field is the site it concerns (- for
    account-level rows)."""
    from storage import users as accounts
    from storage.client import connect
    from storage.sites import normalise

    sites = [normalise(site)] if site else None
    for entry in accounts.audit(connect(current_settings()), sites, limit=limit):
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
def keys_create(email: str, sites: tuple[str, ...], label: str, scope: str) -> None:
    """Create a key for EMAIL; it is printed once."""
    from storage import users as accounts
    from storage.client import connect

    key, token = accounts.create_key(connect(current_settings()), email, list(sites), label, scope)
    click.echo(token)
    click.echo(
        f"key {key.id} of {key.email} for {', '.join(key.sites)} ({key.scope}): copy it now, "
        "it is not shown again",
        err=True,
    )


@users_keys.command("list")
@click.argument("email")
def keys_list(email: str) -> None:
    """EMAIL's keys: id, sites, created, state, scope, label."""
    from storage import users as accounts
    from storage.client import connect

    for key in accounts.list_keys(connect(current_settings()), email):
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
def keys_revoke(key_id: str) -> None:
    """Revoke key ID: the next request with it gets a 401."""
    from storage import users as accounts
    from storage.client import connect

    key = accounts.revoke_key(connect(current_settings()), key_id)
    click.echo(f"revoked {key.id} ({key.email})")


def rule_options(command: Callable[..., None]) -> Callable[..., None]:
    """A rule's KIND and its options, as `alerts add` and `alerts backtest` both take them."""
    for option in reversed(
        [
            click.argument("kind", type=click.Choice(["pageviews_above", "goal_absent", "event_rate_above"])),
            click.option(
                "--minutes",
                type=int,
                default=1,
                show_default=True,
                help="The window (or absence) in minutes.",
            ),
            click.option(
                "--above", "threshold", type=int, default=0, help="Fire above N events in the window."
            ),
            click.option(
                "--factor", type=float, default=0.0, help="pageviews_above: fire above k x the trailing mean."
            ),
            click.option(
                "--baseline", type=int, default=12, show_default=True, help="Windows in the trailing mean."
            ),
            click.option("--goal", default="", help="goal_absent: the goal's name (see 'tally goals list')."),
            click.option(
                "--event", "event_name", default="", help="event_rate_above: a custom event's name."
            ),
            click.option(
                "--page", "page_pattern", default="", help='event_rate_above: a path pattern ("/500*").'
            ),
        ]
    ):
        command = option(command)
    return command


@main.group()
def alerts() -> None:
    """A site's alert rules: traffic above a bound, a goal gone quiet, an error rate."""


@alerts.command("add")
@click.argument("site")
@rule_options
@click.option("--webhook", required=True, help="The http(s) URL each alert is POSTed to.")
def alerts_add(
    site: str,
    kind: str,
    webhook: str,
    minutes: int,
    threshold: int,
    factor: float,
    baseline: int,
    goal: str,
    event_name: str,
    page_pattern: str,
) -> None:
    """Alert on SITE when KIND's condition holds; each alert is POSTed to --webhook."""
    from storage import alert_rules
    from storage.client import connect

    rule = alert_rules.make_rule(  # a typo is reported before the store is asked
        site=site,
        kind=kind,
        webhook_url=webhook,
        window_minutes=minutes,
        threshold=threshold,
        factor=factor,
        baseline_windows=baseline,
        goal=goal,
        event_name=event_name,
        page_pattern=page_pattern,
    )
    settings = current_settings()
    added = alert_rules.add_rule(connect(settings), rule, private_webhooks=settings.alert_webhook_private)
    console.print(f"added alert rule {added.rule_id} to {added.site}: {added.describe()}", highlight=False)


@alerts.command("backtest")
@click.argument("site")
@rule_options
@click.option(
    "--days", type=int, default=7, show_default=True, help="The history: this many days (at most 31)."
)
@click.option("--until", default="", help="The history's end, ISO-8601 UTC (default: now).")
def alerts_backtest(
    site: str,
    kind: str,
    minutes: int,
    threshold: int,
    factor: float,
    baseline: int,
    goal: str,
    event_name: str,
    page_pattern: str,
    days: int,
    until: str,
) -> None:
    """When a rule would have fired over SITE's history, without saving it (same options as add)."""
    from storage import alert_backtest
    from storage.client import connect

    rule = alert_backtest.backtest_rule(
        site=site,
        kind=kind,
        window_minutes=minutes,
        threshold=threshold,
        factor=factor,
        baseline_windows=baseline,
        goal=goal,
        event_name=event_name,
        page_pattern=page_pattern,
    )
    start, end = alert_backtest.history(days, _utc_time("--until", until) if until else datetime.now(UTC))
    result = alert_backtest.backtest(connect(current_settings()), rule, start, end)
    click.echo(
        f"{rule.describe()}: would have fired {result.total} time{'s' if result.total != 1 else ''} "
        f"from {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC"
    )
    for firing in result.firings:
        mean = f"\tmean {firing.mean:g}" if firing.mean is not None else ""
        click.echo(
            f"{firing.window_start:%Y-%m-%d %H:%M:%S}\t{firing.window_end:%Y-%m-%d %H:%M:%S}"
            f"\t{firing.value:g}\tabove {firing.threshold:g}{mean}"
        )
    if result.total > len(result.firings):
        click.echo(f"(the first {len(result.firings)} of {result.total} listed)")


def _utc_time(option: str, text: str) -> datetime:
    from storage.alert_rules import InvalidRule

    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidRule(f"{option}: an ISO-8601 time such as 2026-11-20T12:00:00Z") from None
    return as_utc(moment)


@alerts.command("list")
@click.argument("site")
def alerts_list(site: str) -> None:
    """SITE's alert rules: id, kind, condition, webhook."""
    from storage import alert_rules
    from storage.client import connect
    from storage.sites import normalise

    for rule in alert_rules.list_rules(connect(current_settings()), normalise(site)):
        click.echo("\t".join([rule.rule_id, rule.kind, rule.describe(), rule.webhook_url]))


@alerts.command("remove")
@click.argument("site")
@click.argument("rule_id", metavar="ID")
def alerts_remove(site: str, rule_id: str) -> None:
    """Stop alert rule ID of SITE (alerts it fired stay listed)."""
    from storage import alert_rules
    from storage.client import connect

    removed = alert_rules.remove_rule(connect(current_settings()), site, rule_id)
    console.print(f"removed alert rule {removed.rule_id} from {removed.site}", highlight=False)


@main.group()
def reports() -> None:
    """Weekly and monthly email reports of a site's numbers, sent through TALLY_SMTP_HOST."""


def frequency_of(weekly: bool, monthly: bool, required: bool) -> str | None:
    if weekly and monthly:
        raise UserError("choose one of --weekly and --monthly (subscribe twice for both)")
    if required and not (weekly or monthly):
        raise UserError("say how often: --weekly or --monthly")
    return "weekly" if weekly else "monthly" if monthly else None


@reports.command("subscribe")
@click.argument("site")
@click.argument("email")
@click.option("--weekly", is_flag=True, help="Last week's report (Monday to Sunday, UTC), each Monday.")
@click.option("--monthly", is_flag=True, help="Last month's report, on the 1st.")
def reports_subscribe(site: str, email: str, weekly: bool, monthly: bool) -> None:
    """Send SITE's weekly or monthly report to EMAIL."""
    from storage import report_subscriptions as subscriptions
    from storage.client import connect
    from storage.sites import normalise

    frequency = frequency_of(weekly, monthly, required=True)
    site, email = normalise(site), subscriptions.checked_email(email)  # typos before the store is asked
    added = subscriptions.subscribe(connect(current_settings()), site, email, frequency)  # type: ignore[arg-type]
    click.echo(f"{added.email} receives the {added.frequency} report of {added.site}")


@reports.command("list")
@click.argument("site", required=False)
def reports_list(site: str | None) -> None:
    """Subscriptions (of SITE, or all): site, email, frequency."""
    from storage import report_subscriptions as subscriptions
    from storage.client import connect

    for subscription in subscriptions.list_subscriptions(connect(current_settings()), site):
        click.echo("\t".join([subscription.site, subscription.email, subscription.frequency]))


@reports.command("unsubscribe")
@click.argument("site")
@click.argument("email")
@click.option("--weekly", is_flag=True, help="Only the weekly report.")
@click.option("--monthly", is_flag=True, help="Only the monthly report.")
def reports_unsubscribe(site: str, email: str, weekly: bool, monthly: bool) -> None:
    """Stop sending SITE's reports (all, or one frequency) to EMAIL."""
    from storage import report_subscriptions as subscriptions
    from storage.client import connect

    frequency = frequency_of(weekly, monthly, required=False)
    ended = subscriptions.unsubscribe(connect(current_settings()), site, email, frequency)  # type: ignore[arg-type]
    for subscription in ended:
        click.echo(
            f"{subscription.email} no longer receives the {subscription.frequency} report "
            f"of {subscription.site}"
        )


@reports.command("send")
def reports_send() -> None:
    """Send every report that is due (a period ended, not sent yet) now; the dashboard's sender
    does the same every TALLY_REPORTS_INTERVAL_S. A report already sent is never sent again."""
    import smtplib

    from dashboard.email_reports import send_due
    from storage.client import connect

    settings = current_settings()
    try:
        sent = send_due(settings, connect(settings), datetime.now(UTC))
    except (smtplib.SMTPException, OSError) as error:
        if isinstance(error, OSError) and error.filename:
            raise
        raise UserError(
            f"the SMTP server at {settings.smtp_host}:{settings.smtp_port} failed: {error}".replace("\n", " ")
        ) from None
    for subscription, period in sent:
        click.echo(f"sent the {subscription.frequency} report of {subscription.site} "
                   f"({period.first} to {period.last}) to {subscription.email}")  # fmt: skip
    if not sent:
        click.echo("no report is due")


@main.group()
def segments() -> None:
    """Saved segments: named filter expressions per site (Plausible's v2 filter syntax)."""


@segments.command("add")
@click.argument("site")
@click.argument("name")
@click.argument("filters", metavar="FILTERS-JSON")
def segments_add(site: str, name: str, filters: str) -> None:
    """Save FILTERS-JSON as segment NAME of SITE, e.g. '[["is", "visit:country", ["DE"]]]'."""
    from dashboard.segments import checked
    from storage import segments as segment_store
    from storage.client import connect
    from storage.sites import normalise

    site, name = normalise(site), segment_store.checked_name(name)
    parsed = segment_store.parse_filters(filters)
    checked(parsed)  # what Tally cannot answer is refused before the store is asked
    added = segment_store.add_segment(connect(current_settings()), site, name, parsed)
    click.echo(
        f'added segment {added.name!r} to {added.site} (id {added.id}: ["is", "segment", [{added.id}]])'
    )


@segments.command("list")
@click.argument("site")
def segments_list(site: str) -> None:
    """SITE's segments: id, name, filters."""
    import json as json_module

    from storage import segments as segment_store
    from storage.client import connect

    for segment in segment_store.list_segments(connect(current_settings()), site):
        click.echo(f"{segment.id}\t{segment.name}\t{json_module.dumps(segment.filters)}")


@segments.command("rename")
@click.argument("site")
@click.argument("name")
@click.argument("new_name", metavar="NEW-NAME")
def segments_rename(site: str, name: str, new_name: str) -> None:
    """Rename segment NAME (or its id) of SITE to NEW-NAME; its id and filters stay."""
    from storage import segments as segment_store
    from storage.client import connect

    renamed = segment_store.rename_segment(connect(current_settings()), site, name, new_name)
    click.echo(f"renamed segment {name!r} of {renamed.site} to {renamed.name!r} (id {renamed.id})")


@segments.command("update")
@click.argument("site")
@click.argument("name")
@click.argument("filters", metavar="FILTERS-JSON")
def segments_update(site: str, name: str, filters: str) -> None:
    """Replace the filters of segment NAME (or its id) of SITE with FILTERS-JSON."""
    from dashboard.segments import checked
    from storage import segments as segment_store
    from storage.client import connect

    parsed = segment_store.parse_filters(filters)
    checked(parsed)
    updated = segment_store.replace_filters(connect(current_settings()), site, name, parsed)
    click.echo(f"segment {updated.name!r} of {updated.site} (id {updated.id}) now filters {filters}")


@segments.command("remove")
@click.argument("site")
@click.argument("name")
def segments_remove(site: str, name: str) -> None:
    """Remove segment NAME (or its id) of SITE."""
    from storage import segments as segment_store
    from storage.client import connect

    removed = segment_store.remove_segment(connect(current_settings()), site, name)
    click.echo(f"removed segment {removed.name!r} from {removed.site}")


@main.group()
def funnels() -> None:
    """Saved funnels: named step lists per site, computed in the background so they open fast."""


@funnels.command("add")
@click.argument("site")
@click.argument("name")
@click.argument("steps", nargs=-1, required=True, metavar="STEP...")
def funnels_add(site: str, name: str, steps: tuple[str, ...]) -> None:
    """Save STEP... (2 to 8: a path such as /product/*, or a custom event's name) as funnel NAME of SITE."""
    from storage import saved_funnels
    from storage.client import connect

    parsed = [saved_funnels.parse_step(step) for step in steps]
    added = saved_funnels.add_funnel(connect(current_settings()), site, name, parsed)
    click.echo(f"added funnel {added.name!r} to {added.site} ({len(added.steps)} steps)")


@funnels.command("list")
@click.argument("site")
def funnels_list(site: str) -> None:
    """SITE's funnels: name, then the steps."""
    from storage import saved_funnels
    from storage.client import connect

    for funnel in saved_funnels.list_funnels(connect(current_settings()), site):
        click.echo("\t".join([funnel.name, *(step.value for step in funnel.steps)]))


@funnels.command("remove")
@click.argument("site")
@click.argument("name")
def funnels_remove(site: str, name: str) -> None:
    """Remove funnel NAME of SITE (its stored days stay until another funnel's steps match them)."""
    from storage import saved_funnels
    from storage.client import connect

    removed = saved_funnels.remove_funnel(connect(current_settings()), site, name)
    click.echo(f"removed funnel {removed.name!r} from {removed.site}")


class ShareGroup(TallyGroup):
    """`tally share SITE` creates; `list` and `revoke` are subcommands (a site is never named so:
    it has a dot)."""

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["create", *args]
        return super().resolve_command(ctx, args)


@main.group(cls=ShareGroup)
def share() -> None:
    """Read-only dashboard links to one site: `tally share SITE [--label L] [--password]`."""


@share.command("create")
@click.argument("site")
@click.option("--label", default="", help="Who or what the link is for (shown in lists).")
@click.option(
    "--password", "ask_password", is_flag=True, help="Ask for a password (prompt, or a line on stdin)."
)
def share_create(site: str, label: str, ask_password: bool) -> None:
    """Create a read-only link to SITE's dashboard; the URL is shown only now."""
    from storage import shared_links
    from storage.client import connect
    from storage.sites import normalise

    site = normalise(site)  # a typo is reported before the store is asked
    password = read_new_password() if ask_password else None
    settings = current_settings()
    created = shared_links.create_link(connect(settings), site, label, password)
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
def share_list(site: str) -> None:
    """SITE's shared links: id, created, label, password, state."""
    from storage import shared_links
    from storage.client import connect

    links = shared_links.list_links(connect(current_settings()), site)
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
def share_revoke(site: str, link_id: str) -> None:
    """Revoke SITE's link ID: it stops working at once, also for pages already open."""
    from storage import shared_links
    from storage.client import connect

    shared_links.revoke_link(connect(current_settings()), site, link_id)
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


@main.command("import")
@click.argument("site")
@click.argument("file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--from", "origin", type=click.Choice(["plausible", "ga4"]), help="Whose export FILE is.")
@click.option("--list", "listing", is_flag=True, help="List the files SITE's imported history holds.")
@click.option("--remove", "removed", metavar="FILE_OR_ID", help="Take one imported file out of the history.")
def import_history(
    site: str, file: Path | None, origin: str | None, listing: bool, removed: str | None
) -> None:
    """Import SITE's history from FILE: Plausible's CSV export (the zip or its CSVs) or a GA4
    CSV export, as daily aggregates; the same file twice changes nothing. With --list, show
    what SITE's imported history holds; with --remove, take a file (its name or id) out of it."""
    from storage import imports
    from storage.client import connect
    from storage.sites import normalise

    site = normalise(site)  # a typo is reported before the file is read
    if listing:
        list_imported(site)
        return
    if removed is not None:
        record = imports.remove_import(connect(current_settings()), site, removed)
        click.echo(f"removed {record.file_name} ({record.first_day} to {record.last_day}) from {site}")
        return
    if file is None or origin is None:
        raise UserError("name the export and whose it is: tally import SITE FILE --from plausible|ga4")
    files = imports.read_files(file, origin)  # type: ignore[arg-type]
    result = imports.import_files(connect(current_settings()), site, files, origin)  # type: ignore[arg-type]
    if result.already:
        click.echo(f"already imported into {site}, unchanged: {', '.join(result.already)}")
    if result.imported:
        first, last = result.days or ("-", "-")
        rows = sum(len(f.rows) for f in result.imported)
        click.echo(
            f"imported {len(result.imported)} file(s) into {site}: {first} to {last}, {rows} daily rows "
            "(shown where reports include imports: API include.imports, the dashboard's marker)"
        )
        if note := result.overlap_note():
            click.echo(note)


def list_imported(site: str) -> None:
    """One line per imported file (name, origin, first and last day, rows, id), then the cut."""
    from storage import imports
    from storage.calendar import zone
    from storage.client import connect
    from storage.sites import site_timezone

    client = connect(current_settings())
    records = imports.list_imports(client, site)
    for record in records:
        click.echo(
            f"{record.file_name}\t{record.origin}\t{record.first_day}\t{record.last_day}\t{record.row_count}"
            f"\t{record.import_id}"
        )
    if not records:
        click.echo(f"nothing imported into {site}")
        return
    native_from = imports.native_first_day(client, site, zone(site_timezone(client, site)))
    if native_from is not None:
        click.echo(f"the site's own events start on {native_from}: imported days from then on are not used")


@main.command()
@click.argument("sql")
@click.option("--format", "output_format", type=click.Choice(["table", "csv", "json"]), default="table")
def query(sql: str, output_format: str) -> None:
    """Read-only SQL on the raw archive (table `events`)."""
    from ops.cli_output import print_result
    from storage import readonly_sql

    try:
        result = readonly_sql.run(current_settings(), sql)
    except readonly_sql.QueryRefused as error:
        refused = UserError(f"query refused: {error}")
        refused.exit_code = 2
        raise refused from None
    print_result(result, output_format, console)
    if result.truncated:
        Console(stderr=True).print(f"[yellow]note:[/yellow] result cut at {readonly_sql.MAX_ROWS} rows")


@main.command()
@click.option("--site", required=True, help="The site whose raw events to export.")
@click.option("--from", "start", required=True, type=click.DateTime(), help="UTC start (inclusive).")
@click.option("--to", "end", required=True, type=click.DateTime(), help="UTC end (exclusive).")
@click.option("--format", "output_format", type=click.Choice(["parquet", "csv"]), default="parquet")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="File to write (default: stdout).")
def export(site: str, start: datetime, end: datetime, output_format: str, output: str | None) -> None:
    """Raw events of one site out of the archive, streamed (bounded memory)."""
    from storage.export import export_events

    target = open(output, "wb") if output else sys.stdout.buffer  # noqa: SIM115 - closed below
    try:
        rows = export_events(
            current_settings(),
            site,
            start.replace(tzinfo=UTC),
            end.replace(tzinfo=UTC),
            output_format,
            target,
        )
    except BaseException:
        if output:  # a failed export leaves no file that looks like a (short) export
            target.close()
            Path(output).unlink(missing_ok=True)
        raise
    finally:
        if output:
            target.close()
    Console(stderr=True).print(f"exported {site}: {rows} events")


@main.command()
@click.option("--force", is_flag=True, help="Go on although the log has expired its oldest events.")
def replay(force: bool) -> None:
    """Rebuild the derived tables from the log. Stops the stream jobs, recomputes every table
    into <table>_replay, swaps them in, and starts the stream jobs again; the dashboard keeps
    reading the old tables until the swap."""
    from ops.local.replay import run_replay

    run_replay(current_settings(), progress=lambda line: console.print(line, highlight=False), force=force)


@main.command()
def definitions() -> None:
    """The numbered definitions versions (session gap, engaged-bounce threshold, …), the current
    one marked; says which TALLY_* settings differ from it (the stored version applies)."""
    from ops.whatif_output import version_lines
    from storage import definitions as stored
    from storage.client import connect
    from storage.schema import apply_migrations

    settings = current_settings()
    apply_migrations(settings)
    client = connect(settings)
    current = stored.current(client, settings)
    for line in version_lines(stored.list_versions(client), current.number):
        click.echo(line)
    for difference in stored.environment_differences(settings, current.definitions):
        console.print(f"ignored: {difference}; change it with `tally whatif`", highlight=False)


def _duration_ms(value: str | None, option: str) -> int | None:
    from storage.definitions import duration_ms

    if value is None:
        return None
    try:
        return duration_ms(value)
    except ValueError as error:
        raise UserError(f"{option}: {error}") from None


@main.group(cls=TallyGroup, invoke_without_command=True)
@click.option("--session-gap", help="Proposed session gap, e.g. 20m, 900s, 1h.")
@click.option("--engaged-bounce", help="Proposed engaged time that ends a bounce, e.g. 5s, 10s.")
@click.option(
    "--from", "start", type=click.DateTime(["%Y-%m-%d"]), help="First UTC day compared (default: 7 days ago)."
)
@click.option(
    "--to", "end", type=click.DateTime(["%Y-%m-%d"]), help="Last UTC day compared (default: today)."
)
@click.option("--site", help="Compare this site (default: the three busiest).")
@click.option(
    "--version",
    "number",
    type=click.IntRange(min=1),
    help="An already built version: compare, swap or discard it.",
)
@click.option(
    "--from-archive", is_flag=True, help="Rebuild from ClickHouse events, not the log (compare only)."
)
@click.option("--swap", is_flag=True, help="Then make the proposed version current.")
@click.option("--discard", is_flag=True, help="Then drop the proposed version's side tables.")
@click.option("--note", default="", help="Why this version (kept with it).")
@click.option(
    "--by",
    default="entry_path",
    help="The breakdown compared: entry_path (default), exit_path, referrer_domain or a utm_ field.",
)
@click.pass_context
def whatif(
    ctx: click.Context, session_gap: str | None, engaged_bounce: str | None, start: datetime | None,
    end: datetime | None, site: str | None, number: int | None, from_archive: bool, swap: bool,
    discard: bool, note: str, by: str,
) -> None:  # fmt: skip
    """Replay the log with changed definitions into side tables and print old and new numbers
    side by side; --swap makes them current, `tally whatif rollback` swaps the previous back."""
    if ctx.invoked_subcommand is not None:
        return
    from ops.local import whatif as local
    from ops.whatif_output import print_comparison
    from storage import definitions as stored
    from storage import queries
    from storage.client import connect
    from storage.queries import questions
    from storage.queries.whatif import compare

    if swap and discard:
        raise UserError("--swap and --discard: choose one")
    if by not in queries.SESSION_DIMENSIONS:  # before a replay of the whole log, not after
        raise UserError(f"--by: one of {', '.join(sorted(queries.SESSION_DIMENSIONS))} (got {by!r})")
    settings = current_settings()
    progress = lambda line: console.print(line, highlight=False)  # noqa: E731 - a one-line callback
    gap_ms, bounce_ms = (
        _duration_ms(session_gap, "--session-gap"),
        _duration_ms(engaged_bounce, "--engaged-bounce"),
    )
    first, last = local.range_or_default(start and start.date(), end and end.date(), datetime.now(UTC).date())
    if number is None:
        changes = {"session_gap_s": gap_ms // 1000} if gap_ms is not None else {}
        changes |= {"engaged_bounce_ms": bounce_ms} if bounce_ms is not None else {}
        if not changes or (gap_ms is not None and (gap_ms < 1000 or gap_ms % 1000)):
            raise UserError(
                "--session-gap (whole seconds, at least 1s) or --engaged-bounce is needed, or --version"
            )
        current, proposed = local.propose(settings, changes, note or "tally whatif")
        progress(f"whatif: recorded version {proposed.number} (current: {current.number})")
        local.build(settings, proposed, first, last, progress, from_archive=from_archive)
    else:
        if gap_ms is not None or bounce_ms is not None or from_archive:
            raise UserError(
                "--version compares a built version: no --session-gap, --engaged-bounce or --from-archive"
            )
        client = connect(settings)
        current, proposed = stored.current(client, settings), stored.get(client, number)
    client = connect(settings)
    q_sites = [site] if site else queries.sites(client)[:3]
    for name in q_sites:
        q = questions.question(name, first, last)
        print_comparison(compare(client, q, current, proposed, by=by), console)
    if swap:
        local.swap_to(settings, proposed.number, progress)
    elif discard:
        local.discard_version(settings, proposed.number)
        progress(f"whatif: version {proposed.number}'s side tables dropped")
    else:
        progress(
            f"whatif: `tally whatif --version {proposed.number} --swap` makes it current, --discard drops it"
        )


@whatif.command("rollback")
def whatif_rollback() -> None:
    """Swap the version the last swap replaced back in (its tables catch up on the log)."""
    from ops.local import whatif as local

    previous = local.rollback(current_settings(), lambda line: console.print(line, highlight=False))
    console.print(f"whatif: rolled back to version {previous}", highlight=False)


@whatif.command("goals")
@click.argument("site")
@click.option("--add", "add_events", multiple=True, help="Propose an event goal (a custom event's name).")
@click.option("--add-page", "add_pages", multiple=True, help='Propose a page goal ("/checkout/*").')
@click.option("--currency", default="", help="The proposed goals count revenue in this currency (EUR).")
@click.option("--remove", "remove_names", multiple=True, help="Propose removing this goal (its name).")
@click.option("--period", help="The last N days up to today, e.g. 30d (default: 7d).")
@click.option("--from", "start", type=click.DateTime(["%Y-%m-%d"]), help="First UTC day compared.")
@click.option("--to", "end", type=click.DateTime(["%Y-%m-%d"]), help="Last UTC day compared (today).")
@click.option("--apply", is_flag=True, help="Then make the proposed goals the site's (a new version).")
def whatif_goals(
    site: str, add_events: tuple[str, ...], add_pages: tuple[str, ...], currency: str,
    remove_names: tuple[str, ...], period: str | None, start: datetime | None, end: datetime | None,
    apply: bool,
) -> None:  # fmt: skip
    """SITE's goals now and as proposed, side by side over a range: conversions (visitors,
    events, conversion rate, revenue). Goals apply at read time: nothing is replayed."""
    from ops.whatif_output import goal_comparison_lines
    from storage import definitions as stored
    from storage import goals as goal_store
    from storage.client import connect
    from storage.queries import questions
    from storage.queries.whatif import compare_goals
    from storage.sites import normalise

    site = normalise(site)
    added = [goal_store.make_goal(site, name, "", currency) for name in add_events]
    added += [goal_store.make_goal(site, "", pattern, currency) for pattern in add_pages]
    if not added and not remove_names:
        raise UserError("--add, --add-page or --remove: name the goals proposed")
    first, last = _days(period, start, end)
    client = connect(current_settings())
    comparison = compare_goals(client, questions.question(site, first, last), added, list(remove_names))
    for line in goal_comparison_lines(comparison):
        click.echo(line)
    if apply:
        goal_store.apply_goals(client, site, added, list(remove_names))
        version = stored.current_or_none(client)
        recorded = f" (definitions version {version.number})" if version else ""
        click.echo(f"whatif: the proposed goals are {site}'s now{recorded}")
    else:
        click.echo("whatif: --apply makes the proposed goals the site's")


def _period_days(period: str) -> int:
    """'30d' -> 30; UserError naming --period otherwise."""
    text = period.strip().lower()
    if not text.endswith("d") or not text[:-1].isdigit() or not 1 <= int(text[:-1]) <= 3660:
        raise UserError(f"--period: {period!r} is not a number of days like 30d")
    return int(text[:-1])


@whatif.command("channels")
@click.argument("site")
@click.option("--rule", "rules", multiple=True, help="A proposed rule SOURCE=CHANNEL (repeatable).")
@click.option("--drop", "dropped", multiple=True, help="Drop the rules for this source (repeatable).")
@click.option("--period", default=None, help="The last N days up to today, e.g. 30d (default: 7d).")
@click.option("--from", "start", type=click.DateTime(["%Y-%m-%d"]), help="First UTC day compared.")
@click.option(
    "--to", "end", type=click.DateTime(["%Y-%m-%d"]), help="Last UTC day compared (default: today)."
)
@click.option("--apply", "apply_rules", is_flag=True, help="Then store the proposed rules as SITE's rules.")
def whatif_channels(
    site: str, rules: tuple[str, ...], dropped: tuple[str, ...], period: str | None,
    start: datetime | None, end: datetime | None, apply_rules: bool,
) -> None:  # fmt: skip
    """SITE's channel breakdown under its current rules and under proposed ones, side by side, and
    the sources that change channel: read at query time (channels are derived when read), no replay."""
    from ops.whatif_output import print_channel_comparison
    from storage import channel_rules as store
    from storage.client import connect
    from storage.queries import questions
    from storage.queries.channels import compare_rules
    from storage.sites import list_sites, normalise

    changes = [store.make_rule(*_proposed_rule(text)) for text in rules]
    if not changes and not dropped:
        raise UserError("--rule SOURCE=CHANNEL or --drop SOURCE is needed")
    first, last = _days(period, start, end)
    client = connect(current_settings())
    site = normalise(site)
    if site not in list_sites(client):
        raise UserError(f"site: {site} is not registered (see 'tally sites list')")
    current = tuple(store.list_rules(client, site))
    proposed = store.propose(list(current), changes, list(dropped))
    q = questions.question(site, first, last)
    print_channel_comparison(compare_rules(client, q, current, proposed), console)
    if apply_rules:
        store.replace_rules(client, site, proposed)
        console.print(f"whatif: {site} now has the {len(proposed)} proposed rules", highlight=False)
    else:
        console.print("whatif: --apply stores the proposed rules", highlight=False)


def _proposed_rule(text: str) -> tuple[str, str]:
    source, sep, channel = text.partition("=")
    if not sep:
        raise UserError(f"--rule: expected SOURCE=CHANNEL, e.g. partner.io=Affiliates (got {text!r})")
    return source, channel


def _days(period: str | None, start: datetime | None, end: datetime | None) -> tuple[datetime, datetime]:
    """[first day, day after the last) in UTC: --period Nd (today included), --from/--to, or by
    default the last 7 days and today (ops/local/whatif.range_or_default)."""
    from ops.local.whatif import range_or_default

    if period is not None and (start or end):
        raise UserError("--period or --from/--to: choose one")
    today = datetime.now(UTC).date()
    first_day = today - timedelta(days=_period_days(period) - 1) if period else start and start.date()
    return range_or_default(first_day, end and end.date(), today)


@main.command()
@click.option("--no-repair", is_flag=True, help="Only report; archive no hole.")
@click.option("--site", default=None, help="Compare the derived tables of this site only.")
@click.option(
    "--full",
    is_flag=True,
    help="Check every archived offset, not only those since the archive was last found whole, "
    "and set the clean marks to what is found (after rows were deleted or restored by hand, or "
    "a second archiver was paused).",
)
def verify(no_repair: bool, site: str | None, full: bool) -> None:
    """Audit the archive against the log (repairing holes) and the derived tables against the
    archive; exits 1 if anything is still wrong. The audit checks each partition from its clean
    mark (the offset below which an earlier audit found it whole) unless --full. A site-day that
    differs only by events the stream jobs have not processed yet, or by late ones (older than
    the allowed lateness, which the archive answers), is listed as explained, not wrong."""
    from storage.archive_audit import AuditUnavailable
    from storage.archive_audit import verify as audit

    try:
        report = audit(current_settings(), fix=not no_repair, site=site, full=full)
    except AuditUnavailable as error:
        raise UserError(str(error)) from None
    for line in report.lines():
        console.print(line, highlight=False, soft_wrap=True)
    sys.exit(0 if report.ok else 1)


# A site's numbers, as the stats API gives them (ops/stats_cli.py).
main.add_command(stats_cli.stats)
main.add_command(stats_cli.realtime)
# Commands other packages register themselves (pyproject.toml, `tally.commands`: `tally bench`,
# `tally loadgen`), so that this package imports none of them.
for command in entry_points(group="tally.commands"):
    main.add_command(command.load(), command.name)

if __name__ == "__main__":
    main(prog_name="tally")  # `python -m ops.cli` speaks as the `tally` it is
