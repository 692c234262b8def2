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
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, cast

from clickhouse_connect.driver.client import Client

from storage import sessions, site_caps
from storage.sites import list_sites, normalise

Role = Literal["owner", "admin", "viewer"]
ROLES: tuple[Role, ...] = ("owner", "admin", "viewer")
# What a key may do: `read` the stats API, or also `manage` what its user's role allows on its
# sites (the settings and accounts endpoints, dashboard/manage_api.py). A leaked read key
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


class AccountError(ValueError):
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


@dataclass(frozen=True)
class Invite:
    email: str
    site: str
    role: Role
    expires_at: datetime


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


def registered_site(client: Client, site: str) -> str:
    site = normalise(site)
    if site not in list_sites(client):
        raise AccountError(f"site: {site} is not registered (see 'tally sites list')")
    return site


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
    site = registered_site(client, site)
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


def create_invite(client: Client, email: str, site: str, role: str, now: datetime | None = None) -> str:
    """A one-time invitation token (shown once: only its hash is kept), valid for 7 days."""
    email, role = clean_email(email), clean_role(role)
    site = registered_site(client, site)
    site_caps.PENDING_INVITES.check(site_caps.pending_invites(client, site), AccountError)
    now = now or datetime.now(UTC)
    token = secrets.token_urlsafe(32)
    client.insert(
        "user_invites",
        [[token_hash(token), email, site, role, now, now + INVITE_LIFETIME, 0]],
        column_names=["token_sha256", "email", "site", "role", "created_at", "expires_at", "used"],
    )
    return token


def find_invite(client: Client, token: str) -> Invite | None:
    """The live invitation `token` names, or None (unknown, used or expired)."""
    rows = client.query(
        """
        SELECT argMax(email, changed_at), argMax(site, changed_at), argMax(role, changed_at),
               argMax(expires_at, changed_at), argMax(used, changed_at)
        FROM user_invites WHERE token_sha256 = {hash:String} GROUP BY token_sha256
        """,
        parameters={"hash": token_hash(token)},
    ).result_rows
    if not rows:
        return None
    email, site, role, expires_at, used = rows[0]
    expires_at = expires_at.replace(tzinfo=UTC) if expires_at.tzinfo is None else expires_at
    if used or expires_at <= datetime.now(UTC):
        return None
    return Invite(email, site, cast(Role, role), expires_at)


def accept_invite(client: Client, token: str, invite: Invite, password: str) -> User:
    """Give the invitee their role; a new invitee's password is set now, an existing user's
    must match. The token is spent either way."""
    existing = get_user(client, invite.email)
    if existing is not None and existing.has_password:
        if check_password(client, invite.email, password) is None:
            raise AccountError("password: not this account's password")
    else:
        set_password(client, invite.email, password)
    _write_role(client, invite.email, invite.site, invite.role)
    client.insert(
        "user_invites",
        [
            [
                token_hash(token),
                invite.email,
                invite.site,
                invite.role,
                invite.expires_at,
                invite.expires_at,
                1,
            ]
        ],
        column_names=["token_sha256", "email", "site", "role", "created_at", "expires_at", "used"],
    )
    user = get_user(client, invite.email)
    assert user is not None
    return user


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
) -> None:
    client.insert(
        "audit_log",
        [[action, email[:MAX_EMAIL_CHARS], key_id, outcome, address[:64], detail[:200]]],
        column_names=["action", "email", "key_id", "outcome", "address", "detail"],
    )


def audit(client: Client, emails: list[str] | None = None, limit: int = 100) -> list[AuditEntry]:
    """The latest entries, newest first; only those of `emails` when given."""
    rows = client.query(
        """
        SELECT ts, action, email, key_id, outcome, address, detail FROM audit_log
        WHERE {all:UInt8} OR has({emails:Array(String)}, email)
        ORDER BY ts DESC LIMIT {limit:UInt32}
        """,
        parameters={"all": int(emails is None), "emails": emails or [], "limit": limit},
    ).result_rows
    return [AuditEntry(*row) for row in rows]
