"""Definitions versions and trying a change before making it (`tally definitions`, `tally whatif`):
session gap and engaged-bounce replayed into side tables, goals and channel rules compared at
read time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click

from ops.cli.context import Stack, console, progress
from ops.cli_errors import TallyGroup, UserError


@click.command()
@click.pass_obj
def definitions(stack: Stack) -> None:
    """The numbered definitions versions (session gap, engaged-bounce threshold, …), the current
    one marked; says which TALLY_* settings differ from it (the stored version applies)."""
    from ops.whatif_output import version_lines
    from storage import definitions as stored
    from storage.schema import apply_migrations

    settings = stack.settings
    apply_migrations(settings)
    client = stack.client
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


@click.group(cls=TallyGroup, invoke_without_command=True)
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
    from storage.queries import questions
    from storage.queries.whatif import compare

    if swap and discard:
        raise UserError("--swap and --discard: choose one")
    if by not in queries.SESSION_DIMENSIONS:  # before a replay of the whole log, not after
        raise UserError(f"--by: one of {', '.join(sorted(queries.SESSION_DIMENSIONS))} (got {by!r})")
    stack: Stack = ctx.obj
    settings = stack.settings
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
        current, proposed = stored.current(stack.client, settings), stored.get(stack.client, number)
    client = stack.client
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
@click.pass_obj
def whatif_rollback(stack: Stack) -> None:
    """Swap the version the last swap replaced back in (its tables catch up on the log)."""
    from ops.local import whatif as local

    previous = local.rollback(stack.settings, progress)
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
@click.pass_obj
def whatif_goals(
    stack: Stack,    site: str, add_events: tuple[str, ...], add_pages: tuple[str, ...], currency: str,
    remove_names: tuple[str, ...], period: str | None, start: datetime | None, end: datetime | None,
    apply: bool,
) -> None:  # fmt: skip
    """SITE's goals now and as proposed, side by side over a range: conversions (visitors,
    events, conversion rate, revenue). Goals apply at read time: nothing is replayed."""
    from ops.whatif_output import goal_comparison_lines
    from storage import definitions as stored
    from storage import goals as goal_store
    from storage.queries import questions
    from storage.queries.whatif import compare_goals
    from storage.sites import normalise

    site = normalise(site)
    added = [goal_store.make_goal(site, name, "", currency) for name in add_events]
    added += [goal_store.make_goal(site, "", pattern, currency) for pattern in add_pages]
    if not added and not remove_names:
        raise UserError("--add, --add-page or --remove: name the goals proposed")
    first, last = _days(period, start, end)
    client = stack.client
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
@click.pass_obj
def whatif_channels(
    stack: Stack,    site: str, rules: tuple[str, ...], dropped: tuple[str, ...], period: str | None,
    start: datetime | None, end: datetime | None, apply_rules: bool,
) -> None:  # fmt: skip
    """SITE's channel breakdown under its current rules and under proposed ones, side by side, and
    the sources that change channel: read at query time (channels are derived when read), no replay."""
    from ops.whatif_output import print_channel_comparison
    from storage import channel_rules as store
    from storage.queries import questions
    from storage.queries.channels import compare_rules
    from storage.sites import registered

    changes = [store.make_rule(*_proposed_rule(text)) for text in rules]
    if not changes and not dropped:
        raise UserError("--rule SOURCE=CHANNEL or --drop SOURCE is needed")
    first, last = _days(period, start, end)
    client = stack.client
    site = registered(client, site, UserError)
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


COMMANDS = (
    definitions,
    whatif,
)
