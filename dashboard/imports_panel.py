"""The Overview's imported-history card: what `tally import` stored for the period, marked.

Imported history (storage/imports.py) is daily aggregates from another product's export, not
events of the log, so the dashboard's own numbers stay the log's and the imported ones are shown
beside them in a card marked "Imported", for the period's whole local days before the site's own
events start (the days the stats API adds; storage/imports.py `used_days`); filters cannot apply to
them (an export cannot say which of its visitors a filter keeps), so the card says so instead.
The stats API adds them to its answers when asked (`include.imports`).
"""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, html

from dashboard import display
from dashboard.friendly_errors import friendly
from dashboard.periods import Period
from dashboard.store import ClientFactory
from storage import imports
from storage.calendar import zone

ORIGIN_NAMES = {"plausible": "Plausible", "ga4": "Google Analytics 4"}


def register_imports_panel(app: Dash, clients: ClientFactory) -> None:
    @app.callback(
        Output("imported-history", "children"),
        Input("site", "value"),
        Input("period", "data"),
        Input("filters", "data"),
    )
    @friendly(lambda message: None)
    def imported_history(site: str | None, period_data: dict | None, filters: dict | None) -> Any:
        return card(clients(), site, period_data, filters)


def card(client: Any, site: str | None, period_data: dict | None, filters: dict | None) -> Any:
    """The card's content (None: hidden, for a site without imports)."""
    if not site or period_data is None:
        return None
    records = imports.list_imports(client, site)
    if not records:
        return None
    period = Period.from_store(period_data)
    origins = ", ".join(sorted({ORIGIN_NAMES.get(r.origin, r.origin) for r in records}))
    first, last = min(r.first_day for r in records), max(r.last_day for r in records)
    heading = [
        html.Span("Imported", className="imported-marker"),
        html.Span(f" history from {origins}, {first} to {last}", className="imported-range"),
    ]
    native_from = imports.native_first_day(client, site, zone(period.timezone))
    if native_from is not None and native_from <= last:
        heading.append(
            html.Span(
                f"; from {native_from} on, the site's own events are counted instead",
                className="imported-overlap",
            )
        )
    return html.Div([html.Div(heading), summary(client, site, period, bool(filters))])


def summary(client: Any, site: str, period: Period, filtered: bool) -> html.Div:
    if filtered:
        return html.Div("Not shown while filters apply: imported days carry no events to filter.")
    totals = imports.imported(client, site, period.start, period.end, timezone=period.timezone).get(
        (None, "")
    )
    if totals is None:
        return html.Div("Nothing imported for this period's whole days.", id="imported-numbers")
    bounce_rate = totals.bounces / totals.visits if totals.visits else 0.0
    parts = [
        f"{display.count(totals.visitors)} visitors",
        f"{display.count(totals.pageviews)} page views",
        f"{display.count(totals.visits)} visits",
        f"{display.rate(bounce_rate)} bounce rate",
    ]
    return html.Div(
        [
            html.Span(" · ".join(parts), id="imported-numbers"),
            html.Span(
                " in this period, besides the numbers above (which count the event log only); "
                "the stats API adds them with include.imports.",
                className="muted",
            ),
        ]
    )
