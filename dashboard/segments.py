"""Saved segments in the dashboard and Plausible's v2 API (storage/segments.py holds them).

A segment is a list of Plausible v2 filters. Tally checks it with the v2 parser when it is
added; a question applies it (storage/queries/questions.py: with_saved_segment) as the
StatsQuery's filter expression (`where`) and goal,
so a segment holds page-view conditions (event:page, visit:country/device/browser/os,
event:props:*), visit conditions (source, UTM fields, entry and exit page, channel: the events
of the visits that came that way, storage/queries/session_filters.py) and at most one goal.
In the v2 API a top-level `["is", "segment", [id]]` is replaced by the segment's filters.

The Segments panel (admins and owners: its callbacks are settings callbacks, app.py) saves the
filters in force as a segment, renames one, replaces its filters with those in force, removes
one; everyone who sees a site applies its segments with the picker.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from clickhouse_connect.driver.client import Client
from dash import ALL, Dash, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate

from dashboard import display
from dashboard.clicks import clicked
from dashboard.components import notice, panel
from dashboard.friendly_errors import friendly
from dashboard.http_api.plausible.query import (
    PROPS_DIMENSION,
    Filters,
    QueryError,
    filters,
)
from dashboard.store import ClientFactory
from dashboard.view_tabs import SETTINGS_SITE
from storage.queries import Logic, UnsupportedQuery, questions, validate_expression
from storage.queries.contract import PROPS_FILTER
from storage.queries.questions import PLAUSIBLE_NAMES
from storage.segments import (
    MAX_NAME,
    InvalidSegment,
    Segment,
    add_segment,
    find_segment,
    list_segments,
    remove_segment,
    rename_segment,
    replace_filters,
)

SEGMENT_FILTER = questions.SEGMENT_FILTER  # the dashboard's filters store: {"segment": name}
SEGMENT_DIMENSION = "segment"  # Plausible's ["is", "segment", [id]]


def checked(items: list[Any]) -> Filters:
    """The parsed filters of a segment Tally can apply everywhere, or InvalidSegment."""
    try:
        parsed = filters(items)
    except QueryError as error:
        raise InvalidSegment(f"filters: {error}") from None
    if parsed.visits is not None:  # the events of the visits passing them (contract.py)
        where = parsed.visits if parsed.where is None else Logic("and", (parsed.where, parsed.visits))
        parsed = replace(parsed, where=where, visits=None)
    try:
        if parsed.where is not None:
            validate_expression(parsed.where)  # e.g. a pattern that is no RE2 expression
        # what a question applying it reads (storage/queries/questions.py): the same expression
        questions.segment_filters(items)
    except UnsupportedQuery as error:
        raise InvalidSegment(f"filters: {error}") from None
    return parsed


def expand(client: Client, site: str, items: list[Any]) -> list[Any]:
    """`items` with each top-level `["is", "segment", [id]]` replaced by that segment's filters."""
    expanded: list[Any] = []
    for item in items:
        if isinstance(item, list) and len(item) == 3 and item[:2] == ["is", SEGMENT_DIMENSION]:
            ids = item[2]
            if not isinstance(ids, list) or len(ids) != 1 or not isinstance(ids[0], int | str):
                raise QueryError(f"Invalid filter '{json.dumps(item)[:200]}': one segment id per filter.")
            try:
                expanded.extend(find_segment(client, site, ids[0]).filters)
            except InvalidSegment:
                raise QueryError(
                    f"Invalid filter '{json.dumps(item)[:200]}': no segment {ids[0]} for this site."
                ) from None
        else:
            expanded.append(item)
    return expanded


def register_segment_picker(app: Dash, clients: ClientFactory) -> None:
    @app.callback(Output("segment", "options"), Input("site", "value"), Input("segments-version", "data"))
    @friendly(lambda message: [])
    def segment_options(site: str | None, _: int | None) -> list[dict[str, str]]:
        if not site:
            return []
        return [{"label": s.name, "value": s.name} for s in list_segments(clients(), site)]

    @app.callback(
        Output("filters", "data", allow_duplicate=True),
        Output("segment", "value"),
        Input("segment", "value"),
        State("filters", "data"),
        prevent_initial_call=True,
    )
    def apply_segment(name: str | None, current: dict | None) -> tuple[Any, Any]:
        # The picker is an action: the chip shows the segment in force and removes it.
        if not name:
            raise PreventUpdate
        chosen = dict(current or {})
        if chosen.get(SEGMENT_FILTER) == name:
            return no_update, None
        return {**chosen, SEGMENT_FILTER: name}, None

    # Here, not in the Segments panel's callback: every input of a callback writing the filters
    # must be on every page (a viewer's has no panel; a callback writing `filters` from inputs
    # missing on the page stopped the viewer's page from loading its site list).
    @app.callback(
        Output("filters", "data", allow_duplicate=True),
        Input("segment-changed", "data"),
        State("filters", "data"),
        prevent_initial_call=True,
    )
    def follow_segment(change: dict | None, current: dict | None) -> Any:
        """The applied segment renamed, replaced (its chip alone: the filters added are in it
        now) or deleted in the Segments panel: the filters follow."""
        chosen = dict(current or {})
        if not change or chosen.get(SEGMENT_FILTER) != change.get("old"):
            raise PreventUpdate
        if change.get("new") is None:
            return {key: value for key, value in chosen.items() if key != SEGMENT_FILTER}
        if change.get("only"):
            return {SEGMENT_FILTER: change["new"]}
        return {**chosen, SEGMENT_FILTER: change["new"]}


# -- saving the filters in force as a segment (the Segments panel) ------------------------------

SEGMENTS_PANEL = "segments-panel"
RENAME, UPDATE, REMOVE = "segment-rename", "segment-update", "segment-remove"
NEW_NAME = "segment-new-name"


def filters_in_force(client: Client, site: str, chosen: dict[str, str]) -> list[Any]:
    """The dashboard's filters as a segment's filter list: an applied segment's own filters,
    then one `is` per other filter; InvalidSegment naming a filter no segment can hold."""
    items: list[Any] = []
    for name, value in chosen.items():
        if name == SEGMENT_FILTER:
            items = [*find_segment(client, site, value).filters, *items]
        elif name.startswith(PROPS_FILTER):
            items.append(["is", PROPS_DIMENSION + name.removeprefix(PROPS_FILTER), [value]])
        elif name in PLAUSIBLE_NAMES:
            items.append(["is", PLAUSIBLE_NAMES[name], [value]])
        else:
            label = display.DIMENSION_LABELS.get(name, name).lower()
            raise InvalidSegment(f"a segment cannot hold the {label} filter; remove it first")
    if not items:
        raise InvalidSegment("no filters to save: click a row of a panel to filter first")
    checked(items)
    return items


def segments_panel() -> html.Section:
    return panel(
        "Segments",
        [
            html.P(
                "Save the filters in force as a named segment of this site. Anyone who sees the site "
                "applies it from the segment picker next to the filters.",
                className="hint",
            ),
            html.Div(
                [
                    dcc.Input(id="segment-name", placeholder="Segment name", maxLength=MAX_NAME),
                    html.Button("Save as segment", id="segment-save", className="button-primary", n_clicks=0),
                ],
                className="share-form",
            ),
            html.Div(id="segment-status", role="status"),
            html.Div(id="segments-list"),
        ],
        id=SEGMENTS_PANEL,
    )


def segment_row(segment: Segment) -> html.Li:
    key = str(segment.id)
    return html.Li(
        [
            html.Strong(segment.name, className="segment-name"),
            " ",
            html.Code(describe(segment.filters), className="segment-filters"),
            html.Div(
                [
                    dcc.Input(id={"type": NEW_NAME, "id": key}, placeholder="New name", maxLength=MAX_NAME),
                    html.Button("Rename", id={"type": RENAME, "id": key}, className="button-quiet"),
                    html.Button(
                        "Replace with the filters in force",
                        id={"type": UPDATE, "id": key},
                        className="button-quiet",
                    ),
                    html.Button("Delete", id={"type": REMOVE, "id": key}, className="button-quiet"),
                ],
                className="share-form",
            ),
        ],
        id=f"segment-{key}",
        className="segment-item",
    )


def describe(items: list[Any]) -> str:
    """A segment's filters in one line (its JSON is what `tally segments list` shows too)."""
    return json.dumps(items, ensure_ascii=False)


def register_segment_editing(app: Dash, clients: ClientFactory) -> None:
    """The Segments panel's callbacks: settings (app.py registers them with the goals')."""

    @app.callback(
        Output("segments-list", "children"),
        Input(SETTINGS_SITE, "data"),
        Input("segments-version", "data"),
        prevent_initial_call=True,  # loaded when the Settings view opens
    )
    @friendly(lambda message: notice(message, "error"))
    def listed(site: str | None, _: int | None) -> Any:
        if not site:
            raise PreventUpdate
        found = list_segments(clients(), site)
        if not found:
            return html.P("No segments yet.", className="hint")
        return html.Ul([segment_row(segment) for segment in found], id="segments-items")

    # Save and the rows' buttons are two callbacks: a click on Save must not wait on the list
    # re-rendering its buttons (dashboard/clicks.py).
    @app.callback(
        Output("segment-status", "children"),
        Output("segments-version", "data"),
        Input("segment-save", "n_clicks"),
        State("site", "value"),
        State("segment-name", "value"),
        State("filters", "data"),
        State("segments-version", "data"),
        prevent_initial_call=True,
    )
    def save(
        clicks: int | None, site: str | None, name: str | None, chosen: dict | None, version: int | None
    ) -> tuple[Any, Any]:
        if not site or not clicks:  # not a click: the button (re)appearing
            raise PreventUpdate
        client = clients()
        try:
            saved = add_segment(client, site, name or "", filters_in_force(client, site, dict(chosen or {})))
        except InvalidSegment as refused:
            return notice(str(refused), "error"), no_update
        return notice(f"Saved the segment {saved.name!r}."), (version or 0) + 1

    @app.callback(
        Output("segment-status", "children", allow_duplicate=True),
        Output("segments-version", "data", allow_duplicate=True),
        Output("segment-changed", "data"),
        Input({"type": RENAME, "id": ALL}, "n_clicks"),
        Input({"type": UPDATE, "id": ALL}, "n_clicks"),
        Input({"type": REMOVE, "id": ALL}, "n_clicks"),
        State("site", "value"),
        State({"type": NEW_NAME, "id": ALL}, "value"),
        State({"type": NEW_NAME, "id": ALL}, "id"),
        State("filters", "data"),
        State("segments-version", "data"),
        prevent_initial_call=True,
    )
    def edit(
        _renames: list, _updates: list, _removals: list, site: str | None,
        new_names: list, new_name_ids: list, chosen: dict | None, version: int | None,
    ) -> tuple[Any, Any, Any]:  # fmt: skip
        trigger = clicked()
        if not site or trigger is None:
            raise PreventUpdate  # a button (re)appearing, not a click
        chosen, version = dict(chosen or {}), (version or 0) + 1
        client = clients()
        try:
            segment = find_segment(client, site, trigger["id"])
            # The picker's follow_segment() brings the filters in force along (the chip).
            change = {"old": segment.name, "new": segment.name, "only": False, "version": version}
            if trigger["type"] == RENAME:
                typed = dict(zip((i["id"] for i in new_name_ids), new_names, strict=True)).get(trigger["id"])
                renamed = rename_segment(client, site, segment.id, typed or "")
                message = f"Renamed {segment.name!r} to {renamed.name!r}."
                return notice(message), version, {**change, "new": renamed.name}
            if trigger["type"] == UPDATE:
                replace_filters(client, site, segment.id, filters_in_force(client, site, chosen))
                message = f"{segment.name!r} now holds the filters in force."
                return notice(message), version, {**change, "only": True}
            remove_segment(client, site, segment.name)
            return notice(f"Deleted the segment {segment.name!r}."), version, {**change, "new": None}
        except InvalidSegment as refused:
            return notice(str(refused), "error"), no_update, no_update
