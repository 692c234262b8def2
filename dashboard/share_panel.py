"""The Share panel, a section of the Settings view (dashboard/settings_view.py): create, list
and revoke the shared links of the site in the header's site picker. Its callbacks are Dash
callbacks like the rest of the dashboard (JSON POSTs behind the sign-in cookie, SameSite=Lax: a
cross-site page can neither send the cookie nor the JSON content type without a preflight), and a
shared session is refused them by the guard in dashboard/sharing.py (they are not the Overview's).
"""

from __future__ import annotations

from dash import ALL, Dash, Input, Output, State, dcc, html, no_update
from flask import request

from dashboard.clicks import clicked
from dashboard.components import notice, panel
from dashboard.store import ClientFactory
from dashboard.view_tabs import SETTINGS_SITE
from storage import shared_links
from storage.sites import InvalidDomain

REVOKE = "share-revoke"


def share_panel() -> html.Section:
    return panel(
        "Share",
        [
            html.P(
                "Read-only links to this site's Overview, for people without an account. "
                "The link is shown once: copy it when it is created.",
                className="hint",
            ),
            html.Div(
                [
                    dcc.Input(id="share-label", placeholder="Label (who is it for?)", maxLength=100),
                    dcc.Input(id="share-password", type="password", placeholder="Password (optional)"),
                    html.Button("Create link", id="share-create", className="button-primary", n_clicks=0),
                ],
                className="share-form",
            ),
            html.Div(id="share-created"),
            html.Div(id="share-list"),
        ],
        id="share-panel",
    )


def register_share_panel(app: Dash, clients: ClientFactory) -> None:
    @app.callback(
        Output("share-created", "children"),
        Output("share-password", "value"),
        Input("share-create", "n_clicks"),
        State("site", "value"),
        State("share-label", "value"),
        State("share-password", "value"),
        prevent_initial_call=True,
    )
    def create(_: int, site: str | None, label: str | None, password: str | None) -> tuple:
        if not site:
            return notice("Pick a site first.", "warning"), no_update
        try:
            created = shared_links.create_link(clients(), site, label or "", password or None)
        except (shared_links.SharedLinkError, InvalidDomain) as refused:
            return notice(str(refused), "warning"), no_update
        url = request.host_url.rstrip("/") + created.path()
        return (
            html.Div(
                [
                    html.Span("New link (shown only now): "),
                    html.Code(url, id="share-new-url"),
                ],
                className="notice notice-info",
                role="status",
            ),
            "",
        )

    @app.callback(
        Output("share-list", "children"),
        Input(SETTINGS_SITE, "data"),
        Input("share-created", "children"),
        Input({"type": REVOKE, "id": ALL}, "n_clicks"),
        prevent_initial_call=True,  # loaded when the Settings view opens
    )
    def links(site: str | None, _: object, revokes: list[int | None]) -> object:
        if not site:
            return None
        triggered = clicked()  # a list re-rendered also fires, with fresh buttons: only a click counts
        if isinstance(triggered, dict) and triggered.get("type") == REVOKE:
            try:
                shared_links.revoke_link(clients(), site, str(triggered["id"]))
            except shared_links.SharedLinkError as refused:
                return notice(str(refused), "warning")
        try:
            found = shared_links.list_links(clients(), site)
        except InvalidDomain as refused:
            return notice(str(refused), "warning")
        if not found:
            return html.P("No shared links yet.", className="hint")
        return html.Ul([_row(link) for link in found], className="share-links")


def _row(link: shared_links.SharedLink) -> html.Li:
    details = [
        html.Strong(link.label or "(no label)"),
        f" · {link.id} · created {link.created_at:%Y-%m-%d %H:%M} UTC",
        " · password" if link.has_password else "",
    ]
    if link.revoked:
        return html.Li([*details, html.Span(" · revoked", className="share-revoked")], className="share-link")
    return html.Li(
        [*details, " ", html.Button("Revoke", id={"type": REVOKE, "id": link.id}, className="button-quiet")],
        className="share-link",
    )
