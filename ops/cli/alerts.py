"""A site's alert rules (`tally alerts`): add, backtest against history, list, remove."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import click

from ops.cli.context import Stack, console
from tally.clock import as_utc


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


def rule_fields(options: dict[str, Any]) -> dict[str, Any]:
    """`rule_options`' values under the rule's own field names."""
    fields = dict(options)
    fields["window_minutes"] = fields.pop("minutes")
    fields["baseline_windows"] = fields.pop("baseline")
    return fields


@click.group()
def alerts() -> None:
    """A site's alert rules: traffic above a bound, a goal gone quiet, an error rate."""


@alerts.command("add")
@click.argument("site")
@rule_options
@click.option("--webhook", required=True, help="The http(s) URL each alert is POSTed to.")
@click.pass_obj
def alerts_add(stack: Stack, site: str, webhook: str, **options: Any) -> None:
    """Alert on SITE when KIND's condition holds; each alert is POSTed to --webhook."""
    from storage import alert_rules

    # A typo is reported before the store is asked.
    rule = alert_rules.make_rule(site=site, webhook_url=webhook, **rule_fields(options))
    settings = stack.settings
    added = alert_rules.add_rule(stack.client, rule, private_webhooks=settings.alert_webhook_private)
    console.print(f"added alert rule {added.rule_id} to {added.site}: {added.describe()}", highlight=False)


@alerts.command("backtest")
@click.argument("site")
@rule_options
@click.option(
    "--days", type=int, default=7, show_default=True, help="The history: this many days (at most 31)."
)
@click.option("--until", default="", help="The history's end, ISO-8601 UTC (default: now).")
@click.pass_obj
def alerts_backtest(stack: Stack, site: str, days: int, until: str, **options: Any) -> None:
    """When a rule would have fired over SITE's history, without saving it (same options as add)."""
    from storage import alert_backtest

    rule = alert_backtest.backtest_rule(site=site, **rule_fields(options))
    start, end = alert_backtest.history(days, _utc_time("--until", until) if until else datetime.now(UTC))
    result = alert_backtest.backtest(stack.client, rule, start, end)
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
@click.pass_obj
def alerts_list(stack: Stack, site: str) -> None:
    """SITE's alert rules: id, kind, condition, webhook."""
    from storage import alert_rules
    from storage.sites import normalise

    for rule in alert_rules.list_rules(stack.client, normalise(site)):
        click.echo("\t".join([rule.rule_id, rule.kind, rule.describe(), rule.webhook_url]))


@alerts.command("remove")
@click.argument("site")
@click.argument("rule_id", metavar="ID")
@click.pass_obj
def alerts_remove(stack: Stack, site: str, rule_id: str) -> None:
    """Stop alert rule ID of SITE (alerts it fired stay listed)."""
    from storage import alert_rules

    removed = alert_rules.remove_rule(stack.client, site, rule_id)
    console.print(f"removed alert rule {removed.rule_id} from {removed.site}", highlight=False)


COMMANDS = (alerts,)
