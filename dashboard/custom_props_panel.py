"""The Custom properties section of the Settings view: the site's allow-list of custom event
properties (storage/custom_properties.py) that the Overview's Properties report offers, as
Plausible's "Custom Properties" site setting, `tally props` and the Sites API's custom-props
endpoints have it. Admins and owners only (dashboard/access.py); never a shared link. An add or a
remove bumps `custom-props-version` (kept in the Overview's Properties panel, dashboard/goals_panel.py),
so the report's picker follows at once, without a reload."""

from __future__ import annotations

from typing import Any

from dash import ALL, Dash, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate

from dashboard.clicks import clicked
from dashboard.components import notice, panel
from dashboard.store import ClientFactory
from dashboard.view_tabs import SETTINGS_SITE
from storage import custom_properties as store
from storage.sites import InvalidDomain

REMOVE = "custom-prop-remove"


def custom_props_panel() -> html.Section:
    return panel(
        "Custom properties",
        [
            html.P(
                "The properties the Properties report offers. None listed: it offers every property "
                "your events carry. Every property is recorded and counted either way.",
                className="hint",
            ),
            html.Div(
                [
                    dcc.Input(id="custom-prop-name", placeholder="author · plan · logged_in"),
                    html.Button("Add", id="custom-prop-add", className="button-primary", n_clicks=0),
                ],
                className="share-form",
            ),
            html.Div(id="custom-prop-status", role="status"),
            html.Div(id="custom-props-list"),
        ],
        id="custom-props-panel",
    )


def register_custom_props_panel(app: Dash, clients: ClientFactory) -> None:
    @app.callback(
        Output("custom-props-list", "children"),
        Input(SETTINGS_SITE, "data"),
        Input("custom-props-version", "data"),
        prevent_initial_call=True,  # loaded when the Settings view opens
    )
    def listed(site: str | None, _: int) -> Any:
        if not site:
            raise PreventUpdate
        names = store.list_properties(clients(), site)
        if not names:
            return html.P("None listed: the report offers every property.", className="hint")
        return html.Ul(
            [
                html.Li(
                    [
                        html.Code(name),
                        " ",
                        html.Button("Remove", id={"type": REMOVE, "name": name}, className="button-quiet"),
                    ]
                )
                for name in names
            ],
            id="custom-props-items",
        )

    # Add and Remove are two callbacks: a click on Add must not wait on the list re-rendering
    # its Remove buttons (dashboard/clicks.py).
    @app.callback(
        Output("custom-prop-status", "children"),
        Output("custom-props-version", "data"),
        Input("custom-prop-add", "n_clicks"),
        State("site", "value"),
        State("custom-prop-name", "value"),
        State("custom-props-version", "data"),
        prevent_initial_call=True,
    )
    def add(clicks: int | None, site: str | None, name: str | None, version: int) -> tuple[Any, Any]:
        if not site or not clicks:  # not a click: the button (re)appearing
            raise PreventUpdate
        try:
            added = store.clean_name(name)
            if not store.add_property(clients(), site, added):
                return notice(f"{added} is listed already."), no_update
        except (store.InvalidProperty, InvalidDomain) as refused:
            return notice(str(refused), "error"), no_update
        return notice(f"Offering {added} in the Properties report."), version + 1

    @app.callback(
        Output("custom-prop-status", "children", allow_duplicate=True),
        Output("custom-props-version", "data", allow_duplicate=True),
        Input({"type": REMOVE, "name": ALL}, "n_clicks"),
        State("site", "value"),
        State("custom-props-version", "data"),
        prevent_initial_call=True,
    )
    def remove(_: list, site: str | None, version: int) -> tuple[Any, Any]:
        trigger = clicked()
        if not site or trigger is None:
            raise PreventUpdate  # a button (re)appearing, not a click
        removed = str(trigger["name"])
        try:
            store.remove_property(clients(), site, removed)
        except (store.InvalidProperty, InvalidDomain) as refused:
            return notice(str(refused), "error"), no_update
        return notice(f"No longer offering {removed}."), version + 1
