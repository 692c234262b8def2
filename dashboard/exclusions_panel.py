"""The Exclusions panel: a site's excluded IP ranges, paths and countries (storage/exclusions.py),
listed, added and removed from the dashboard as with `tally sites exclude`. Its callbacks change
a site's settings, so app.py registers them with the goals' and shares' (admins and owners only:
dashboard/accounts.py; refused to shared links: dashboard/sharing.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clickhouse_connect.driver.client import Client
from dash import ALL, Dash, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate

from dashboard.clicks import clicked
from dashboard.components import notice, panel
from dashboard.store import ClientFactory
from dashboard.view_tabs import SETTINGS_SITE
from storage import exclusions as store
from storage.sites import InvalidDomain

REMOVE = "exclusion-remove"
KIND_LABELS = {"ip": "IP range", "path": "Path", "country": "Country"}
PLACEHOLDERS = "10.0.0.0/8 · 2001:db8::/32 · /admin/* · DE"


def exclusions_panel() -> html.Section:
    return panel(
        "Exclusions",
        [
            dcc.Store(id="exclusions-version", data=0),
            html.P(
                "Traffic from these IP ranges, to these paths or from these countries is dropped by the "
                "collector within seconds and never archived (not retroactive).",
                className="hint",
            ),
            html.Div(
                [
                    dcc.Dropdown(
                        id="exclusion-kind",
                        options=[{"label": label, "value": kind} for kind, label in KIND_LABELS.items()],
                        value="ip",
                        clearable=False,
                        searchable=False,
                    ),
                    dcc.Input(id="exclusion-value", placeholder=PLACEHOLDERS),
                    html.Button("Exclude", id="exclusion-add", className="button-primary", n_clicks=0),
                ],
                className="share-form",
            ),
            html.Div(id="exclusion-status", role="status"),
            html.Div(id="exclusions-list"),
        ],
        id="exclusions-panel",
    )


def register_exclusions_panel(app: Dash, clients: ClientFactory) -> None:
    @app.callback(
        Output("exclusions-list", "children"),
        Input(SETTINGS_SITE, "data"),
        Input("exclusions-version", "data"),
        prevent_initial_call=True,  # loaded when the Settings view opens
    )
    def listed(site: str | None, _: int) -> Any:
        if not site:
            raise PreventUpdate
        found = store.list_exclusions(clients(), site)
        if not found:
            return html.P("Nothing excluded: every visit counts.", className="hint")
        return html.Ul(
            [
                html.Li(
                    [
                        f"{KIND_LABELS[e.kind]}: ",
                        html.Code(e.value),
                        " ",
                        html.Button(
                            "Remove",
                            id={"type": REMOVE, "value": f"{e.kind}:{e.value}"},
                            className="button-quiet",
                        ),
                    ]
                )
                for e in found
            ],
            id="exclusions-items",
        )

    # Add and Remove are two callbacks: a click on Add must not wait on the list re-rendering
    # its Remove buttons (dashboard/clicks.py).
    @app.callback(
        Output("exclusion-status", "children"),
        Output("exclusions-version", "data"),
        Input("exclusion-add", "n_clicks"),
        State("site", "value"),
        State("exclusion-kind", "value"),
        State("exclusion-value", "value"),
        State("exclusions-version", "data"),
        prevent_initial_call=True,
    )
    def add(
        clicks: int | None, site: str | None, kind: str | None, value: str | None, version: int
    ) -> tuple[Any, Any]:
        if not site or not clicks:  # not a click: the button (re)appearing
            raise PreventUpdate
        return changed(store.add_exclusions, site, kind, value, version, "Excluded {}.")

    @app.callback(
        Output("exclusion-status", "children", allow_duplicate=True),
        Output("exclusions-version", "data", allow_duplicate=True),
        Input({"type": REMOVE, "value": ALL}, "n_clicks"),
        State("site", "value"),
        State("exclusions-version", "data"),
        prevent_initial_call=True,
    )
    def remove(_: list, site: str | None, version: int) -> tuple[Any, Any]:
        trigger = clicked()
        if not site or trigger is None:
            raise PreventUpdate  # a button (re)appearing, not a click
        kind, _, value = str(trigger["value"]).partition(":")
        return changed(store.remove_exclusions, site, kind, value, version, "Counting {} again.")

    def changed(
        apply: Callable[[Client, list[store.Exclusion]], object],
        site: str, kind: str | None, value: str | None, version: int, done: str,
    ) -> tuple[Any, Any]:  # fmt: skip
        """`apply` the exclusion the form or the button names; what the panel then says."""
        try:
            wanted = exclusions_of(site, kind, value)
            apply(clients(), wanted)
        except (store.InvalidExclusion, InvalidDomain) as refused:
            return notice(str(refused).removeprefix("--"), "error"), no_update
        return notice(done.format(wanted[0].value)), version + 1


def exclusions_of(site: str, kind: str | None, value: str | None) -> list[store.Exclusion]:
    """The one exclusion a form or a Remove button names, as the store checks it."""
    value = value or ""
    return store.make_exclusions(
        site,
        [value] if kind == "ip" else [],
        [value] if kind == "path" else [],
        [value] if kind == "country" else [],
    )
