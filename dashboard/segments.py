"""Saved segments in the dashboard and Plausible's v2 API (storage/segments.py holds them).

A segment is a list of Plausible v2 filters. Tally checks it with the v2 parser when it is
added: the dashboard applies a segment as the StatsQuery's filter expression (`where`) and goal,
so a segment holds page-view conditions (event:page, visit:country/device/browser/os,
event:props:*) and at most one goal; visit-property conditions (source, UTM, entry and exit
page) are answered by the v2 API's session report only, so they are refused in segments.
In the v2 API a top-level `["is", "segment", [id]]` is replaced by the segment's filters.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from clickhouse_connect.driver.client import Client
from dash import Dash, Input, Output, State, no_update
from dash.exceptions import PreventUpdate

from dashboard.friendly_errors import friendly
from dashboard.plausible_query import Filters, QueryError, filters
from dashboard.store import ClientFactory
from storage.queries import GOAL_FILTER, StatsQuery
from storage.segments import InvalidSegment, find_segment, list_segments

SEGMENT_FILTER = "segment"  # the dashboard's filters store: {"segment": name}
SEGMENT_DIMENSION = "segment"  # Plausible's ["is", "segment", [id]]


def checked(items: list[Any]) -> Filters:
    """The parsed filters of a segment Tally can apply everywhere, or InvalidSegment."""
    try:
        parsed = filters(items)
    except QueryError as error:
        raise InvalidSegment(f"filters: {error}") from None
    if parsed.visits is not None:
        raise InvalidSegment(
            "filters: a segment filters page views (event:page, visit:country, visit:device, "
            "visit:browser, visit:os, event:props:*, event:goal); visit:source, visit:utm_* and "
            "entry/exit page filters are not supported in segments"
        )
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


def applied(client: Client, q: StatsQuery) -> StatsQuery:
    """`q` with the dashboard's segment filter (if any) turned into its expression and goal."""
    name = q.filters.get(SEGMENT_FILTER)
    if name is None:
        return q
    rest = {key: value for key, value in q.filters.items() if key != SEGMENT_FILTER}
    parsed = checked(find_segment(client, q.site, name).filters)
    if parsed.goal:
        rest[GOAL_FILTER] = parsed.goal
    return replace(q, filters=rest, where=parsed.where)


def register_segment_picker(app: Dash, clients: ClientFactory) -> None:
    @app.callback(Output("segment", "options"), Input("site", "value"))
    @friendly(lambda message: [])
    def segment_options(site: str | None) -> list[dict[str, str]]:
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
