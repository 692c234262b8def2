"""The signed-in browser of a request: its session, kept server-side (storage/sessions.py).

The cookie (`tally_session`, signed with the session secret and the operator's password, so a
password change makes every cookie unreadable) carries only the session's random id. The first
guard that asks for this request's session looks it up in the store; the answer lives in `g`,
which dies with the request, so nothing lets an ended session live on. A store that does not
answer signs nobody in (fail closed): the request gets a 503 and a sentence, never a traceback.

Every sign-in (dashboard/auth.py: the operator, a member; dashboard/accounts.py: an accepted
invitation; dashboard/sharing.py: an opened shared link) goes through `begin`, which first ends
whatever session the browser had; `end` is logging out.
"""

from __future__ import annotations

from datetime import UTC, datetime

import structlog
from flask import Flask, Response, g, jsonify, render_template_string, request, session

from dashboard.store import ClientFactory, StoreUnavailable
from storage import sessions
from storage.sessions import Kind, Session

log = structlog.get_logger()

COOKIE_FIELD = "id"


def current(clients: ClientFactory) -> Session | None:
    """This request's live session, or None (no cookie, or a session ended or expired)."""
    if "browser_session" not in g:
        session_id = session.get(COOKIE_FIELD)
        g.browser_session = sessions.find(clients(), session_id) if isinstance(session_id, str) else None
    return g.browser_session


def begin(clients: ClientFactory, kind: Kind, subject: str = "") -> None:
    """Sign this browser in as `kind`/`subject`, ending the session it had."""
    end(clients)
    now = datetime.now(UTC)
    session[COOKIE_FIELD] = sessions.start(clients(), kind, subject, now)
    session.permanent = True
    g.browser_session = Session(kind, subject, now + sessions.LIFETIME)


def end(clients: ClientFactory) -> None:
    """Sign this browser out: its session ends in the store, so a copy of the cookie is refused too."""
    session_id = session.get(COOKIE_FIELD)
    if isinstance(session_id, str):
        sessions.end(clients(), session_id)
    session.clear()
    g.browser_session = None


def install_store_outage_answer(server: Flask) -> None:
    """A session that cannot be looked up is no session: answer 503 with a sentence."""

    @server.errorhandler(StoreUnavailable)
    def store_unavailable(failure: StoreUnavailable) -> tuple[Response | str, int]:
        log.warning("dashboard_store_unavailable", path=request.path, error=str(failure)[:300])
        if request.method == "GET" and not request.path.startswith(("/_dash-", "/assets/")):
            return render_template_string(OUTAGE_PAGE), 503
        return jsonify({"error": "the analytics store is not answering; try again shortly"}), 503


OUTAGE_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tally</title>
<style>body { margin: 0; min-height: 100vh; display: grid; place-items: center;
font-family: system-ui, sans-serif; background: #f4f5f8; color: #1f2430; }</style>
</head><body><p role="alert">The analytics store is not answering right now; try again shortly.</p>
</body></html>
"""
