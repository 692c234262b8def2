"""The Realtime tab: the last 30 minutes by page, source and country, refreshed every few
seconds (storage/queries/realtime_breakdowns.py says what each number counts; the archive answers)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from dash import Dash, Input, Output, html
from dash.exceptions import PreventUpdate

from dashboard import components, display
from dashboard.components import notice, panel
from dashboard.friendly_errors import friendly
from dashboard.store import ClientFactory
from dashboard.view_tabs import REALTIME_TAB
from storage.queries.realtime_breakdowns import REALTIME_BREAKDOWNS, realtime_breakdown

ROWS = 10
TITLES = {"pages": "Pages", "sources": "Sources", "countries": "Countries"}
QUIET = "No page views in the last 30 minutes."


def realtime_section() -> html.Section:
    return html.Section(
        [
            html.Div(id="realtime-totals", className="realtime-totals"),
            html.Div(
                [panel(TITLES[name], [html.Div(id=f"realtime-{name}")]) for name in REALTIME_BREAKDOWNS],
                className="grid",
            ),
        ],
        id="realtime-section",
        style={"display": "none"},
    )


def register_realtime(app: Dash, clients: ClientFactory, clock: Any) -> None:
    @app.callback(
        Output("realtime-totals", "children"),
        *(Output(f"realtime-{name}", "children") for name in REALTIME_BREAKDOWNS),
        Input("site", "value"),
        Input("tabs", "value"),
        Input("refresh", "n_intervals"),
    )
    @friendly(lambda message: (notice(message, "error"), *([None] * len(REALTIME_BREAKDOWNS))))
    def realtime(site: str | None, tab: str, _: int | None) -> tuple[Any, ...]:
        if tab != REALTIME_TAB:  # a hidden tab is not refreshed
            raise PreventUpdate
        if not site:
            return notice("Pick a site first."), *([None] * len(REALTIME_BREAKDOWNS))
        now: datetime = clock()
        reports = {name: realtime_breakdown(clients(), site, name, now, ROWS) for name in REALTIME_BREAKDOWNS}
        first = next(iter(reports.values()))
        totals = html.Div(
            [
                html.Strong(display.count(first.visitors), id="realtime-visitors"),
                html.Span(" visitors · "),
                html.Strong(display.count(first.pageviews), id="realtime-pageviews"),
                html.Span(" page views in the last 30 minutes", className="muted"),
            ]
        )
        lists = (
            components.breakdown_list(report.rows, REALTIME_BREAKDOWNS[name], None, QUIET)
            for name, report in reports.items()
        )
        return totals, *lists
