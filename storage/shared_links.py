"""Shared links: read-only dashboard links to one site (`tally share`, the dashboard's Share panel).

A link is found by its token, an unguessable `secrets.token_urlsafe(32)`. Only the token's SHA-256
is stored, so the full URL is shown once, at creation (as GitHub shows a new access token), and a
copy of the table opens nothing. Looking a token up by its hash is an equality match on a digest,
which leaks nothing about the token through timing. A link's public `id` (short, not secret)
names it in lists and for revocation. An optional password is kept as a salted scrypt digest.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from clickhouse_connect.driver.client import Client

from storage import site_caps
from storage.site_settings_rows import SettingsTable
from storage.sites import normalise, registered
from tally.refusal import Refused

# As dashboard/auth.py's sign-in password: ~16 MiB and tens of milliseconds per guess.
SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}
MAX_LABEL_CHARS = 100
# A link is never removed: a revoked one is still listed (and says so), so the table has no
# removal column; its newest row is the link as it stands.
LINKS = SettingsTable(
    "shared_links",
    keys=("id",),
    values=("site", "label", "token_sha256", "password_salt", "password_digest", "created_at", "revoked"),
    removed=None,
)
COLUMNS = list(LINKS.columns)


class SharedLinkError(Refused):
    """A request about shared links that cannot be met; the message says why."""


@dataclass(frozen=True)
class SharedLink:
    id: str
    site: str
    label: str
    token_sha256: str
    password_salt: str
    password_digest: str
    created_at: datetime
    revoked: bool

    @property
    def has_password(self) -> bool:
        return bool(self.password_digest)

    def password_matches(self, candidate: str) -> bool:
        if not self.has_password:
            return True
        return hmac.compare_digest(
            _scrypt(candidate, bytes.fromhex(self.password_salt)).hex(), self.password_digest
        )


@dataclass(frozen=True)
class CreatedLink:
    """A new link and its token: the only moment the token exists outside the viewer's URL."""

    link: SharedLink
    token: str

    def path(self) -> str:
        return f"/share/{self.token}"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def clean_label(label: str) -> str:
    cleaned = " ".join(label.split())
    if len(cleaned) > MAX_LABEL_CHARS:
        raise SharedLinkError(f"label: at most {MAX_LABEL_CHARS} characters")
    return cleaned


def create_link(
    client: Client,
    site: str,
    label: str = "",
    password: str | None = None,
    token_of: Callable[[str], str] | None = None,
    link_id: str | None = None,
) -> CreatedLink:
    """A new link. `token_of` (the Sites API's, dashboard/http_api/sites_api.py) derives the token
    from the link's id with a server secret, so its URL can be given again; without it the token
    is random and shown once. `link_id` (the Sites API's, derived from what was asked): two
    processes making the same link at once write the same row, kept once; else a random id."""
    site = registered(client, site, SharedLinkError)
    site_caps.SHARED_LINKS.check(sum(not link.revoked for link in list_links(client, site)), SharedLinkError)
    salt, digest = "", ""
    if password:
        salt_bytes = os.urandom(16)
        salt, digest = salt_bytes.hex(), _scrypt(password, salt_bytes).hex()
    link_id = link_id or secrets.token_hex(4)
    token = token_of(link_id) if token_of is not None else secrets.token_urlsafe(32)
    link = SharedLink(
        id=link_id,
        site=site,
        label=clean_label(label),
        token_sha256=token_hash(token),
        password_salt=salt,
        password_digest=digest,
        created_at=datetime.now(UTC),
        revoked=False,
    )
    _write(client, link)
    return CreatedLink(link, token)


def list_links(client: Client, site: str) -> list[SharedLink]:
    """The site's links, revoked ones included (they say so), oldest first."""
    rows = LINKS.newest(
        client,
        parameters={"site": normalise(site)},
        order=("created_at", "id"),
        having=f"{LINKS.newest_of('site')} = {{site:String}}",
    )
    return [_link(row) for row in rows]


def revoke_link(client: Client, site: str, link_id: str) -> SharedLink:
    """Revoke the site's link `link_id`; revoking twice is harmless."""
    site = normalise(site)
    found = [link for link in list_links(client, site) if link.id == link_id]
    if not found:
        raise SharedLinkError(f"id: {site} has no shared link {link_id!r} (see 'tally share list {site}')")
    revoked = SharedLink(**{**found[0].__dict__, "revoked": True})
    _write(client, revoked)
    return revoked


def resolve(client: Client, token: str) -> SharedLink | None:
    """The live link `token` opens, or None (unknown or revoked). Asked on every request."""
    rows = LINKS.newest(
        client,
        f"id IN (SELECT id FROM {LINKS.name} WHERE token_sha256 = {{hash:String}})",
        {"hash": token_hash(token)},
    )
    links = [_link(row) for row in rows]
    return links[0] if links and not links[0].revoked else None


def resolve_id(client: Client, link_id: str) -> SharedLink | None:
    """The live link with this id, or None: how a viewer's open session is re-checked."""
    rows = LINKS.newest(client, "id = {id:String}", {"id": link_id})
    links = [_link(row) for row in rows]
    return links[0] if links and not links[0].revoked else None


def _write(client: Client, link: SharedLink) -> None:
    row = [getattr(link, column) for column in COLUMNS]
    row[COLUMNS.index("revoked")] = int(link.revoked)
    LINKS.write(client, [row])


def _link(row: tuple) -> SharedLink:
    values = dict(zip(COLUMNS, row, strict=True))
    created = values["created_at"]
    values["created_at"] = created if created.tzinfo else created.replace(tzinfo=UTC)
    values["revoked"] = bool(values["revoked"])
    return SharedLink(**values)


def _scrypt(password: str, salt: bytes) -> bytes:
    return hashlib.scrypt(password.encode(), salt=salt, **SCRYPT)
