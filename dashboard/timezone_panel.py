"""The Time zone panel: the site's IANA zone (storage/sites.py), where its days, weeks and months
start in every report, shown and changed from the dashboard as with `tally sites timezone`. Its
callbacks change a site's setting, so app.py registers them with the other settings panels'
(admins and owners only: dashboard/accounts.py; refused to shared links: dashboard/sharing.py)."""

from __future__ import annotations

from functools import cache
from html import escape
from typing import Any
from zoneinfo import available_timezones

from dash import Dash, Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from dashboard.components import notice, panel
from dashboard.store import ClientFactory
from dashboard.view_tabs import SETTINGS_SITE
from storage import sites
from storage.calendar import InvalidTimezone
from storage.sites import InvalidDomain

ZONE_LIST_ID = "timezone-names"


@cache
def zone_names() -> list[str]:
    return sorted(available_timezones())


def with_zone_names(index_page: str) -> str:
    """The dashboard's page template with the zone names as a plain HTML <datalist> that the
    panel's input suggests from. In the page rather than the layout: as ~600 Dash components the
    list made up two thirds of the layout, and the renderer revisits every component on every
    callback answer, which slowed the whole first load."""
    options = "".join(f'<option value="{escape(name)}"></option>' for name in zone_names())
    datalist = f'<datalist id="{ZONE_LIST_ID}">{options}</datalist>'
    return index_page.replace("{%app_entry%}", "{%app_entry%}\n" + datalist, 1)


def timezone_panel() -> html.Section:
    return panel(
        "Time zone",
        [
            html.P(
                "Days, weeks and months of this site's reports start at midnight in this zone; "
                "changing it changes every report at once (the events stay as they are).",
                className="hint",
            ),
            html.Div(
                [
                    dcc.Input(
                        id="timezone-name",
                        type="text",
                        list=ZONE_LIST_ID,  # the page's datalist (with_zone_names)
                        placeholder="Europe/Berlin",
                        debounce=False,
                        autoComplete="off",
                    ),
                    html.Button("Save", id="timezone-save", className="button-primary", n_clicks=0),
                ],
                className="share-form",
            ),
            html.Div(id="timezone-status", role="status"),
        ],
        id="timezone-panel",
    )


def register_timezone_panel(app: Dash, clients: ClientFactory) -> None:
    @app.callback(Output("timezone-name", "value"), Input(SETTINGS_SITE, "data"), prevent_initial_call=True)
    def shown(site: str | None) -> Any:
        if not site:
            raise PreventUpdate
        return sites.site_timezone(clients(), site)

    @app.callback(
        Output("timezone-status", "children"),
        Input("timezone-save", "n_clicks"),
        State("site", "value"),
        State("timezone-name", "value"),
        prevent_initial_call=True,
    )
    def save(clicks: int | None, site: str | None, name: str | None) -> Any:
        if not clicks or not site:
            raise PreventUpdate
        try:
            if not sites.set_timezone(clients(), site, name or ""):
                return notice(f"{site} is not registered (see 'tally sites list').", "error")
        except (InvalidTimezone, InvalidDomain):
            return notice(f"{name!r} is not an IANA time zone (e.g. Europe/Berlin).", "error")
        return notice(f"Days of {site} now start at midnight {(name or '').strip()}.")
