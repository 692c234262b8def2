"""The Visitor identity panel: how long the site's visitor ids live (storage/site_identity.py),
shown and changed from the dashboard as with `tally sites identity` and `PUT /api/v1/identity`.
Its callbacks change a site's setting, so app.py registers them with the other settings panels'
(admins and owners only: dashboard/access.py; refused to shared links: dashboard/sharing.py)."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from dashboard.components import notice, panel
from dashboard.store import ClientFactory
from dashboard.view_tabs import SETTINGS_SITE
from storage import site_identity
from storage.site_identity import InvalidRotation

OPTIONS = [
    {"label": "Daily (default): a visitor is recognised within one UTC day", "value": "daily"},
    {"label": "Weekly: within one ISO week, Monday to Sunday UTC", "value": "weekly"},
    {"label": "Monthly: within one calendar month UTC (Umami's default)", "value": "monthly"},
]


def identity_panel() -> html.Section:
    return panel(
        "Visitor identity",
        [
            html.P(
                "A visitor id is a keyed hash of the site, the IP address and the browser's user agent, "
                "with a random salt that is replaced at the end of each period and then deleted: no cookie, "
                "no fingerprinting. A longer period lets the Retention tab recognise a visitor coming back "
                "within it, and makes the visitor recognisable for that long. The change applies to events "
                "from now on; an id never survives it.",
                className="hint",
            ),
            dcc.RadioItems(id="identity-rotation", options=OPTIONS, className="identity-options"),
            html.Button("Save", id="identity-save", className="button-primary", n_clicks=0),
            html.Div(id="identity-status", role="status"),
        ],
        id="identity-panel",
    )


def register_identity_panel(app: Dash, clients: ClientFactory) -> None:
    @app.callback(
        Output("identity-rotation", "value"), Input(SETTINGS_SITE, "data"), prevent_initial_call=True
    )
    def shown(site: str | None) -> Any:
        if not site:
            raise PreventUpdate
        return site_identity.site_rotation(clients(), site)

    @app.callback(
        Output("identity-status", "children"),
        Input("identity-save", "n_clicks"),
        State("site", "value"),
        State("identity-rotation", "value"),
        prevent_initial_call=True,
    )
    def save(clicks: int | None, site: str | None, rotation: str | None) -> Any:
        if not clicks or not site:
            raise PreventUpdate
        try:
            if not site_identity.set_rotation(clients(), site, rotation or ""):
                return notice(f"{site} is not registered (see 'tally sites list').", "error")
        except InvalidRotation as refused:
            return notice(str(refused), "error")
        return notice(f"Visitor ids of {site} now rotate {rotation}, from this moment on.")
