"""Weekly and monthly email reports (`tally reports`): subscriptions, and sending what is due."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from ops.cli.context import Stack
from ops.cli_errors import UserError


@click.group()
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
@click.pass_obj
def reports_subscribe(stack: Stack, site: str, email: str, weekly: bool, monthly: bool) -> None:
    """Send SITE's weekly or monthly report to EMAIL."""
    from storage import report_subscriptions as subscriptions
    from storage.sites import normalise

    frequency = frequency_of(weekly, monthly, required=True)
    site, email = normalise(site), subscriptions.checked_email(email)  # typos before the store is asked
    added = subscriptions.subscribe(stack.client, site, email, frequency)  # type: ignore[arg-type]
    click.echo(f"{added.email} receives the {added.frequency} report of {added.site}")


@reports.command("list")
@click.argument("site", required=False)
@click.pass_obj
def reports_list(stack: Stack, site: str | None) -> None:
    """Subscriptions (of SITE, or all): site, email, frequency."""
    from storage import report_subscriptions as subscriptions

    for subscription in subscriptions.list_subscriptions(stack.client, site):
        click.echo("\t".join([subscription.site, subscription.email, subscription.frequency]))


@reports.command("unsubscribe")
@click.argument("site")
@click.argument("email")
@click.option("--weekly", is_flag=True, help="Only the weekly report.")
@click.option("--monthly", is_flag=True, help="Only the monthly report.")
@click.pass_obj
def reports_unsubscribe(stack: Stack, site: str, email: str, weekly: bool, monthly: bool) -> None:
    """Stop sending SITE's reports (all, or one frequency) to EMAIL."""
    from storage import report_subscriptions as subscriptions

    frequency = frequency_of(weekly, monthly, required=False)
    ended = subscriptions.unsubscribe(stack.client, site, email, frequency)  # type: ignore[arg-type]
    for subscription in ended:
        click.echo(
            f"{subscription.email} no longer receives the {subscription.frequency} report "
            f"of {subscription.site}"
        )


@reports.command("send")
@click.pass_obj
def reports_send(stack: Stack) -> None:
    """Send every report that is due (a period ended, not sent yet) now; the dashboard's sender
    does the same every TALLY_REPORTS_INTERVAL_S. A report already sent is never sent again."""
    import smtplib

    from dashboard.email_reports import send_due

    settings = stack.settings
    try:
        sent = send_due(settings, stack.client, datetime.now(UTC))
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


COMMANDS = (reports,)
