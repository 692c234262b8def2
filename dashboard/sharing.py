"""Shared links in the dashboard: `/share/<token>` opens a read-only Overview of one site.

Opening a live link (after its password, if it has one) starts a *shared session*
(dashboard/browser_session.py) that names only the link's id, so it cannot reach anything the
operator's session can. A browser already signed in (the operator, a member) keeps its session:
opening a link there shows a page that says so, with a link to the dashboard, so a page on
another site cannot sign anyone out by sending their browser to a shared link.
On every request of a shared session the link is looked up again (a revoked link
answers 410 at once, also to a page already open), and the guard lets through only the Dash
routes the page needs and, of the callbacks, only those declared `shared` in dashboard/access.py
(the Overview's: no Explore, Funnel or rate limiting), each with the link's site wherever the
callback declares its site. The layout a shared
session gets has no site switcher, no other tabs and no log-out button; but the guard, not the
layout, is what keeps other sites out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dash import Dash, html
from flask import Response, g, has_request_context, jsonify, render_template_string, request

from dashboard import browser_session
from dashboard.access import CALLBACK_PATH, body_problem, malformed_callback, shared_refusal
from dashboard.accounts import for_signed_in
from dashboard.auth import FORM_PAGE_STYLE
from dashboard.client_address import client_address
from dashboard.message_page import MESSAGE_PAGE, MESSAGE_PAGE_HEAD
from dashboard.request_bodies import MAX_BODY_BYTES
from dashboard.request_bodies import refusal as body_refusal
from dashboard.settings_view import with_settings
from dashboard.store import ClientFactory
from dashboard.throttles import GuessThrottle
from dashboard.view_tabs import OVERVIEW_TAB, SETTINGS_SECTION
from storage import shared_links
from storage.sessions import Session
from storage.shared_links import SharedLink
from tally.settings import Settings

SHARE_PREFIX = "/share/"
# What the Dash page of a shared session fetches besides its callbacks.
DASH_PATHS = {"/_dash-layout", "/_dash-dependencies", "/_favicon.ico"}
DASH_PREFIXES = ("/_dash-component-suites/", "/assets/")
# Replaced by empty placeholders in a shared layout (their callbacks are refused anyway).
HIDDEN_SECTIONS = (
    "explore-section",
    "funnel-section",
    "journeys-section",
    "retention-section",
    SETTINGS_SECTION,
)
# Dropped with the element around them: the global rate-limiting panel and the log-out form.
DROPPED_WITH_PARENT = ("rate-limits", "logout")


def shared_link() -> SharedLink | None:
    """The link of the current request's shared session (None for the operator)."""
    return g.get("shared_link") if has_request_context() else None


def visible_sites(known: list[str]) -> list[str]:
    """The sites this request may see: all for the operator, the link's one for a shared session,
    those a team member has a role on (dashboard/accounts.py)."""
    link = shared_link()
    if link is not None:
        return [link.site]
    user = g.get("user") if has_request_context() else None
    return known if user is None else [site for site in known if site in user.roles]


def install_sharing(app: Dash, settings: Settings, clients: ClientFactory) -> None:
    """A shared session may run the callbacks declared `shared` (dashboard/access.py), for its site."""
    server = app.server
    throttle = GuessThrottle()  # per client network and per link

    def guard() -> Response | None:
        live = browser_session.current(clients)
        if live is None or live.kind != "shared" or request.path.startswith(SHARE_PREFIX):
            return None
        link = shared_links.resolve_id(clients(), live.subject)
        if link is None:
            return gone()
        if request.path == CALLBACK_PATH and (request.content_length or 0) > MAX_BODY_BYTES:
            # Only the upload may be larger (dashboard/request_bodies.py): never a shared view's,
            # so refuse it before anything parses it.
            return body_refusal(MAX_BODY_BYTES)
        if (malformed := malformed_callback(app)) is not None:
            return malformed
        if request.path == CALLBACK_PATH:
            refusal = callback_refusal(app, request.get_json(silent=True), link)
            if refusal is not None:
                response = jsonify({"error": refusal})
                response.status_code = 403
                return response
        elif request.path not in DASH_PATHS and not request.path.startswith(DASH_PREFIXES):
            return None  # anything else: the sign-in guard answers, as for a stranger
        g.shared_link = link
        return None

    # Before the sign-in guard, which then lets a request through when g.shared_link is set.
    server.before_request_funcs.setdefault(None, []).insert(0, guard)

    @server.route(f"{SHARE_PREFIX}<token>", methods=["GET", "POST"])
    def open_link(token: str) -> Response | tuple[str, int] | str:
        link = shared_links.resolve(clients(), token)
        if link is None:
            return render_template_string(
                MESSAGE_PAGE, message="This link does not exist or was revoked."
            ), 404
        live = browser_session.current(clients)
        if live is not None and live.kind != "shared":
            return signed_in_already(live, link)
        opened = live is not None and live.subject == link.id
        if link.has_password and not opened:
            address = client_address()
            if request.method == "GET":
                return render_template_string(PASSWORD_PAGE, error=None), 200
            if throttle.blocked(address, link.id):
                return render_template_string(PASSWORD_PAGE, error="Too many attempts. Try again later."), 429
            if not link.password_matches(request.form.get("password", "")):
                throttle.failed(address, link.id)
                return render_template_string(PASSWORD_PAGE, error="Wrong password."), 401
            throttle.succeeded(address, link.id)
        elif request.method == "POST":
            return render_template_string(MESSAGE_PAGE, message="Nothing to send here."), 405
        # A session naming only the link (this browser had none, or another link's, which ends),
        # so a shared page never runs with more than the link allows.
        if not opened:
            browser_session.begin(clients, "shared", link.id)
        g.shared_link = link
        return app.index()

    @server.after_request
    def no_referrer(response: Response) -> Response:
        # The token is in the page's URL: never send it on to another site, never cache it.
        live = g.get("browser_session")  # as the guards found it; no second lookup
        if request.path.startswith(SHARE_PREFIX) or (live is not None and live.kind == "shared"):
            response.headers["Referrer-Policy"] = "no-referrer"
            response.headers["Cache-Control"] = "no-store"
        return response


def signed_in_already(live: Session, link: SharedLink) -> tuple[str, int]:
    """A signed-in browser opening a shared link: never replace its session (a page on another
    site could otherwise sign the operator out with a link). Say where the site is instead."""
    who = "the operator" if live.kind == "operator" else live.subject
    return render_template_string(SIGNED_IN_PAGE, who=who, site=link.site), 200


def gone() -> Response:
    # The session keeps the revoked link's id, so every later request answers 410 too, not a
    # "sign in" that would suggest another way in.
    if request.method == "GET" and not request.path.startswith(("/_dash-", "/assets/")):
        response = Response(render_template_string(MESSAGE_PAGE, message="This link was revoked."))
    else:
        response = jsonify({"error": "this shared link was revoked"})
    response.status_code = 410
    return response


def callback_refusal(app: Dash, body: Any, link: SharedLink) -> str | None:
    """Why a shared session may not run this callback request, or None if it may."""
    if body_problem(app, body) is not None:  # answered 400 before this guard; kept for direct calls
        return "malformed callback request"
    return shared_refusal(app, body, link.site)


def layout_for_viewer(full_layout: Callable[[], html.Div]) -> Callable[[], html.Div]:
    """The page with the Settings view's panels, cut for a team member (dashboard/accounts.py), or
    for a shared session the page without them cut down to one site's Overview."""

    def layout() -> html.Div:
        page = full_layout()
        link = shared_link()
        if link is not None:
            return read_only(page, link)
        return for_signed_in(with_settings(page))

    return layout


def read_only(page: html.Div, link: SharedLink) -> html.Div:
    _cut(page, link)
    banner = html.Div(
        [html.Strong(link.site), f" · shared read-only view{f' · {link.label}' if link.label else ''}"],
        id="shared-banner",
        className="shared-banner",
    )
    page.children = [banner, *page.children]
    return page


def _cut(component: Any, link: SharedLink) -> None:
    children = getattr(component, "children", None)
    if not isinstance(children, list | tuple):
        if children is not None and not isinstance(children, str):
            _restrict(children, link)
            _cut(children, link)
        return
    kept = []
    for child in children:
        child_id = getattr(child, "id", None)
        if child_id in HIDDEN_SECTIONS:
            kept.append(html.Div(id=child_id, style={"display": "none"}))
            continue
        if any(getattr(grandchild, "id", None) in DROPPED_WITH_PARENT for grandchild in _as_list(child)):
            continue
        _restrict(child, link)
        _cut(child, link)
        kept.append(child)
    component.children = kept


def _restrict(component: Any, link: SharedLink) -> None:
    component_id = getattr(component, "id", None)
    if component_id == "site":
        component.options = [link.site]
        component.value = link.site
        component.disabled = True
        component.persistence = False
    elif component_id == "tabs":
        component.options = [option for option in component.options if option["value"] == OVERVIEW_TAB]


def _as_list(component: Any) -> list:
    children = getattr(component, "children", None)
    if isinstance(children, list | tuple):
        return list(children)
    return [] if children is None or isinstance(children, str) else [children]


SIGNED_IN_PAGE = (
    MESSAGE_PAGE_HEAD
    + """<body><div role="status">
<p>This is a shared read-only link to {{ site }}. This browser is signed in to Tally as {{ who }},
and opening the link here would sign it out, so it stays signed in.</p>
<p><a href="/">Open the dashboard</a> (its site picker lists {{ site }} if you may see it), or sign
out first to open the link as its visitors see it.</p>
</div></body></html>
"""
)

PASSWORD_PAGE = (
    """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Shared dashboard · Tally</title>
<style>
"""
    + FORM_PAGE_STYLE
    + """</style>
</head>
<body>
<form method="post">
  <h1>Shared dashboard</h1>
  {% if error %}<p class="error" role="alert">{{ error }}</p>{% endif %}
  <label for="password">Password for this link</label>
  <input id="password" name="password" type="password" autocomplete="current-password" autofocus required>
  <button type="submit">Open</button>
</form>
</body>
</html>
"""
)
