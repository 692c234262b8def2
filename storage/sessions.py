"""Dashboard sign-in sessions, kept server-side (migration 0059, table `dashboard_sessions`).

Not the visitors' sessions of the analytics (table `sessions`): these are the browsers signed in
to the dashboard. Every sign-in — the operator's password, a team member's, an accepted
invitation, an opened shared link — starts one; the browser's cookie carries only its random id,
and only the id's SHA-256 is stored, as for invitation tokens and API keys. Each request looks the
id up once (the primary key) and nothing caches the answer, so an ended session is refused on its
next request: logging out ends one, removing an account or a member's role on a site ends all of
that account's (storage/users.py).

Once ended, always ended: an ended row outranks any other row of its id (max(ended), not the
latest row), so two writes in the same millisecond cannot bring a session back.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, cast

from clickhouse_connect.driver.client import Client

# Who a session signs in: the operator (subject ''), a team member (their email), or a shared
# link's visitor (the link's id).
Kind = Literal["operator", "member", "shared"]
KINDS: tuple[Kind, ...] = ("operator", "member", "shared")
LIFETIME = timedelta(days=14)
COLUMNS = ["id_sha256", "kind", "subject", "created_at", "expires_at", "ended"]


@dataclass(frozen=True)
class Session:
    kind: Kind
    subject: str
    expires_at: datetime


def id_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def start(client: Client, kind: Kind, subject: str = "", now: datetime | None = None) -> str:
    """A new session for `kind`/`subject`; returns its id (for the cookie: only its hash is kept)."""
    now = now or datetime.now(UTC)
    session_id = secrets.token_urlsafe(32)
    client.insert(
        "dashboard_sessions",
        [[id_hash(session_id), kind, subject, now, now + LIFETIME, 0]],
        column_names=COLUMNS,
    )
    return session_id


def find(client: Client, session_id: str, now: datetime | None = None) -> Session | None:
    """The live session `session_id` names, or None (unknown, ended or expired): one lookup by
    the primary key."""
    rows = client.query(
        """
        SELECT any(kind), any(subject), any(expires_at), max(ended)
        FROM dashboard_sessions WHERE id_sha256 = {hash:String} GROUP BY id_sha256
        """,
        parameters={"hash": id_hash(session_id)},
    ).result_rows
    if not rows:
        return None
    kind, subject, expires_at, ended = rows[0]
    expires_at = expires_at.replace(tzinfo=UTC) if expires_at.tzinfo is None else expires_at
    if ended or kind not in KINDS or expires_at <= (now or datetime.now(UTC)):
        return None
    return Session(cast(Kind, kind), subject, expires_at)


def end(client: Client, session_id: str) -> None:
    """End one session (logging out)."""
    session = find(client, session_id)
    if session is not None:
        _end_hashes(client, session.kind, session.subject, [id_hash(session_id)])


def end_all(client: Client, kind: Kind, subject: str) -> int:
    """End every live session of `kind`/`subject` (an account removed, a member taken off a
    site); returns how many were live."""
    rows = client.query(
        """
        SELECT id_sha256 FROM dashboard_sessions
        WHERE kind = {kind:String} AND subject = {subject:String}
        GROUP BY id_sha256 HAVING max(ended) = 0 AND any(expires_at) > now64(3)
        """,
        parameters={"kind": kind, "subject": subject},
    ).result_rows
    _end_hashes(client, kind, subject, [row[0] for row in rows])
    return len(rows)


def _end_hashes(client: Client, kind: Kind, subject: str, hashes: list[str]) -> None:
    if not hashes:
        return
    now = datetime.now(UTC)
    client.insert(
        "dashboard_sessions",
        [[digest, kind, subject, now, now, 1] for digest in hashes],
        column_names=COLUMNS,
    )
