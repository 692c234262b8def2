"""The Annotations section of the Settings view: a site's notes on its timeline
(storage/annotations.py), added on a date and removed, as with `tally annotations` and
`/api/v1/annotations`. The Overview's "Over time" chart draws every annotation of its period,
Tally's own included, for everyone who reads the site (dashboard/figures.py); this section is the
admins' (dashboard/access.py; cut from a viewer's page by dashboard/accounts.py, refused to
shared links by dashboard/sharing.py). A click on a point of the "Over time" chart opens it with
that date filled in (dashboard/settings_view.py `note_on_clicked_day`)."""

from __future__ import annotations

from typing import Any

from dash import ALL, ClientsideFunction, Dash, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate
from flask import request

from dashboard.accounts import current_user
from dashboard.clicks import clicked
from dashboard.components import notice, panel
from dashboard.store import ClientFactory
from dashboard.view_tabs import SETTINGS_SITE
from storage import annotations as store
from storage import users
from tally.refusal import Refused
from tally.settings import Settings

REMOVE = "annotation-remove"
SHOWN = 50  # the newest notes listed here; the API and the CLI list any range


def annotations_panel() -> html.Section:
    return panel(
        "Annotations",
        [
            html.P(
                "Notes on the Overview's charts: a release, a campaign, an outage (or click a point of "
                "the Over time chart). Everyone who reads the site sees them; Tally adds its own "
                "(definitions changed, imports, alerts).",
                className="hint",
            ),
            html.Div(
                [
                    dcc.Input(id="annotation-date", type="date", placeholder="YYYY-MM-DD"),
                    dcc.Input(
                        id="annotation-text",
                        type="text",
                        maxLength=store.MAX_TEXT,
                        placeholder="Launched the new pricing page",
                        autoComplete="off",
                    ),
                    html.Button("Add", id="annotation-add", className="button-primary", n_clicks=0),
                ],
                className="share-form",
            ),
            html.Div(id="annotation-status", role="status"),
            dcc.Store(id="annotation-in-view"),  # assets/annotations.js: the form scrolled to
            html.Div(id="annotations-list"),
        ],
        id="annotations-panel",
    )


def register_annotations_panel(app: Dash, settings: Settings, clients: ClientFactory) -> None:
    app.clientside_callback(
        ClientsideFunction(namespace="tally", function_name="annotationFormInView"),
        Output("annotation-in-view", "data"),
        Input("annotation-status", "children"),
        prevent_initial_call=True,
    )

    @app.callback(
        Output("annotations-list", "children"),
        Input(SETTINGS_SITE, "data"),
        Input("annotations-version", "data"),
        prevent_initial_call=True,  # loaded when the Settings view opens
    )
    def listed(site: str | None, _: int) -> Any:
        if not site:
            raise PreventUpdate
        notes = store.list_notes(clients(), site)[-SHOWN:][::-1]
        if not notes:
            return html.P("No notes yet.", className="hint")
        return html.Ul(
            [
                html.Li(
                    [
                        html.Span(
                            note.day.isoformat() if note.day else note.at.strftime("%Y-%m-%d %H:%M UTC")
                        ),
                        f" · {note.kind} · ",
                        html.Span(note.text, className="annotation-text"),  # text, never markup
                        " ",
                        html.Button("Remove", id={"type": REMOVE, "id": note.id}, className="button-quiet"),
                    ]
                )
                for note in notes
            ],
            id="annotations-items",
        )

    # Add and Remove are two callbacks: the Remove buttons re-render when the list loads, and a
    # callback that also listened to Add was held back meanwhile, so a click on Add could be lost.
    @app.callback(
        Output("annotation-status", "children"),
        Output("annotations-version", "data"),
        Output("annotation-text", "value"),
        Input("annotation-add", "n_clicks"),
        State("site", "value"),
        State("annotation-date", "value"),
        State("annotation-text", "value"),
        State("annotations-version", "data"),
        prevent_initial_call=True,
    )
    def add(
        clicks: int | None, site: str | None, day: str | None, text: str | None, version: int
    ) -> tuple[Any, Any, Any]:
        if not site or not clicks:  # not a click: the button (re)appearing
            raise PreventUpdate
        if not day:
            return notice("Pick the date it is about.", "error"), no_update, no_update
        author = author_email()
        try:
            note = store.add(clients(), site, store.parse_day(day), text or "", author)
        except Refused as refused:
            return notice(str(refused), "error"), no_update, no_update
        audited(author, "annotation_added", f"{site} {note.id} {note.kind} {note.day}", site)
        return notice(f"Added a note on {note.day}."), version + 1, ""

    @app.callback(
        Output("annotation-status", "children", allow_duplicate=True),
        Output("annotations-version", "data", allow_duplicate=True),
        Input({"type": REMOVE, "id": ALL}, "n_clicks"),
        State("site", "value"),
        State("annotations-version", "data"),
        prevent_initial_call=True,
    )
    def remove(_: list, site: str | None, version: int) -> tuple[Any, Any]:
        trigger = clicked()
        if not site or trigger is None:
            raise PreventUpdate  # a button (re)appearing, not a click
        author = author_email()
        try:
            removed = store.remove(clients(), site, str(trigger["id"]))
        except Refused as refused:
            return notice(str(refused), "error"), no_update
        audited(author, "annotation_removed", f"{site} {removed.id} {removed.kind}", site)
        return notice(f"Removed the note of {removed.day or removed.at:%Y-%m-%d}."), version + 1

    def author_email() -> str:
        user = current_user()
        return user.email if user is not None else settings.owner_email

    def audited(email: str, action: str, detail: str, site: str) -> None:
        users.record(
            clients(), action, email, "ok", address=request.remote_addr or "", detail=detail, site=site
        )
