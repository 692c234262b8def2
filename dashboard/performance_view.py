"""The Performance tab: the Web Vitals' p75 by day of the period as trend lines, and
per page each vital's p75 with the share of page views rated good (storage/queries/vitals.py
says what each number is; the stats API's /api/v1/stats/vitals answers the same)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from dash import Dash, Input, Output, dcc, html
from dash.exceptions import PreventUpdate

from dashboard import display, figures
from dashboard.components import notice, panel
from dashboard.friendly_errors import friendly
from dashboard.periods import Period
from dashboard.store import ClientFactory
from dashboard.view_tabs import PERFORMANCE_TAB
from storage.queries import questions
from storage.queries.vitals import VitalsRow, vitals, vitals_by_day
from tally.settings import Settings

PAGES = 20
NOTHING = "No Web Vitals measured in this period yet."
#: The vitals drawn in ms, and their colours; CLS (unitless) on an axis of its own.
TIMED = {"lcp": "#4f46e5", "inp": "#0891b2", "fcp": "#16a34a", "ttfb": "#d97706"}
CLS_COLOUR = "#be185d"
COLUMNS = ("lcp", "inp", "cls", "fcp", "ttfb")
GRAPH_CONFIG = {"displayModeBar": False, "responsive": True}
DAY_MS = 86_400_000  # a tick a day on the trend's date axis


def performance_section() -> html.Section:
    return html.Section(
        [
            panel(
                "Web Vitals \u00b7 p75 by day",
                [dcc.Graph(id="performance-trend", config=GRAPH_CONFIG, figure=figures.message(""))],
            ),
            panel("Web Vitals by page \u00b7 p75", [html.Div(id="performance-pages")]),
        ],
        id="performance-section",
        style={"display": "none"},
    )


def register_performance(app: Dash, settings: Settings, clients: ClientFactory) -> None:
    source = settings.dashboard_source

    @app.callback(
        Output("performance-trend", "figure"),
        Output("performance-pages", "children"),
        Input("site", "value"),
        Input("period", "data"),
        Input("tabs", "value"),
    )
    @friendly(lambda message: (figures.message(message), notice(message, "error")))
    def performance(site: str | None, period_data: dict | None, tab: str) -> tuple[Any, Any]:
        if tab != PERFORMANCE_TAB:  # computed when shown
            raise PreventUpdate
        if not site or not period_data:
            return figures.message("Pick a site first."), None
        period = Period.from_store(period_data)
        q = questions.question(site, period.start, period.end, timezone=period.timezone)
        days = vitals_by_day(clients(), q, source)
        if not days:
            return figures.message(NOTHING), notice(NOTHING)
        return trend(days), pages_table(vitals(clients(), q, "event:page", PAGES, source))


def trend(days: list[VitalsRow]) -> go.Figure:
    """A line per vital of its p75 each day: the timed ones in ms, CLS on the right axis."""
    figure = go.Figure()
    x = [row.value for row in days]
    for vital, colour in TIMED.items():
        figure.add_trace(_line(x, days, vital, colour, f"{vital.upper()}: %{{y:,}} ms"))
    figure.add_trace(_line(x, days, "cls", CLS_COLOUR, "CLS: %{y:.3f}", yaxis="y2"))
    figure.update_layout(
        height=300,
        margin={"l": 56, "r": 48, "t": 12, "b": 36},
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
        font=figures.FONT,
        hovermode="x unified",
        legend={"orientation": "h", "y": -0.2},
        yaxis={"title": "ms", "rangemode": "tozero", "gridcolor": figures.GRID},
        # CLS on a fixed scale up to past its "poor" threshold (0.25), so that its line does not
        # land on the times' by autoscaling alike.
        yaxis2={
            "title": "CLS",
            "overlaying": "y",
            "side": "right",
            "range": [0, cls_top(days)],
            "showgrid": False,
        },
        xaxis={"type": "date", "tickformat": "%d %b", "dtick": DAY_MS, "showgrid": False},
    )
    return figure


def cls_top(days: list[VitalsRow]) -> float:
    highest = max((row.vitals["cls"].p75 for row in days if "cls" in row.vitals), default=0.0)
    return max(0.3, highest * 1.15)


def _line(
    x: list[str | None], days: list[VitalsRow], vital: str, colour: str, hover: str, **axis: str
) -> go.Scatter:
    y = [row.vitals[vital].p75 if vital in row.vitals else None for row in days]
    return go.Scatter(
        x=x, y=y, name=vital.upper(), mode="lines+markers", line={"color": colour, "width": 2},
        hovertemplate=f"{hover}<extra></extra>", connectgaps=False, **axis,
    )  # fmt: skip


def pages_table(rows: list[VitalsRow]) -> html.Table:
    """Per page: the page views with LCP measured, each vital's p75, the share of good LCPs."""
    header = html.Tr(
        [
            html.Th("Page"),
            html.Th("Measured"),
            *(html.Th(vital.upper()) for vital in COLUMNS),
            html.Th("Good LCP"),
        ]
    )
    return html.Table(
        [html.Thead(header), html.Tbody([_page_row(index, row) for index, row in enumerate(rows)])],
        className="performance-table",
        id="performance-table",
    )


def _page_row(index: int, row: VitalsRow) -> html.Tr:
    measured = max(summary.measured for summary in row.vitals.values())
    lcp = row.vitals.get("lcp")
    return html.Tr(
        [
            html.Td(row.value, className="performance-page", title=row.value),
            html.Td(display.count(measured)),
            *(_p75_cell(index, vital, row) for vital in COLUMNS),
            html.Td(f"{lcp.good:.1f}%" if lcp else "\u2013"),
        ],
        id=f"performance-row-{index}",
    )


def _p75_cell(index: int, vital: str, row: VitalsRow) -> html.Td:
    summary = row.vitals.get(vital)
    if summary is None:
        return html.Td("\u2013", className="muted")
    text = f"{summary.p75:.3f}" if vital == "cls" else f"{summary.p75:,.0f} ms"
    return html.Td(text, id=f"performance-{vital}-{index}", **{"data-value": str(summary.p75)})
