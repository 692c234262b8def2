"""Signing in to the dashboard: the operator's password (TALLY_DASHBOARD_PASSWORD, or generated
into $TALLY_HOME/dashboard_password; its email is TALLY_OWNER_EMAIL, and it may be left empty),
or a team member's email and password (storage/users.py, checked by dashboard/accounts.py);
a server-side session whose id is the cookie (dashboard/browser_session.py), ended by logging out,
and a guard in front of every Dash route and callback. /healthz, /invite/ and the
bearer-authenticated /api/v1 and /api/v2 are exempt. Forms and callbacks are taken only from this
server's own pages (dashboard/same_origin.py)."""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import quote

from flask import Flask, Response, g, jsonify, redirect, render_template_string, request

from dashboard import browser_session
from dashboard.client_address import client_address
from dashboard.same_origin import install_same_origin_check
from dashboard.store import ClientFactory
from dashboard.throttles import DeviceMarks, GuessThrottle
from storage.sessions import LIFETIME as SESSION_LIFETIME
from tally.settings import Settings

OPERATOR_ACCOUNT = "(operator)"  # the throttle's key for the operator: not an email (no @)
DEVICE_COOKIE = "tally_device"  # an account's device mark: its usual clients pass its throttle
DEVICE_MARK_LIFETIME = timedelta(days=365)
OPEN_PATHS = {"/healthz", "/login", "/logout"}
# /share/ answers for itself (dashboard/sharing.py): a link's token is its credential.
# /invite/ likewise (dashboard/accounts.py): the invitation's token is its credential.
OPEN_PREFIXES = ("/api/v1/", "/api/v2/", "/share/", "/invite/")
# Where a sign-in may send the browser on: printable ASCII without spaces or backslashes.
# Browsers drop tabs and newlines from a URL and read a backslash as `/`, so any of those could turn
# a path into `//other.host`; a newline would also break the Location header.
PATH_CHARACTERS = frozenset(chr(code) for code in range(0x21, 0x7F)) - {"\\"}
# scrypt at n=2^14, r=8: ~16 MiB and tens of milliseconds per guess.
SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}


@dataclass(frozen=True)
class PasswordCheck:
    """A salted scrypt digest of the password: the plain password is not kept in memory."""

    salt: bytes
    digest: bytes

    @classmethod
    def of(cls, password: str) -> PasswordCheck:
        salt = os.urandom(16)
        return cls(salt, hashlib.scrypt(password.encode(), salt=salt, **SCRYPT))

    def matches(self, candidate: str) -> bool:
        attempt = hashlib.scrypt(candidate.encode(), salt=self.salt, **SCRYPT)
        return hmac.compare_digest(attempt, self.digest)


@dataclass(frozen=True)
class TeamSignIn:
    """How a team member signs in (dashboard/accounts.py): `check(email, password)` is whether
    they may, `record(email, outcome, address)` writes the audit log."""

    check: Callable[[str, str], bool]
    record: Callable[[str, str, str], None]


def install_login(
    server: Flask, settings: Settings, clients: ClientFactory, team: TeamSignIn | None = None
) -> None:
    password = settings.resolved_dashboard_password()
    check = PasswordCheck.of(password)
    throttle = GuessThrottle()  # per client network and per account
    device_marks = DeviceMarks.of(settings.resolved_dashboard_session_secret())
    # The cookie (a session id) is signed with the stored secret and the password together, so
    # changing the password makes every existing cookie unreadable: all sessions end.
    server.secret_key = hashlib.sha256(
        settings.resolved_dashboard_session_secret().encode() + b"\0" + password.encode()
    ).hexdigest()
    server.config.update(
        SESSION_COOKIE_NAME="tally_session",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=settings.dashboard_cookie_secure,
        PERMANENT_SESSION_LIFETIME=SESSION_LIFETIME,
    )
    install_same_origin_check(server)
    browser_session.install_store_outage_answer(server)

    @server.before_request
    def require_sign_in() -> Response | None:
        path = request.path
        if path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
            return None
        live = browser_session.current(clients)
        if live is not None and live.kind == "operator":
            return None
        if g.get("user") is not None:  # a team member's live session (dashboard/accounts.py)
            return None
        if g.get("shared_link") is not None:  # let through, scoped, by dashboard/sharing.py's guard
            return None
        if request.method == "GET" and not path.startswith(("/_dash-", "/assets/")):
            # Encoded whole, so the page's own query string comes back intact.
            return redirect(f"/login?next={quote(request.full_path.rstrip('?'), safe='/')}")
        response = jsonify({"error": "sign in first"})
        response.status_code = 401
        return response

    @server.route("/login", methods=["GET", "POST"])
    def login() -> Response | tuple[str, int]:
        # The client behind the TLS proxy, not the proxy (dashboard/client_address.py): one
        # guesser must not lock everyone out.
        address = client_address()
        target = safe_next(request.args.get("next", "/"))
        if request.method == "GET":
            return render_template_string(LOGIN_PAGE, error=None), 200
        email = request.form.get("email", "").strip().lower()
        password = request.form.get("password", "")
        operator = email in ("", settings.owner_email.lower())
        account = OPERATOR_ACCOUNT if operator else email
        usual_client = device_marks.holds(request.cookies.get(DEVICE_COOKIE), account)
        if throttle.blocked(address, account, usual_client):
            return render_template_string(LOGIN_PAGE, error="Too many attempts. Try again later."), 429
        if not (check.matches(password) if operator else team is not None and team.check(email, password)):
            throttle.failed(address, account)
            if team is not None:
                team.record(email or settings.owner_email, "failed", address)
            wrong = "Wrong email or password." if email else "Wrong password."
            return render_template_string(LOGIN_PAGE, error=wrong), 401
        throttle.succeeded(address, account)
        if team is not None:
            team.record(email or settings.owner_email, "ok", address)
        if operator:
            browser_session.begin(clients, "operator")
        else:
            browser_session.begin(clients, "member", email)
        response = redirect(target)
        # This browser is now one of the account's usual clients (dashboard/throttles.py).
        response.set_cookie(
            DEVICE_COOKIE,
            device_marks.mark(account),
            max_age=int(DEVICE_MARK_LIFETIME.total_seconds()),
            httponly=True,
            samesite="Lax",
            secure=settings.dashboard_cookie_secure,
        )
        return response

    @server.post("/logout")
    def logout() -> Response:
        browser_session.end(clients)  # in the store: a copy of the cookie signs nobody in now
        return redirect("/login")


def safe_next(target: str) -> str:
    """Only an absolute path on this server, else `/`: `next=//evil.example`,
    `next=/%09/evil.example` or `next=/%5c/evil.example` must not become an open redirect."""
    if target.startswith("/") and not target.startswith("//") and PATH_CHARACTERS.issuperset(target):
        return target
    return "/"


# The sign-in form and a shared link's password form look alike.
FORM_PAGE_STYLE = """
  body { margin: 0; min-height: 100vh; display: grid; place-items: center;
         font-family: system-ui, -apple-system, "Segoe UI", sans-serif; background: #f4f5f8; color: #1f2430; }
  form { background: #fff; padding: 2rem; border-radius: 12px; width: min(22rem, 90vw);
         box-shadow: 0 1px 3px rgba(0,0,0,.08), 0 8px 24px rgba(0,0,0,.06); }
  h1 { margin: 0 0 1.25rem; font-size: 1.5rem; }
  label { display: block; font-weight: 600; margin-bottom: .4rem; }
  input + label { margin-top: 1rem; }
  input { width: 100%; box-sizing: border-box; padding: .65rem .75rem; font-size: 1rem;
          border: 1px solid #c5cad5; border-radius: 8px; }
  input:focus { outline: 2px solid #4f46e5; border-color: #4f46e5; }
  button { margin-top: 1rem; width: 100%; padding: .7rem; font-size: 1rem; font-weight: 600;
           color: #fff; background: #4f46e5; border: 0; border-radius: 8px; cursor: pointer; }
  .error { color: #b42318; background: #fef3f2; padding: .5rem .75rem; border-radius: 6px; }
  .hint { color: #5b6275; font-size: .85rem; margin-top: 1rem; }
"""

LOGIN_PAGE = (
    """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in · Tally</title>
<style>
"""
    + FORM_PAGE_STYLE
    + """</style>
</head>
<body>
<form method="post">
  <h1>Tally</h1>
  {% if error %}<p class="error" role="alert">{{ error }}</p>{% endif %}
  <label for="email">Email</label>
  <input id="email" name="email" type="email" autocomplete="username" autofocus
         placeholder="empty: the operator's password">
  <label for="password">Password</label>
  <input id="password" name="password" type="password" autocomplete="current-password" required>
  <button type="submit">Sign in</button>
  <p class="hint">Team members: the email and password of your invitation. The operator: no email
  (or TALLY_OWNER_EMAIL) and TALLY_DASHBOARD_PASSWORD, or the password generated in
  $TALLY_HOME/dashboard_password.</p>
</form>
</body>
</html>
"""
)
