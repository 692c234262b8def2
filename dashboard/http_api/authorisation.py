"""Who may read the stats API (`/api/v1`, `/api/v2`): the operator's key (TALLY_API_KEY, every
site) or a team member's key (storage/users.py: limited to the sites it names that its user
still has a role on; read-only, or `manage` for what the user's role allows there,
dashboard/http_api/manage.py). A revoked key, or a removed user's, answers 401 at once: a key is
looked up on every request. A key asking for a site outside its scope answers 403.

Key use is written to the audit log at most once per key per minute (per dashboard process):
enough to see which keys are used and when, without a row per API call.
"""

from __future__ import annotations

import hmac
import threading
import time
from dataclasses import dataclass

import structlog
from flask import g, has_request_context

from dashboard.store import ClientFactory
from storage import users
from storage.sites import InvalidDomain, normalise

log = structlog.get_logger()

AUDIT_EVERY_S = 60


@dataclass(frozen=True)
class Access:
    """An authenticated API caller: `sites` None for the operator (every site, as its first
    owner); `scope` `manage` when the key may also change what its user's role allows."""

    email: str
    key_id: str = ""
    sites: frozenset[str] | None = None
    scope: users.Scope = "read"

    def may_read(self, site: str) -> bool:
        return self.sites is None or site in self.sites

    @property
    def is_operator(self) -> bool:
        return self.sites is None


class KeyUseLog:
    """Writes a key's use to the audit log at most once per AUDIT_EVERY_S."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def due(self, key_id: str) -> bool:
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(key_id, float("-inf")) < AUDIT_EVERY_S:
                return False
            self._last[key_id] = now
            return True


# One per process: the v1 and v2 APIs share it, so a key's use is one row a minute for both.
KEY_USES = KeyUseLog()


def authorise(
    authorization: str, operator_key: bytes, clients: ClientFactory, address: str = ""
) -> Access | None:
    """The caller the Authorization header names, or None (missing, wrong or revoked key)."""
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    # compare_digest takes as long for a near miss as for a far one: no timing oracle.
    if hmac.compare_digest(token.encode(), operator_key):
        return Access(email="operator", scope="manage")
    if not token.startswith(users.KEY_PREFIX):
        return None
    found = users.resolve_key(clients(), token)
    if found is None:
        return None
    key, sites = found
    if KEY_USES.due(key.id):
        try:
            site = users.key_site(key)
            users.record(clients(), "api_key", key.email, "ok", key_id=key.id, address=address, site=site)
        except Exception as failure:  # the audit log must not fail a read
            log.warning("audit_write_failed", error=str(failure)[:200])
    return Access(email=key.email, key_id=key.id, sites=sites, scope=key.scope)


def caller() -> Access | None:
    return g.get("api_access") if has_request_context() else None


def change_refusal(clients: ClientFactory, site: str, what: str) -> str | None:
    """Why this request's caller may not change `what` of `site`, or None when it may: the
    operator's key may change everything; a member's key needs scope `manage` and its user
    admin or owner of the site now (read from the store, so a role taken away counts at once)."""
    access = caller()
    if access is None or access.is_operator:
        return None
    if access.scope != "manage":
        return f"this API key is read-only; changing {what} needs a key with scope manage"
    user = users.get_user(clients(), access.email)
    if user is None or not user.may(site, "admin"):
        return f"site: changing {what} of {site} needs an admin's or the owner's key"
    return None


def may_read(site: str) -> bool:
    """Whether this request's caller may read `site` (True outside an API request)."""
    access = caller()
    return access is None or access.may_read(site)


def scoped_site(site: str) -> str:
    """A site as the registry spells it (the text itself if it is no domain: then no key's scope
    holds it, and the endpoint names the bad parameter)."""
    try:
        return normalise(site) if site else ""
    except InvalidDomain:
        return site
