"""The signed-in operator's panels for the site in the header's picker: import history (an upload
of a Plausible or GA4 export, as `tally import` does; the imported files, each removable, as
`tally import --list` and `--remove`) and email reports (subscribe, list,
unsubscribe, as `tally reports` does). Like the Share panel they are on the operator's page only,
and a shared session is refused their callbacks by dashboard/sharing.py's guard (they are not
the Overview's).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from dash import ALL, Dash, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate

from dashboard.clicks import clicked
from dashboard.components import notice, panel, removable_list
from dashboard.imports_panel import card
from dashboard.store import ClientFactory
from dashboard.view_tabs import SETTINGS_SITE
from storage import imports
from storage import report_subscriptions as subscriptions
from storage.sites import InvalidDomain

UNSUBSCRIBE = "report-unsubscribe"
IMPORT_REMOVE = "import-remove"
MAX_UPLOAD_BYTES = 20 * 1024 * 1024  # bigger exports: `tally import` (200 MiB)
# dcc.Upload's max_size is the browser's check only: a hand-made callback carries any size, so
# the server refuses base64 text longer than MAX_UPLOAD_BYTES encode to before decoding it.
MAX_UPLOAD_BASE64 = 4 * -(-MAX_UPLOAD_BYTES // 3)


def site_settings_panels() -> list[html.Section]:
    return [
        panel(
            "Import history",
            [
                html.P(
                    "Bring a site's history from Plausible (its CSV export, the zip) or Google Analytics 4 "
                    "(CSV files with the Data API's names). Kept as daily aggregates, shown in the card "
                    "marked Imported; the same file twice changes nothing.",
                    className="hint",
                ),
                dcc.RadioItems(
                    id="import-origin",
                    options=[{"label": "Plausible", "value": "plausible"}, {"label": "GA4", "value": "ga4"}],
                    value="plausible",
                    inline=True,
                    className="panel-tabs",
                    inputClassName="panel-tab-input",
                    labelClassName="panel-tab",
                ),
                dcc.Upload(
                    html.Button("Choose an export…", className="button-primary"),
                    id="import-upload",
                    max_size=MAX_UPLOAD_BYTES,
                    multiple=False,
                ),
                html.Div(id="import-status", role="status"),
                html.Div(id="import-files"),
            ],
            id="import-panel",
        ),
        panel(
            "Email reports",
            [
                html.P(
                    "A weekly (Monday to Sunday) or monthly summary of this site, sent through the SMTP "
                    "server in TALLY_SMTP_HOST.",
                    className="hint",
                ),
                html.Div(
                    [
                        dcc.Input(
                            id="report-email", type="email", placeholder="name@example.com", maxLength=254
                        ),
                        dcc.RadioItems(
                            id="report-frequency",
                            options=[
                                {"label": "Weekly", "value": "weekly"},
                                {"label": "Monthly", "value": "monthly"},
                            ],
                            value="weekly",
                            inline=True,
                        ),
                        html.Button(
                            "Subscribe", id="report-subscribe", className="button-primary", n_clicks=0
                        ),
                    ],
                    className="share-form",
                ),
                html.Div(id="report-status", role="status"),
                html.Div(id="report-list"),
            ],
            id="reports-panel",
        ),
    ]


def register_site_settings(app: Dash, clients: ClientFactory) -> None:
    @app.callback(
        Output("import-status", "children"),
        Output("imported-history", "children", allow_duplicate=True),
        Output("import-upload", "contents"),  # emptied: the same file again is a new upload
        Input("import-upload", "contents"),
        State("import-upload", "filename"),
        State("import-origin", "value"),
        State("site", "value"),
        State("period", "data"),
        State("filters", "data"),
        prevent_initial_call=True,
    )
    def upload(
        contents: str | None, filename: str | None, origin: str, site: str | None, period: dict, filters: dict
    ) -> tuple[Any, Any, None]:
        if not contents or not filename:
            raise PreventUpdate
        if not site:
            return notice("Pick a site first.", "warning"), no_update, None
        _, comma, encoded = contents.partition(",")  # data:<type>;base64,<the file>
        if len(encoded) > MAX_UPLOAD_BASE64:
            too_big = f"larger than {MAX_UPLOAD_BYTES // 2**20} MiB; use tally import"
            return notice(f"{filename}: {too_big}", "warning"), no_update, None
        try:
            data = base64.b64decode(encoded, validate=True) if comma else None
        except binascii.Error:
            data = None
        if data is None:
            return notice(f"{filename}: could not be read", "warning"), no_update, None
        try:
            files = imports.read_bytes(filename, data, origin)  # type: ignore[arg-type]
            result = imports.import_files(clients(), site, files, origin)  # type: ignore[arg-type]
        except (imports.InvalidImport, InvalidDomain) as refused:
            return notice(str(refused), "warning"), no_update, None
        summary = html.Div(_import_summary(result), id="import-result", className="notice notice-info")
        return summary, card(clients(), site, period, filters), None  # the Imported card, at once

    @app.callback(
        Output("import-files", "children"),
        Output("imported-history", "children", allow_duplicate=True),
        Input(SETTINGS_SITE, "data"),
        Input("import-status", "children"),
        Input({"type": IMPORT_REMOVE, "id": ALL}, "n_clicks"),
        State("period", "data"),
        State("filters", "data"),
        prevent_initial_call=True,
    )
    def imported_files(
        site: str | None, _: object, clicks: list[int | None], period: dict | None, filters: dict | None
    ) -> tuple[Any, Any]:
        if not site:
            return None, no_update
        triggered, changed = clicked(), no_update  # a list re-rendered also fires: only a click counts
        if isinstance(triggered, dict):
            try:
                imports.remove_import(clients(), site, triggered["id"])
            except imports.InvalidImport as refused:
                return notice(str(refused), "warning"), no_update
            changed = card(clients(), site, period, filters)  # the Imported card, at once
        return imported_list(imports.list_imports(clients(), site)), changed

    @app.callback(
        Output("report-status", "children"),
        Output("report-email", "value"),
        Input("report-subscribe", "n_clicks"),
        State("site", "value"),
        State("report-email", "value"),
        State("report-frequency", "value"),
        prevent_initial_call=True,
    )
    def subscribe(_: int, site: str | None, email: str | None, frequency: str) -> tuple[Any, Any]:
        if not site:
            return notice("Pick a site first.", "warning"), no_update
        try:
            added = subscriptions.subscribe(clients(), site, email or "", frequency)  # type: ignore[arg-type]
        except (subscriptions.InvalidSubscription, InvalidDomain) as refused:
            return notice(str(refused), "warning"), no_update
        return notice(f"{added.email} receives the {added.frequency} report."), ""

    @app.callback(
        Output("report-list", "children"),
        Input(SETTINGS_SITE, "data"),
        Input("report-status", "children"),
        Input({"type": UNSUBSCRIBE, "email": ALL, "frequency": ALL}, "n_clicks"),
        prevent_initial_call=True,  # loaded when the Settings view opens
    )
    def listed(site: str | None, _: object, clicks: list[int | None]) -> Any:
        if not site:
            return None
        triggered = clicked()  # a list re-rendered also fires, with fresh buttons: only a click counts
        if isinstance(triggered, dict):
            try:
                subscriptions.unsubscribe(clients(), site, triggered["email"], triggered["frequency"])
            except subscriptions.InvalidSubscription as refused:
                return notice(str(refused), "warning")
        subscribers = [
            (
                html.Strong(s.email),
                s.frequency,
                html.Button(
                    "Unsubscribe",
                    id={"type": UNSUBSCRIBE, "email": s.email, "frequency": s.frequency},
                    className="button-quiet",
                ),
            )
            for s in subscriptions.list_subscriptions(clients(), site)
        ]
        return removable_list(subscribers, "No subscribers yet.", "share-link report-subscription")


def imported_list(records: list[imports.ImportRecord]) -> Any:
    files = [
        (
            html.Strong(record.file_name),
            f"{record.origin} · {record.first_day} to {record.last_day}",
            html.Button(
                "Remove", id={"type": IMPORT_REMOVE, "id": record.import_id}, className="button-quiet"
            ),
        )
        for record in records
    ]
    return removable_list(files, "Nothing imported yet.", "share-link imported-file")


def _import_summary(result: imports.ImportResult) -> str:
    parts = []
    if result.imported:
        first, last = result.days or ("-", "-")
        parts.append(f"Imported {len(result.imported)} file(s): {first} to {last}.")
        if note := result.overlap_note():
            parts.append(f"{note[0].upper()}{note[1:]}.")
    if result.already:
        parts.append(f"Already imported, unchanged: {', '.join(result.already)}.")
    return " ".join(parts)
