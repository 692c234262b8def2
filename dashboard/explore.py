"""The Explore tab: the raw archive through read-only SQL (storage.readonly_sql, which
decides what may be read and runs it with ClickHouse's readonly mode and limits), a result
table and a CSV download. The filters write a starting query; the site owner may edit it."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate

from dashboard.components import notice
from dashboard.friendly_errors import friendly
from dashboard.periods import Period
from dashboard.store import ClientFactory
from dashboard.view_tabs import EXPLORE_TAB
from storage import queries, readonly_sql
from storage.definitions import CurrentDefinitions
from storage.queries import questions
from tally.csv_cells import csv_text, plain
from tally.settings import Settings

TABLE_ROWS = 500  # shown on the page; the CSV carries the whole result (up to the SQL limits)
CSV_NAME = "tally-explore.csv"


def explore_filters(
    name: str | None, path: str | None, country: str | None, device: str | None
) -> dict[str, str]:
    chosen = {"path": path, "country": (country or "").upper(), "device": device}
    event_filters = {column: value.strip() for column, value in chosen.items() if value and value.strip()}
    return {"name": name.strip(), **event_filters} if name and name.strip() else event_filters


def as_csv(result: readonly_sql.QueryResult) -> str:
    return csv_text([result.columns, *result.rows])  # every cell neutralised (tally/csv_cells.py)


def result_table(result: readonly_sql.QueryResult) -> html.Table:
    return html.Table(
        [
            html.Thead(html.Tr([html.Th(name) for name in result.columns])),
            html.Tbody(
                [html.Tr([html.Td(_text(value)) for value in row]) for row in result.rows[:TABLE_ROWS]]
            ),
        ]
    )


def _text(value: object) -> str:
    shown = plain(value)  # the page shows text as text: no formula to neutralise here
    return "" if shown is None else str(shown)


def register_explore(app: Dash, settings: Settings, clients: ClientFactory) -> None:
    defined = CurrentDefinitions(settings, clients)  # the current definitions version's

    @app.callback(
        Output("explore-sql", "value"),
        Input("site", "value"),
        Input("period", "data"),
        Input("explore-name", "value"),
        Input("explore-path", "value"),
        Input("explore-country", "value"),
        Input("explore-device", "value"),
        Input("explore-limit", "value"),
        Input("tabs", "value"),
    )
    @friendly(lambda message: f"-- {message}")  # a forged period: its refusal, as an SQL comment
    def write_sql(
        site: str | None,
        period_data: dict | None,
        name: str | None,
        path: str | None,
        country: str | None,
        device: str | None,
        limit: int,
        tab: str | None,
    ) -> str:
        # Written when the tab is shown (opening it fires this): while hidden, the page's first
        # load and every change of site or period would rewrite a box nobody sees.
        if tab != EXPLORE_TAB:
            raise PreventUpdate
        if not site or not period_data:
            return readonly_sql.SITES_SQL
        filters = explore_filters(name, path, country, device)
        chosen = Period.from_store(period_data)
        return readonly_sql.starting_sql(site, chosen.start, chosen.end, filters, limit)

    @app.callback(
        Output("explore-raw-totals", "children"),
        Input("site", "value"),
        Input("period", "data"),
        Input("explore-path", "value"),
        Input("explore-country", "value"),
        Input("explore-device", "value"),
        Input("tabs", "value"),
    )
    @friendly(lambda message: notice(message, "error"))
    def raw_totals(
        site: str | None,
        period_data: dict | None,
        path: str | None,
        country: str | None,
        device: str | None,
        tab: str | None,
    ) -> Any:
        if tab != EXPLORE_TAB or not site or not period_data:  # counted when shown, as the SQL
            raise PreventUpdate
        period = Period.from_store(period_data)
        filters = explore_filters(None, path, country, device)
        q = questions.question(
            site, period.start, period.end, defined.settings(), timezone=period.timezone, filters=filters
        )
        totals = queries.aggregate(clients(), q, source="raw")
        return (
            f"Raw archive, page views matching the filters: {totals['pageviews']:,} page views, "
            f"{totals['visitors']:,} visitors, {totals['sessions']:,} visits."
        )

    @app.callback(
        Output("explore-table", "children"),
        Output("explore-status", "children"),
        Output("explore-last-sql", "data"),
        Input("explore-run", "n_clicks"),
        State("explore-sql", "value"),
        prevent_initial_call=True,
    )
    @friendly(lambda message: (None, notice(message, "error"), no_update))
    def run_query(_: int, sql: str | None) -> tuple[Any, Any, str]:
        if not sql or not sql.strip():
            return None, notice("Write a query first, e.g. SELECT count() FROM events.", "error"), no_update
        try:
            result = readonly_sql.run(settings, sql, clients())
        except readonly_sql.QueryRefused as refused:
            return None, notice(f"The query was refused: {refused}", "error"), no_update
        shown = (
            f"{len(result.rows):,} rows"
            if len(result.rows) <= TABLE_ROWS
            else (f"the first {TABLE_ROWS:,} of {len(result.rows):,} rows (the CSV has them all)")
        )
        status = notice(f"Showing {shown}." if result.rows else "The query returned no rows.")
        return result_table(result) if result.rows else None, status, sql

    @app.callback(
        Output("explore-download", "data"),
        Input("explore-download-button", "n_clicks"),
        State("explore-last-sql", "data"),
        State("explore-sql", "value"),
        prevent_initial_call=True,
    )
    def download_csv(_: int, last_sql: str | None, sql: str | None) -> dict:
        # The query last run, or the one on screen if none ran yet: a download is a run too.
        chosen = last_sql or sql
        if not chosen:
            raise PreventUpdate
        try:
            result = readonly_sql.run(settings, chosen, clients())
        except readonly_sql.QueryRefused:
            raise PreventUpdate from None
        return dcc.send_string(as_csv(result), CSV_NAME, type="text/csv")
