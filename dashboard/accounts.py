"""Team members in the dashboard (storage/users.py): their sessions, what their role lets them
call, the invitation page, and the Team panel (API keys; for owners, invitations and the waiting
ones with Revoke, members, their roles and the site's audit log). Invitations, removals and role
changes go through storage/users.py's functions that write the audit row too.

A member's session (dashboard/browser_session.py) names only their email. On every request the
session and the member are looked up again (no cache): removing a member (from a site or
altogether) ends their sessions, and a role change applies to the next request of a page
already open. The
guard, placed before the sign-in guard, checks every Dash callback a member sends, as
dashboard/sharing.py does for shared links, against what the callback declares in
dashboard/access.py: the site it names must be one the member has the declared role on (viewer,
admin for a site's settings, owner for its members), and the operator's callbacks (Explore, rate
limiting, definitions; any undeclared one) are refused (403). The layout (site picker, no Explore
tab) only offers what the member may use, but the guard is the boundary. The operator (signed in
with the operator's password) is the first owner of every site and passes unchecked.
"""

from __future__ import annotations

from typing import Any

import structlog
from dash import ALL, Dash, Input, Output, State, ctx, dcc, html, no_update
from dash.exceptions import PreventUpdate
from flask import (
    Response,
    g,
    has_request_context,
    jsonify,
    redirect,
    render_template_string,
    request,
)

from dashboard import browser_session, invitations
from dashboard.access import CALLBACK_PATH, body_problem, malformed_callback, member_refusal
from dashboard.auth import FORM_PAGE_STYLE, TeamSignIn
from dashboard.clicks import clicked
from dashboard.client_address import client_address
from dashboard.components import find, notice, panel, panel_children, removable_list
from dashboard.funnel import SAVING as FUNNEL_SAVING
from dashboard.store import ClientFactory
from dashboard.throttles import GuessThrottle
from dashboard.view_tabs import ADMINISTERED, EXPLORE_TAB, SETTINGS_SECTION, SETTINGS_SITE, SETTINGS_TAB
from dashboard.whatif_panel import PANEL_ID as WHATIF_PANEL
from storage import users
from storage.users import AccountError, User
from tally.settings import Settings

log = structlog.get_logger()

INVITE_PREFIX = "/invite/"
KEY_REVOKE = "key-revoke"
KEY_FORM = "key-form"  # a member's form for their own keys
MEMBER_REMOVE = "member-remove"
MEMBER_ROLE = "member-role"
INVITE_REVOKE = "invite-revoke"
AUDIT_ROWS = 50
ACCOUNT = "account"  # the page's footer (dashboard/layout.py), below every view
ACCOUNT_PANEL = "account-panel"
TEAM_PANEL = "team-panel"


# What a key button answers the operator, who signs in with no account of its own.
OPERATOR_KEY = "The operator uses the key in TALLY_API_KEY / $TALLY_HOME/api_key."


def current_user() -> User | None:
    """The team member of this request (None for the operator, a shared link or a stranger)."""
    return g.get("user") if has_request_context() else None


def team_sign_in(clients: ClientFactory, operator_email: str = "") -> TeamSignIn:
    def check(email: str, password: str) -> bool:
        user = users.check_password(clients(), email, password)
        return user is not None and bool(user.roles)

    def record(email: str, outcome: str, address: str) -> None:
        try:
            # An address without an account is not written as typed (users.record_sign_in).
            users.record_sign_in(clients(), email, outcome, address, operator_email)
        except Exception as failure:  # the audit log must not lock anyone out
            log.warning("audit_write_failed", error=str(failure)[:200])

    return TeamSignIn(check, record)


def install_accounts(app: Dash, settings: Settings, clients: ClientFactory) -> None:
    """A member may run a callback as it declares (dashboard/access.py): the site it names is one
    the member has the declared role on; the operator's callbacks (and undeclared ones) never."""
    server = app.server
    throttle = GuessThrottle()  # per client network and per invitation

    def guard() -> Response | None:
        live = browser_session.current(clients)
        if live is None or live.kind != "member":
            return None
        user = users.get_user(clients(), live.subject)
        if user is None or not user.roles:
            browser_session.end(clients)
            if request.method == "GET" and not request.path.startswith(("/_dash-", "/assets/")):
                return redirect("/login")
            return refused(401, "sign in first")
        if (malformed := malformed_callback(app)) is not None:
            return malformed
        if request.path == CALLBACK_PATH:
            refusal = callback_refusal(app, request.get_json(silent=True), user)
            if refusal is not None:
                return refused(403, refusal)
        g.user = user
        return None

    server.before_request_funcs.setdefault(None, []).insert(0, guard)

    @server.route(f"{INVITE_PREFIX}<token>", methods=["GET", "POST"])
    def accept(token: str) -> Response | tuple[str, int]:
        client = clients()
        invite = users.find_invite(client, token)
        if invite is None or invite.email == settings.owner_email.strip().lower():
            return render_template_string(INVITE_GONE), 404
        existing = users.get_user(client, invite.email)
        new_account = existing is None or not existing.has_password
        page = {"invite": invite, "new_account": new_account, "minimum": users.MIN_PASSWORD_CHARS}
        if request.method == "GET":
            return render_template_string(INVITE_PAGE, error=None, **page), 200
        address = client_address()
        if throttle.blocked(address, token):
            return render_template_string(
                INVITE_PAGE, error="Too many attempts. Try again later.", **page
            ), 429
        password = request.form.get("password", "")
        if new_account and password != request.form.get("confirm", ""):
            return render_template_string(INVITE_PAGE, error="The passwords differ.", **page), 400
        try:
            users.accept_invite(client, token, invite, password)
        except AccountError as refusal:
            throttle.failed(address, token)
            return render_template_string(INVITE_PAGE, error=str(refusal).capitalize(), **page), 400
        accepted = {"address": address, "detail": invite.site, "site": invite.site}
        users.record(client, "invite_accepted", invite.email, "ok", **accepted)
        browser_session.begin(clients, "member", invite.email)
        return redirect("/")


def refused(status: int, message: str) -> Response:
    response = jsonify({"error": message})
    response.status_code = status
    return response


def callback_refusal(app: Dash, body: Any, user: User) -> str | None:
    """Why this member may not run this callback request, or None if they may."""
    if body_problem(app, body) is not None:  # answered 400 before this guard; kept for direct calls
        return "malformed callback request"
    return member_refusal(app, body, user)


# -- the Team panel ---------------------------------------------------------------------------


def account_panel() -> html.Section:
    """A signed-in person's own API keys: theirs on every site they may see (a viewer's too), so
    not a site's setting; below every view, never in a shared link's page."""
    return panel(
        "Your API keys",
        [
            dcc.Store(id="team-version", data=0),
            html.P(
                "Keys for the stats API (Authorization: Bearer …), limited to this site: read-only, "
                "or also allowed to change what your role allows (docs/settings-api.md). A key is "
                "shown once, when it is created.",
                className="hint",
            ),
            html.Div(
                [
                    dcc.Checklist(
                        id="key-manage",
                        options=[{"label": " may also change settings (scope manage)", "value": "manage"}],
                        value=[],
                    ),
                    html.Button(
                        "Create a key for this site", id="key-create", className="button-primary", n_clicks=0
                    ),
                ],
                id=KEY_FORM,
            ),
            html.Div(id="key-created"),
            html.Div(id="team-keys"),
        ],
        id=ACCOUNT_PANEL,
    )


def team_panel() -> html.Section:
    """The Team section of the Settings view: invitations, members and the audit log, shown to
    the site's owners (the `members` callback hides it from admins)."""
    return panel(
        "Team",
        [
            html.P("The site's owners invite members and change their roles here.", className="hint"),
            html.Div(
                [
                    html.H3("Invite"),
                    html.Div(
                        [
                            dcc.Input(id="invite-email", type="email", placeholder="Email address"),
                            dcc.Dropdown(
                                id="invite-role",
                                options=list(users.ROLES),
                                value="viewer",
                                clearable=False,
                                searchable=False,
                            ),
                            html.Button("Create invitation", id="invite-create", className="button-primary"),
                        ],
                        className="share-form",
                    ),
                    html.Div(id="invite-created"),
                    html.H3("Waiting invitations"),
                    html.Div(id="invite-status", role="status"),
                    html.Div(id="team-invites"),
                    html.H3("Members"),
                    html.Div(id="member-status", role="status"),
                    html.Div(id="team-members"),
                    html.H3("Audit log"),
                    html.Div(id="team-audit"),
                ],
                id="team-owner",
            ),
        ],
        id=TEAM_PANEL,
    )


def for_signed_in(page: html.Div) -> html.Div:
    """The page of the operator or a team member (dashboard/sharing.py): their API keys below the
    views; for a member, cut to what their roles let them use. A member who administers no site
    gets no settings panel at all and no Settings tab (dashboard/settings_view.py); one who does
    gets them all but the operator's (Definitions), and the Settings tab for the sites they
    administer. A member's page has no rate-limiting panel (the operator's, about every site) and
    no Explore tab."""
    footer = find(page, ACCOUNT)
    if footer is not None:
        footer.children = [*panel_children(footer), account_panel()]  # type: ignore[attr-defined]
    user = current_user()
    administered = find(page, ADMINISTERED)  # the sites whose Settings tab the page offers
    if user is None:  # the operator's key is TALLY_API_KEY: no form for keys they cannot make here
        _drop(page, elements={KEY_FORM}, parents_of=set())
        if administered is not None:
            administered.data = "*"  # type: ignore[attr-defined]  # every site, later ones too
        return page
    if administered is not None:
        administered.data = sorted(site for site in user.roles if user.may(site, "admin"))  # type: ignore[attr-defined]
    admin = any(user.may(site, "admin") for site in user.roles)
    # Definitions are the operator's alone, as Rate limiting (whatif_panel.py); saving funnels
    # and every settings panel an admin's (their callbacks would only be refused; viewers apply
    # segments with the picker).
    dropped = {WHATIF_PANEL} if admin else {WHATIF_PANEL, FUNNEL_SAVING}
    _drop(page, elements=dropped, parents_of={"rate-limits"})
    if not admin and (section := find(page, SETTINGS_SECTION)) is not None:
        section.children = []  # type: ignore[attr-defined]  # kept, empty: the tab switch styles it
    site = getattr(find(page, "site"), "value", None)
    tabs = find(page, "tabs")
    if tabs is not None and not (site and user.may(site, "admin")):
        tabs.options = [option for option in tabs.options if option["value"] != SETTINGS_TAB]  # type: ignore[attr-defined]
    without_explore(page)
    return page


def without_explore(page: html.Div) -> None:
    """Explore's SQL reads every tenant's rows, so it is the operator's (dashboard/access.py): a
    member's page has no Explore tab and an empty Explore section (the tab switch still styles it)."""
    tabs = find(page, "tabs")
    if tabs is not None:
        tabs.options = [option for option in tabs.options if option["value"] != EXPLORE_TAB]  # type: ignore[attr-defined]
    section = find(page, "explore-section")
    if section is not None:
        section.children = []  # type: ignore[attr-defined]


def _drop(component: Any, elements: set[str], parents_of: set[str]) -> None:
    """Remove the elements with these ids, and those holding one of `parents_of` as a direct
    child (a panel around its content), from the tree."""
    children = panel_children(component)
    kept = [
        child
        for child in children
        if getattr(child, "id", None) not in elements
        and not any(getattr(grandchild, "id", None) in parents_of for grandchild in panel_children(child))
    ]
    if len(kept) != len(children):
        component.children = kept
    for child in kept:
        _drop(child, elements, parents_of)


def _owner_of(site: str | None) -> bool:
    user = current_user()
    return bool(site) and (user is None or user.may(site, "owner"))  # type: ignore[arg-type]


def _actor(settings: Settings) -> users.Actor:
    """Who changes accounts from the Team panel: the member signed in, or the operator."""
    user = current_user()
    address = request.remote_addr or ""
    if user is None:
        return users.Actor(settings.owner_email, True, address)
    return users.Actor(user.email, False, address)


def register_team_panel(app: Dash, settings: Settings, clients: ClientFactory) -> None:

    @app.callback(
        Output("team-keys", "children"),
        Input("site", "value"),
        Input("team-version", "data"),
    )
    def keys(site: str | None, _: int) -> Any:
        user = current_user()
        if user is None:
            return html.P(
                "Signed in with the operator's password: the operator's key is TALLY_API_KEY or "
                f"{settings.home_dir}/api_key. Team members create their own keys here.",
                className="hint",
            )
        keys_held = [
            (
                html.Code(key.id),
                f"{', '.join(key.sites)} · {key.scope} · created {key.created_at:%Y-%m-%d}",
                html.Button("Revoke", id={"type": KEY_REVOKE, "id": key.id}, className="button-quiet"),
            )
            for key in users.list_keys(clients(), user.email)
            if not key.revoked
        ]
        return removable_list(keys_held, "No keys yet.", item_class="", list_class="key-list")

    # Create and Revoke are two callbacks: a click on Create must not wait on the list
    # re-rendering its Revoke buttons (dashboard/clicks.py).
    @app.callback(
        Output("key-created", "children"),
        Output("team-version", "data"),
        Input("key-create", "n_clicks"),
        State("site", "value"),
        State("team-version", "data"),
        State("key-manage", "value"),
        prevent_initial_call=True,
    )
    def create_key(
        clicks: int | None, site: str | None, version: int, manage: list[str] | None
    ) -> tuple[Any, Any]:
        user = current_user()
        if not site or not clicks:  # not a click: the button (re)appearing
            raise PreventUpdate
        if user is None:
            return notice(OPERATOR_KEY, "error"), no_update
        scope = "manage" if manage and "manage" in manage else "read"
        try:
            key, token = users.create_key(clients(), user.email, [site], scope=scope)
        except AccountError as refusal:
            return notice(str(refusal), "error"), no_update
        users.record(clients(), "key_created", user.email, "ok", key_id=key.id, detail=site, site=site)
        shown = html.Div(
            [
                html.P(f"Key {key.id} for {site}, scope {key.scope} (copy it now, it is not shown again):"),
                html.Code(token, id="key-token"),
            ],
            className="notice notice-info",
        )
        return shown, version + 1

    @app.callback(
        Output("key-created", "children", allow_duplicate=True),
        Output("team-version", "data", allow_duplicate=True),
        Input({"type": KEY_REVOKE, "id": ALL}, "n_clicks"),
        State("site", "value"),
        State("team-version", "data"),
        prevent_initial_call=True,
    )
    def revoke_key(_: list, site: str | None, version: int) -> tuple[Any, Any]:
        user = current_user()
        trigger = clicked()
        if not site or trigger is None:
            raise PreventUpdate  # a button (re)appearing, not a click
        if user is None:
            return notice(OPERATOR_KEY, "error"), no_update
        try:
            revoked = users.revoke_key(clients(), trigger["id"], email=user.email)
        except AccountError as refusal:
            return notice(str(refusal), "error"), no_update
        site_of = users.key_site(revoked)
        users.record(clients(), "key_revoked", user.email, "ok", key_id=revoked.id, site=site_of)
        return notice(f"Revoked the key {revoked.id}."), version + 1

    @app.callback(
        Output("team-owner", "style"),
        Output("team-members", "children"),
        Output("team-audit", "children"),
        Input(SETTINGS_SITE, "data"),
        Input("team-version", "data"),
        prevent_initial_call=True,  # loaded when the Settings view opens
    )
    def members(site: str | None, _: int) -> tuple[dict, Any, Any]:
        if not _owner_of(site):
            return {"display": "none"}, None, None
        client = clients()
        rows = users.list_users(client, site)
        member_list = (
            html.Ul(
                [
                    html.Li(
                        [
                            f"{email} · {role} ",
                            dcc.Dropdown(
                                id={"type": MEMBER_ROLE, "email": email},
                                options=list(users.ROLES),
                                value=role,
                                clearable=False,
                                searchable=False,
                                className="member-role",
                            ),
                            html.Button(
                                "Remove", id={"type": MEMBER_REMOVE, "email": email}, className="button-quiet"
                            ),
                        ],
                        className="member",
                        **{"data-email": email, "data-role": role},
                    )
                    for email, _s, role in rows
                ]
            )
            if rows
            else html.P("No members yet: invite someone.", className="hint")
        )
        # The rows about this site; account-level rows (sign-ins) are the operator's alone.
        entries = users.audit(client, [site, ""] if current_user() is None else [site], limit=AUDIT_ROWS)
        audit = html.Table(
            [
                html.Thead(
                    html.Tr([html.Th(name) for name in ("time (UTC)", "what", "who", "key", "result")])
                ),
                html.Tbody(
                    [
                        html.Tr(
                            [
                                html.Td(f"{entry.ts:%Y-%m-%d %H:%M:%S}"),
                                html.Td(entry.action),
                                html.Td(entry.email),
                                html.Td(entry.key_id or "-"),
                                html.Td(entry.outcome),
                            ]
                        )
                        for entry in entries
                    ]
                ),
            ],
            id="audit-table",
            className="table",
        )
        return {}, member_list, html.Div(audit, className="table-scroll")

    @app.callback(
        Output("member-status", "children"),
        Output("team-version", "data", allow_duplicate=True),
        Input({"type": MEMBER_REMOVE, "email": ALL}, "n_clicks"),
        State("site", "value"),
        State("team-version", "data"),
        prevent_initial_call=True,
    )
    def remove_member(_removals: list, site: str | None, version: int) -> tuple[Any, Any]:
        trigger = clicked()
        if not site or trigger is None:
            raise PreventUpdate  # a button (re)appearing, not a click
        if not _owner_of(site):
            return notice("Only the site's owners remove members.", "error"), no_update
        email = str(trigger["email"])
        try:
            users.remove_member(clients(), _actor(settings), email, site)
        except AccountError as refusal:
            return notice(str(refusal), "error"), no_update
        return notice(f"Removed {email} from {site}."), version + 1

    @app.callback(
        Output("member-status", "children", allow_duplicate=True),
        Output("team-version", "data", allow_duplicate=True),
        Input({"type": MEMBER_ROLE, "email": ALL}, "value"),
        State("site", "value"),
        State("team-version", "data"),
        prevent_initial_call=True,
    )
    def change_role(_roles: list, site: str | None, version: int) -> tuple[Any, Any]:
        if not site or not isinstance(ctx.triggered_id, dict):
            raise PreventUpdate
        if not _owner_of(site):
            return notice("Only the site's owners change roles.", "error"), no_update
        email, role = str(ctx.triggered_id["email"]), str(ctx.triggered[0]["value"])
        client = clients()
        # The ids come from the browser: only a member of this site, and only a real change (the
        # dropdowns re-rendered with the list must not write anything).
        user = users.get_user(client, email)
        current = user.role_on(site) if user else None
        if current is None:
            return notice(f"{email} is not a member of {site}.", "error"), no_update
        if role == current:
            raise PreventUpdate
        try:
            users.change_role(client, _actor(settings), email, site, role)
        except AccountError as refusal:
            return notice(str(refusal), "error"), no_update
        return notice(f"{email} is now {role} of {site}."), version + 1

    @app.callback(
        Output("invite-created", "children"),
        Output("team-version", "data", allow_duplicate=True),
        Input("invite-create", "n_clicks"),
        State("site", "value"),
        State("invite-email", "value"),
        State("invite-role", "value"),
        State("team-version", "data"),
        prevent_initial_call=True,
    )
    def invite(
        clicks: int | None, site: str | None, email: str | None, role: str | None, version: int
    ) -> tuple[Any, Any]:
        if not clicks or not site:
            raise PreventUpdate
        if not _owner_of(site):
            return notice("Only the site's owners invite.", "error"), no_update
        try:
            made = invitations.invite(
                settings, clients(), _actor(settings), email or "", site, role or "", request.host_url
            )
        except AccountError as refusal:
            return notice(str(refusal), "error"), no_update
        said = html.P(invitations.what_happens(made))
        shown = [said, html.Code(made.link, id="invite-link")] if made.link else [said]
        return html.Div(shown, className="notice notice-info", id="invite-sent"), version + 1

    @app.callback(
        Output("team-invites", "children"),
        Input(SETTINGS_SITE, "data"),
        Input("team-version", "data"),
        prevent_initial_call=True,  # loaded when the Settings view opens
    )
    def waiting_invites(site: str | None, _: int) -> Any:
        if not _owner_of(site):
            return None
        rows = [
            (
                html.Code(invite.id),
                f"{invite.email} · {invite.role} · {INVITE_STATES[invite.status]} · invited by "
                f"{'the operator' if invite.inviter == users.OPERATOR else invite.inviter} · "
                f"until {invite.expires_at:%Y-%m-%d}",
                html.Button("Revoke", id={"type": INVITE_REVOKE, "id": invite.id}, className="button-quiet"),
            )
            for invite in users.list_invites(clients(), site)
        ]
        return removable_list(rows, "No waiting invitations.", item_class="invite", list_class="invite-list")

    @app.callback(
        Output("invite-status", "children"),
        Output("team-version", "data", allow_duplicate=True),
        Input({"type": INVITE_REVOKE, "id": ALL}, "n_clicks"),
        State("site", "value"),
        State("team-version", "data"),
        prevent_initial_call=True,
    )
    def revoke_invite(_revokes: list, site: str | None, version: int) -> tuple[Any, Any]:
        trigger = clicked()
        if not site or trigger is None:
            raise PreventUpdate  # a button (re)appearing, not a click
        if not _owner_of(site):
            return notice("Only the site's owners revoke invitations.", "error"), no_update
        invite_id = str(trigger["id"])
        try:  # the id comes from the browser: only a waiting invitation of this site
            revoked = users.revoke(clients(), _actor(settings), invite_id, site)
        except AccountError as refusal:
            return notice(str(refusal), "error"), no_update
        return notice(f"Revoked the invitation of {revoked.email}."), version + 1


INVITE_STATES = {
    "pending": "waiting for the operator's approval",
    "open": "sent, not yet accepted",
    "used": "accepted",
    "revoked": "revoked",
}

INVITE_GONE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>Tally</title></head>
<body><p role="alert">This invitation does not exist, was used or has expired.</p></body></html>
"""

INVITE_PAGE = (
    """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Invitation · Tally</title>
<style>
"""
    + FORM_PAGE_STYLE
    + """</style>
</head>
<body>
<form method="post">
  <h1>Join {{ invite.site }}</h1>
  <p>{{ invite.email }} · {{ invite.role }}</p>
  {% if error %}<p class="error" role="alert">{{ error }}</p>{% endif %}
  {% if new_account %}
  <label for="password">Choose a password (at least {{ minimum }} characters)</label>
  <input id="password" name="password" type="password" autocomplete="new-password" autofocus required>
  <label for="confirm">Repeat it</label>
  <input id="confirm" name="confirm" type="password" autocomplete="new-password" required>
  {% else %}
  <label for="password">Your password</label>
  <input id="password" name="password" type="password" autocomplete="current-password" autofocus required>
  {% endif %}
  <button type="submit">Accept</button>
</form>
</body>
</html>
"""
)
