"""Team accounts: users, their role per site, invitations and per-user API keys (`tally users`,
the dashboard's Team panel), and the audit log of sign-ins and key use.

Roles, per site: `owner` (everything, including the site's users and the audit log), `admin`
(settings, goals, shared links), `viewer` (read-only). Passwords are salted scrypt digests as the
operator's sign-in password is; invitation tokens and API keys are random and kept only as their
SHA-256 (as shared links' tokens: storage/shared_links.py), so they are shown once, at creation.

The operator's password (TALLY_DASHBOARD_PASSWORD or $TALLY_HOME/dashboard_password) stays the
first owner of every site: it is not a row here, so it cannot be removed or locked out by
`tally users`; it signs in under TALLY_OWNER_EMAIL (dashboard/auth.py).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import string
import unicodedata
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Literal, cast

from clickhouse_connect.driver.client import Client

from storage import sessions, site_caps
from storage.sites import normalise, registered
from tally.clock import as_utc
from tally.refusal import Refused

Role = Literal["owner", "admin", "viewer"]
ROLES: tuple[Role, ...] = ("owner", "admin", "viewer")
# What a key may do: `read` the stats API, or also `manage` what its user's role allows on its
# sites (the settings and accounts endpoints, dashboard/http_api/manage.py). A leaked read key
# changes nothing.
Scope = Literal["read", "manage"]
SCOPES: tuple[Scope, ...] = ("read", "manage")
# What each role may do beyond reading (dashboard/accounts.py enforces it on callbacks).
RANK = {"viewer": 0, "admin": 1, "owner": 2}
SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}
MIN_PASSWORD_CHARS = 10
INVITE_LIFETIME = timedelta(days=7)
KEY_PREFIX = "tk_"
# A pragmatic address check: one @, no spaces, a dot in the domain. Mail is never sent.
EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s]+\.[^@\s]+$")
MAX_EMAIL_CHARS = 254
# What an address may hold once NFKC-normalised (full-width U+FF41 is the `a` it looks like) and
# lower-cased: ASCII letters and digits, the punctuation RFC 5322 allows unquoted in a local part,
# and the domain's dots and hyphens (an international domain in its xn-- form). An allow-list, so
# nothing invisible (zero-width, bidi controls, BOM), no control and no letter of another script
# can make a second account that looks like the first.
EMAIL_LOCAL_CHARACTERS = frozenset(string.ascii_lowercase + string.digits + "!#$%&'*+-/=?^_`{|}~.")
EMAIL_DOMAIN_CHARACTERS = frozenset(string.ascii_lowercase + string.digits + "-.")


class AccountError(Refused):
    """A request about accounts that cannot be met; the message names the field and says why."""


@dataclass(frozen=True)
class User:
    email: str
    roles: dict[str, Role]  # site -> role
    has_password: bool = True

    def role_on(self, site: str) -> Role | None:
        return self.roles.get(site)

    def may(self, site: str, needed: Role) -> bool:
        role = self.roles.get(site)
        return role is not None and RANK[role] >= RANK[needed]


# Who made an invitation when it was the operator (the CLI, the operator's password or key): not
# an address, so no account can be it.
OPERATOR = "operator"
InviteStatus = Literal["pending", "open", "used", "revoked"]
# How an invitation's link reaches the invitee: printed to the `operator` who made it; sent by
# `mail` to the address alone; `shown` to the inviting owner (only an existing account may accept
# it, with its own password); or `pending`, no link until the operator approves it.
Delivery = Literal["operator", "mail", "shown", "pending"]
DELIVERIES: tuple[Delivery, ...] = ("operator", "mail", "shown", "pending")


@dataclass(frozen=True)
class Invite:
    email: str
    site: str
    role: Role
    expires_at: datetime
    id: str = ""
    inviter: str = OPERATOR  # a member's email, or OPERATOR
    status: InviteStatus = "open"
    proven: bool = True  # the link reached only the address or the operator: it may make an account
    created_at: datetime | None = None


@dataclass(frozen=True)
class ApiKey:
    id: str
    email: str
    sites: tuple[str, ...]
    label: str
    created_at: datetime
    revoked: bool
    scope: Scope = "read"


@dataclass(frozen=True)
class AuditEntry:
    ts: datetime
    action: str
    email: str
    key_id: str
    outcome: str
    address: str
    detail: str
    site: str = ""  # the site the row concerns; '' for an account-level row (sign-ins)


@dataclass(frozen=True)
class Actor:
    """Who changes accounts, as the audit log names them: the operator (the CLI, the operator's
    password or key; named by TALLY_OWNER_EMAIL) or a member (their session or key)."""

    email: str
    is_operator: bool = False
    address: str = ""
    key_id: str = ""

    @property
    def inviter(self) -> str:
        return OPERATOR if self.is_operator else self.email


def clean_email(email: str) -> str:
    email = unicodedata.normalize("NFKC", email).strip().lower()
    if len(email) > MAX_EMAIL_CHARS or not EMAIL.match(email):
        raise AccountError(f"email: {email!r} is not an email address")
    local, domain = email.split("@")
    refused = sorted((set(local) - EMAIL_LOCAL_CHARACTERS) | (set(domain) - EMAIL_DOMAIN_CHARACTERS))
    if refused:
        named = ", ".join(f"U+{ord(character):04X}" for character in refused)
        raise AccountError(
            f"email: {email!r} has characters an address here may not have ({named}); "
            "ASCII letters, digits and . _ + - and the like only"
        )
    return email


def clean_role(role: str) -> Role:
    if role not in ROLES:
        raise AccountError(f"role: one of {', '.join(ROLES)}")
    return cast(Role, role)


def clean_scope(scope: str) -> Scope:
    if scope not in SCOPES:
        raise AccountError(f"scope: one of {', '.join(SCOPES)}")
    return cast(Scope, scope)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _scrypt(password: str, salt: bytes) -> bytes:
    return hashlib.scrypt(password.encode(), salt=salt, **SCRYPT)


# -- users and roles --------------------------------------------------------------------------


def get_user(client: Client, email: str) -> User | None:
    """The user with their current roles, or None (unknown or removed). Asked on every request
    of a user's session, so a removal or a role change applies at once."""
    rows = client.query(
        """
        SELECT argMax(removed, changed_at), argMax(password_digest, changed_at) != ''
        FROM users WHERE email = {email:String} GROUP BY email
        """,
        parameters={"email": email},
    ).result_rows
    if not rows or rows[0][0]:
        return None
    return User(email, _roles(client, email), has_password=bool(rows[0][1]))


def _roles(client: Client, email: str) -> dict[str, Role]:
    rows = client.query(
        """
        SELECT site, argMax(role, changed_at) FROM user_roles WHERE email = {email:String}
        GROUP BY site HAVING argMax(removed, changed_at) = 0 ORDER BY site
        """,
        parameters={"email": email},
    ).result_rows
    return {site: cast(Role, role) for site, role in rows}


def list_users(client: Client, site: str | None = None) -> list[tuple[str, str, Role]]:
    """(email, site, role) of every live user's roles, on one site or all."""
    rows = client.query(
        """
        SELECT r.email, r.site, r.role FROM
          (SELECT email, site, argMax(role, changed_at) AS role FROM user_roles
           GROUP BY email, site HAVING argMax(removed, changed_at) = 0) AS r
        INNER JOIN
          (SELECT email FROM users GROUP BY email HAVING argMax(removed, changed_at) = 0) AS u
        ON r.email = u.email
        WHERE {site:String} = '' OR r.site = {site:String}
        ORDER BY r.site, r.email
        """,
        parameters={"site": normalise(site) if site else ""},
    ).result_rows
    return [(email, row_site, cast(Role, role)) for email, row_site, role in rows]


def set_role(client: Client, email: str, site: str, role: str) -> None:
    email, role = clean_email(email), clean_role(role)
    site = registered(client, site, AccountError)
    if get_user(client, email) is None:
        raise AccountError(f"email: {email} has no account (invite them with 'tally users invite')")
    _write_role(client, email, site, role)


def _write_role(client: Client, email: str, site: str, role: Role, removed: int = 0) -> None:
    client.insert(
        "user_roles", [[email, site, role, removed]], column_names=["email", "site", "role", "removed"]
    )


def remove_user(client: Client, email: str, site: str | None = None) -> None:
    """Take `email`'s role on `site` away, or (no site) the whole account: every role, its API
    keys and its password. Either way the account's dashboard sessions end now, so a browser
    left open is refused on its next request (the member signs in again to the sites left)."""
    email = clean_email(email)
    user = get_user(client, email)
    if user is None:
        raise AccountError(f"email: {email} has no account")
    if site is not None:
        site = normalise(site)
        if site not in user.roles:
            raise AccountError(f"site: {email} has no role on {site}")
        _write_role(client, email, site, user.roles[site], removed=1)
        sessions.end_all(client, "member", email)
        return
    client.insert(
        "users", [[email, "", "", 1]], column_names=["email", "password_salt", "password_digest", "removed"]
    )
    # The roles die with the account: a later invitation to the same address grants only its
    # own role, never the old ones back.
    for role_site, role in user.roles.items():
        _write_role(client, email, role_site, role, removed=1)
    sessions.end_all(client, "member", email)
    for key in list_keys(client, email):
        if not key.revoked:
            revoke_key(client, key.id)


def check_password(client: Client, email: str, password: str) -> User | None:
    """The user if `password` is theirs (scrypt, constant-time compare), else None."""
    rows = client.query(
        """
        SELECT argMax(password_salt, changed_at), argMax(password_digest, changed_at),
               argMax(removed, changed_at)
        FROM users WHERE email = {email:String} GROUP BY email
        """,
        parameters={"email": email.strip().lower()},
    ).result_rows
    if not rows or rows[0][2] or not rows[0][1]:
        _scrypt(password, b"\0" * 16)  # as slow for an unknown address as for a wrong password
        return None
    salt, digest, _ = rows[0]
    if not hmac.compare_digest(_scrypt(password, bytes.fromhex(salt)).hex(), digest):
        return None
    return get_user(client, email.strip().lower())


def set_password(client: Client, email: str, password: str) -> None:
    if len(password) < MIN_PASSWORD_CHARS:
        raise AccountError(f"password: at least {MIN_PASSWORD_CHARS} characters")
    salt = os.urandom(16)
    client.insert(
        "users",
        [[email, salt.hex(), _scrypt(password, salt).hex(), 0]],
        column_names=["email", "password_salt", "password_digest", "removed"],
    )


# -- invitations ------------------------------------------------------------------------------
#
# An invitation is bound to its inviter: it is accepted only while the inviter may still grant it
# (the operator, or an owner of its site now), and only if it is newer than the invitee's last
# removal (from the site, or the whole account), so an old link cannot bring a removed person back.
# A link that may create a new account must have reached only the invited address (mailed by the
# configured SMTP server) or the operator (made or approved by them): otherwise the inviter could
# accept it himself and hold an account under someone else's address. A link an owner is shown
# (the address already had an account) is accepted only with that account's own password.


def create_invite(
    client: Client,
    email: str,
    site: str,
    role: str,
    now: datetime | None = None,
    inviter: str = OPERATOR,
    delivery: Delivery = "operator",
) -> str:
    """A one-time invitation token (shown once: only its hash is kept), valid for 7 days, made by
    `inviter` (a member's email, or OPERATOR) and sent by `delivery`. A pending invitation's token
    is never usable: the operator's approval makes a new one (approve_invite)."""
    email, role = clean_email(email), clean_role(role)
    site = registered(client, site, AccountError)
    if delivery not in DELIVERIES:
        raise AccountError(f"delivery: one of {', '.join(DELIVERIES)}")
    site_caps.PENDING_INVITES.check(site_caps.pending_invites(client, site), AccountError)
    now = now or datetime.now(UTC)
    token = secrets.token_urlsafe(32)
    invite = Invite(
        email,
        site,
        role,
        now + INVITE_LIFETIME,
        id=secrets.token_hex(4),
        inviter=inviter,
        status="pending" if delivery == "pending" else "open",
        proven=delivery in ("operator", "mail"),
        created_at=now,
    )
    _write_invite(client, invite, token_hash(token))
    return token


INVITES = """
SELECT id, argMax(token_sha256, changed_at), argMax(email, changed_at), argMax(site, changed_at),
       argMax(role, changed_at), argMax(expires_at, changed_at), argMax(inviter, changed_at),
       argMax(status, changed_at), argMax(proven, changed_at), min(changed_at)
FROM user_invites
"""
INVITE_COLUMNS = [
    "id", "token_sha256", "email", "site", "role", "created_at", "expires_at", "used", "inviter", "status",
    "proven",
]  # fmt: skip


def _write_invite(client: Client, invite: Invite, token_sha256: str) -> None:
    created = invite.created_at or datetime.now(UTC)
    row = [
        invite.id, token_sha256, invite.email, invite.site, invite.role, created, invite.expires_at,
        int(invite.status == "used"), invite.inviter, invite.status, int(invite.proven),
    ]  # fmt: skip
    client.insert("user_invites", [row], column_names=INVITE_COLUMNS)


def _invites(client: Client, where: str, parameters: dict[str, object]) -> list[tuple[str, Invite]]:
    """(current token hash, invitation) of each invitation the WHERE clause picks; invitations
    made before they had an id and an inviter are void and never read."""
    rows = client.query(
        INVITES + where + " GROUP BY id HAVING id != '' AND argMax(inviter, changed_at) != '' ORDER BY 10, 1",
        parameters=parameters,
    ).result_rows
    found = []
    for invite_id, token, email, site, role, expires_at, inviter, status, proven, created_at in rows:
        invite = Invite(
            email, site, cast(Role, role), as_utc(expires_at), id=invite_id, inviter=inviter,
            status=cast(InviteStatus, status), proven=bool(proven), created_at=as_utc(created_at),
        )  # fmt: skip
        found.append((token, invite))
    return found


def _live(invite: Invite, now: datetime) -> bool:
    return invite.status in ("pending", "open") and invite.expires_at > now


def list_invites(client: Client, site: str | None = None) -> list[Invite]:
    """Invitations still waiting (for the operator's approval, or to be accepted), oldest first,
    on one site or all."""
    now = datetime.now(UTC)
    found = _invites(
        client,
        "WHERE {site:String} = '' OR site = {site:String}",
        {"site": normalise(site) if site else ""},
    )
    return [invite for _token, invite in found if _live(invite, now)]


def invite_by_id(client: Client, invite_id: str) -> Invite | None:
    """The waiting invitation `invite_id` names, or None (unknown, used, revoked or expired)."""
    found = _invites(client, "WHERE id = {id:String}", {"id": invite_id})
    if not found or not _live(found[0][1], datetime.now(UTC)):
        return None
    return found[0][1]


def find_invite(client: Client, token: str) -> Invite | None:
    """The invitation `token` names if it may be accepted now, or None: unknown, pending, used,
    revoked or expired, its inviter no longer allowed to grant it, older than the invitee's
    removal, or a link the inviter was shown for an address that has no account now."""
    found = _invites(
        client,
        "WHERE id IN (SELECT id FROM user_invites WHERE token_sha256 = {hash:String})",
        {"hash": token_hash(token)},
    )
    if not found:
        return None
    current_token, invite = found[0]
    if current_token != token_hash(token) or invite.status != "open" or not _live(invite, datetime.now(UTC)):
        return None
    return None if invite_refusal(client, invite) else invite


def invite_refusal(client: Client, invite: Invite) -> str | None:
    """Why `invite` may not be accepted now, or None."""
    if invite.inviter != OPERATOR:
        inviter = get_user(client, invite.inviter)
        if inviter is None or not inviter.may(invite.site, "owner"):
            return "its inviter may no longer grant it"
    created = invite.created_at or invite.expires_at - INVITE_LIFETIME
    removed = _last_removal(client, invite.email, invite.site)
    if removed is not None and created <= removed:
        return "it is older than the invitee's removal"
    if not invite.proven:
        existing = get_user(client, invite.email)
        if existing is None or not existing.has_password:
            return "its link was shown to the inviter, and the address has no account"
    return None


def _last_removal(client: Client, email: str, site: str) -> datetime | None:
    """When `email` last lost its account, or its role on `site`."""
    rows = client.query(
        """
        SELECT max(changed_at) FROM (
          SELECT changed_at FROM users WHERE email = {email:String} AND removed = 1
          UNION ALL
          SELECT changed_at FROM user_roles
          WHERE email = {email:String} AND site = {site:String} AND removed = 1
        )
        """,
        parameters={"email": email, "site": site},
    ).result_rows
    moment = rows[0][0] if rows else None
    if moment is None or as_utc(moment).year < 1971:  # max() of no rows is the epoch
        return None
    return as_utc(moment)


def accept_invite(client: Client, token: str, invite: Invite, password: str) -> User:
    """Give the invitee their role; a new invitee's password is set now, an existing user's
    must match. The token is spent either way. The invitation is checked again here: what held
    when the page was shown may not hold now."""
    current = find_invite(client, token)
    if current is None or current.id != invite.id:
        raise AccountError("invitation: it does not exist, was used, was revoked or has expired")
    existing = get_user(client, current.email)
    if existing is not None and existing.has_password:
        if check_password(client, current.email, password) is None:
            raise AccountError("password: not this account's password")
    else:
        set_password(client, current.email, password)
    _write_role(client, current.email, current.site, current.role)
    _write_invite(client, replace(current, status="used"), token_hash(token))
    user = get_user(client, current.email)
    assert user is not None
    return user


def approve_invite(client: Client, invite_id: str, now: datetime | None = None) -> tuple[Invite, str]:
    """The operator's approval of a pending invitation: a new token (the only usable one, for
    7 days from now) for the operator to send to the address."""
    invite = invite_by_id(client, invite_id)
    if invite is None:
        raise AccountError(f"id: no waiting invitation {invite_id!r}")
    if invite.status != "pending":
        raise AccountError(f"id: invitation {invite_id} is not waiting for approval")
    now = now or datetime.now(UTC)
    token = secrets.token_urlsafe(32)
    approved = replace(invite, status="open", proven=True, expires_at=now + INVITE_LIFETIME)
    _write_invite(client, approved, token_hash(token))
    return approved, token


def revoke_invite(client: Client, invite_id: str, site: str | None = None) -> Invite:
    """Revoke waiting invitation `invite_id` (of `site`, when given: an owner revokes only their
    site's); its link stops working."""
    found = _invites(client, "WHERE id = {id:String}", {"id": invite_id})
    invite = found[0][1] if found else None
    if invite is None or not _live(invite, datetime.now(UTC)) or (site is not None and invite.site != site):
        raise AccountError(f"id: no waiting invitation {invite_id!r}")
    _write_invite(client, replace(invite, status="revoked"), found[0][0])
    return invite


def revoke_invites_of(client: Client, email: str, site: str | None = None) -> list[Invite]:
    """Revoke every waiting invitation of `email` (to `site`, when given): a removal ends them."""
    revoked = []
    for invite in list_invites(client, site):
        if invite.email == email:
            revoked.append(revoke_invite(client, invite.id))
    return revoked


# -- API keys ---------------------------------------------------------------------------------


def create_key(
    client: Client, email: str, sites: list[str], label: str = "", scope: str = "read"
) -> tuple[ApiKey, str]:
    """A stats API key of `email` for `sites` (each one the user has a role on), read-only or
    (scope `manage`) also allowed what the user's role allows; returns it and its secret, shown
    once."""
    email, scope = clean_email(email), clean_scope(scope)
    site_caps.API_KEYS.check(sum(not key.revoked for key in list_keys(client, email)), AccountError)
    user = get_user(client, email)
    if user is None:
        raise AccountError(f"email: {email} has no account")
    if not sites:
        raise AccountError("site: name at least one site the key may read")
    scope_sites = tuple(sorted({normalise(site) for site in sites}))
    for site in scope_sites:
        if site not in user.roles:
            raise AccountError(f"site: {email} has no role on {site}")
    label = " ".join(label.split())[:100]
    key = ApiKey(secrets.token_hex(4), email, scope_sites, label, datetime.now(UTC), False, scope)
    token = f"{KEY_PREFIX}{secrets.token_urlsafe(32)}"
    client.insert(
        "api_keys",
        [[key.id, email, token_hash(token), list(scope_sites), label, key.created_at, 0, scope]],
        column_names=KEY_COLUMNS,
    )
    return key, token


KEYS = """
SELECT id, argMax(email, changed_at), argMax(sites, changed_at), argMax(label, changed_at),
       argMax(created_at, changed_at), argMax(revoked, changed_at), argMax(scope, changed_at)
FROM api_keys
"""
KEY_COLUMNS = ["id", "email", "token_sha256", "sites", "label", "created_at", "revoked", "scope"]


def _key(row: tuple) -> ApiKey:
    key_id, email, sites, label, created_at, revoked, scope = row
    return ApiKey(key_id, email, tuple(sites), label, created_at, bool(revoked), clean_scope(scope))


def list_keys(client: Client, email: str) -> list[ApiKey]:
    rows = client.query(
        KEYS + "GROUP BY id HAVING argMax(email, changed_at) = {email:String} ORDER BY 5, id",
        parameters={"email": email.strip().lower()},
    ).result_rows
    return [_key(row) for row in rows]


def revoke_key(client: Client, key_id: str, email: str | None = None) -> ApiKey:
    """Revoke key `key_id` (of `email`, when given: a user revokes only their own)."""
    rows = client.query(KEYS + "WHERE id = {id:String} GROUP BY id", parameters={"id": key_id}).result_rows
    keys = [_key(row) for row in rows]
    if not keys or (email is not None and keys[0].email != email):
        raise AccountError(f"key: no API key {key_id!r}")
    key = keys[0]
    client.insert(
        "api_keys",
        [[key.id, key.email, "", list(key.sites), key.label, key.created_at, 1, key.scope]],
        column_names=KEY_COLUMNS,
    )
    return key


def resolve_key(client: Client, token: str) -> tuple[ApiKey, frozenset[str]] | None:
    """The live key `token` is and the sites it may read now: its scope, less the sites its
    user lost their role on. None for an unknown or revoked key, or a removed user."""
    if not token.startswith(KEY_PREFIX):
        return None
    rows = client.query(
        KEYS + "WHERE id IN (SELECT id FROM api_keys WHERE token_sha256 = {hash:String}) GROUP BY id",
        parameters={"hash": token_hash(token)},
    ).result_rows
    keys = [_key(row) for row in rows]
    if not keys or keys[0].revoked:
        return None
    user = get_user(client, keys[0].email)
    if user is None:
        return None
    return keys[0], frozenset(keys[0].sites) & frozenset(user.roles)


# -- the audit log ----------------------------------------------------------------------------


def record(
    client: Client,
    action: str,
    email: str,
    outcome: str,
    address: str = "",
    key_id: str = "",
    detail: str = "",
    site: str = "",
) -> None:
    """One audit row; `site` is the site it concerns ('' for an account-level row)."""
    client.insert(
        "audit_log",
        [[action, email[:MAX_EMAIL_CHARS], key_id, outcome, address[:64], detail[:200], site[:255]]],
        column_names=["action", "email", "key_id", "outcome", "address", "detail", "site"],
    )


def record_sign_in(client: Client, email: str, outcome: str, address: str, operator_email: str) -> None:
    """A sign-in's audit row. A failed one under an address that has no account is written
    without it: a stranger must not write rows under whatever address they type."""
    known = email.lower() == operator_email.strip().lower() or get_user(client, email) is not None
    if known:
        record(client, "sign_in", email, outcome, address=address)
    else:
        record(client, "sign_in", "", outcome, address=address, detail="unknown account")


def key_site(key: ApiKey) -> str:
    """The site a key's audit rows concern: its one site, or '' for a key over several (then the
    rows are account-level: an owner of one site must not read its use on another)."""
    return key.sites[0] if len(key.sites) == 1 else ""


def audit(client: Client, sites: list[str] | None = None, limit: int = 100) -> list[AuditEntry]:
    """The latest entries, newest first; only those concerning `sites` when given ('' in the
    list adds the account-level rows: sign-ins, keys over several sites)."""
    rows = client.query(
        """
        SELECT ts, action, email, key_id, outcome, address, detail, site FROM audit_log
        WHERE {all:UInt8} OR has({sites:Array(String)}, site)
        ORDER BY ts DESC LIMIT {limit:UInt32}
        """,
        parameters={"all": int(sites is None), "sites": sites or [], "limit": limit},
    ).result_rows
    return [AuditEntry(*row) for row in rows]


# -- changes with their audit row -------------------------------------------------------------
#
# The CLI, the API and the Team panel change members and invitations through these, so every
# change writes its audit row, naming the site it concerns, whichever door it came through.


def invite(
    client: Client,
    actor: Actor,
    email: str,
    site: str,
    role: str,
    delivery: Delivery,
    operator_email: str,
) -> tuple[Invite, str]:
    """Invite `email` to `site` as `role` on `actor`'s behalf; the invitation and its token
    (unusable while pending). No team account may take the operator's own address."""
    email = clean_email(email)
    if email == operator_email.strip().lower():
        raise AccountError(f"email: {email} is the operator's own address (TALLY_OWNER_EMAIL)")
    token = create_invite(client, email, site, role, inviter=actor.inviter, delivery=delivery)
    found = _invites(client, "WHERE token_sha256 = {hash:String}", {"hash": token_hash(token)})
    created = found[0][1]
    detail = f"{email} {created.site} {created.role} {delivery}"
    _audited(client, actor, "invite_created", created.site, detail)
    return created, token


def approve(client: Client, actor: Actor, invite_id: str) -> tuple[Invite, str]:
    """The operator's approval of a pending invitation, with its audit row."""
    approved, token = approve_invite(client, invite_id)
    detail = f"{approved.email} {approved.site} {approved.role}"
    _audited(client, actor, "invite_approved", approved.site, detail)
    return approved, token


def revoke(client: Client, actor: Actor, invite_id: str, site: str | None = None) -> Invite:
    """Revoke a waiting invitation (of `site`, when given), with its audit row."""
    revoked = revoke_invite(client, invite_id, site)
    _audited(client, actor, "invite_revoked", revoked.site, f"{revoked.email} {revoked.site} {revoked.role}")
    return revoked


def change_role(client: Client, actor: Actor, email: str, site: str, role: str) -> None:
    email = clean_email(email)
    set_role(client, email, site, role)
    _audited(client, actor, "role_changed", normalise(site), f"{email} {normalise(site)} {role}")


def remove_member(client: Client, actor: Actor, email: str, site: str | None = None) -> None:
    """Remove `email` from `site` (or the whole account), end their waiting invitations there,
    and write the audit row (one per site the account had, for a whole account)."""
    email = clean_email(email)
    user = get_user(client, email)
    held = sorted(user.roles) if user else []
    remove_user(client, email, site)
    site = normalise(site) if site is not None else None
    revoke_invites_of(client, email, site)
    for concerned in [site] if site is not None else held or [""]:
        _audited(client, actor, "member_removed", concerned, f"{email} {site or 'account'}")


def _audited(client: Client, actor: Actor, action: str, site: str, detail: str) -> None:
    where = {"address": actor.address, "key_id": actor.key_id, "site": site}
    record(client, action, actor.email, "ok", detail=detail, **where)
