"""Inviting someone, for every door (the Team panel, POST /api/v1/invites, `tally users invite`):
how the link travels, and the mail that carries it.

Who may see an invitation's link decides who may accept it (storage/users.py). The operator's
own invitations print their link to the operator. An owner's invitation never shows its link
when an SMTP server is configured: it is mailed to the address, so only whoever reads that
mailbox can accept it. Without SMTP, an owner's invitation to an address that has no account
waits for the operator's approval (`tally users invites approve ID` prints the link), and one to
an address that has an account is shown to the owner, since only that account's password
accepts it.
"""

from __future__ import annotations

from dataclasses import dataclass
from email.message import EmailMessage

import structlog
from clickhouse_connect.driver.client import Client

from dashboard.email_reports import smtp_connection
from storage import users
from storage.users import AccountError, Actor, Delivery, Invite
from tally.settings import Settings

log = structlog.get_logger()

INVITE_PATH = "/invite/"


@dataclass(frozen=True)
class Invitation:
    invite: Invite
    delivery: Delivery
    link: str | None  # only when the caller may see it (the operator's, or shown to the owner)


def dashboard_url(settings: Settings) -> str:
    """Where members open the dashboard: TALLY_DASHBOARD_URL, else the server's own address."""
    return (settings.dashboard_url or f"http://{settings.dashboard_host}:{settings.dashboard_port}").rstrip(
        "/"
    )


def delivery_for(settings: Settings, client: Client, actor: Actor, email: str) -> Delivery:
    if actor.is_operator:
        return "operator"
    if settings.smtp_host:
        return "mail"
    existing = users.get_user(client, users.clean_email(email))
    return "shown" if existing is not None and existing.has_password else "pending"


def invite(
    settings: Settings, client: Client, actor: Actor, email: str, site: str, role: str, shown_base: str
) -> Invitation:
    """Invite `email` on `actor`'s behalf, writing the audit row, and send or show the link as
    `delivery_for` decides. `shown_base` starts a link shown to the caller (their own address
    for the dashboard); a mailed link starts with `dashboard_url`."""
    delivery = delivery_for(settings, client, actor, email)
    created, token = users.invite(client, actor, email, site, role, delivery, settings.owner_email)
    if delivery == "mail":
        try:
            mail_invitation(settings, created, f"{dashboard_url(settings)}{INVITE_PATH}{token}")
        except (OSError, ValueError) as failure:  # smtplib's errors are OSErrors
            log.warning("invitation_mail_failed", error=str(failure)[:200])
            users.revoke(client, actor, created.id)
            raise AccountError("email: the invitation could not be mailed (SMTP server); try again") from None
    shown = f"{shown_base.rstrip('/')}{INVITE_PATH}{token}" if delivery in ("operator", "shown") else None
    return Invitation(created, delivery, shown)


def mail_invitation(settings: Settings, invite: Invite, link: str) -> None:
    mail = EmailMessage()
    mail["Subject"] = f"Your invitation to {invite.site} on Tally"
    mail["From"] = settings.smtp_from
    mail["To"] = invite.email
    mail.set_content(
        f"You are invited to see {invite.site} on Tally as {invite.role}.\n\n"
        f"Open this link to accept (it works once, until {invite.expires_at:%Y-%m-%d %H:%M} UTC):\n"
        f"{link}\n\n"
        "If you did not expect this invitation, ignore this mail.\n"
    )
    with smtp_connection(settings) as smtp:
        smtp.send_message(mail)


def what_happens(invitation: Invitation) -> str:
    """One sentence for the inviter: where the link went."""
    invite = invitation.invite
    if invitation.delivery == "mail":
        return f"The invitation was mailed to {invite.email} (valid 7 days, once)."
    if invitation.delivery == "pending":
        return (
            f"The invitation for {invite.email} waits for the operator's approval (no mail server is "
            f"configured): the operator runs 'tally users invites approve {invite.id}' and sends the link."
        )
    return f"Send this link to {invite.email} (valid 7 days, once):"
