"""The Definitions panel: the current definitions version, and for a version built by
`tally whatif` its numbers beside the current ones over the header's site and period, with Swap
in and Discard buttons; under them the newest versions, each with what it changed.

The buttons record a request (storage/definitions.py, migration 0055) that the live stream jobs
carry out between two batches (stream_jobs/definition_requests.py): they own the derived tables
and their checkpoints, so the dashboard never stops them or touches their files. A version
changes every site's numbers, so the panel is the operator's alone, as Rate limiting is
(app.py: its outputs are operator outputs; accounts.py drops it from a team member's page).
"""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, ctx, dcc, html, no_update
from dash.exceptions import PreventUpdate

from dashboard.components import notice, panel
from dashboard.friendly_errors import friendly
from dashboard.periods import Period
from dashboard.store import ClientFactory
from dashboard.view_tabs import SETTINGS_PERIOD, SETTINGS_SITE, SETTINGS_TAB
from storage import definitions
from storage.definitions import DefinitionsError, Version
from storage.queries import questions
from storage.queries.whatif import METRICS, Comparison, compare, side_tables_exist
from tally.settings import Settings

PANEL_ID = "whatif-panel"
LABELS = {
    "visitors": "Visitors",
    "sessions": "Visits",
    "bounce_rate": "Bounce rate",
    "avg_session_duration_s": "Visit duration",
    "pageviews": "Pageviews",
}


def whatif_panel() -> html.Section:
    return panel(
        "Definitions (what-if)",
        [
            dcc.Store(id="whatif-refresh", data=0),
            html.P(
                "A version proposed with `tally whatif` (say a 20-minute session gap), its numbers beside "
                "the current ones for this site and period. Swapping it in changes every site's numbers; "
                "the stream jobs do it between two batches, and the version replaced can be swapped back.",
                className="hint",
            ),
            html.Div(id="whatif-current"),
            dcc.Dropdown(id="whatif-version", placeholder="No version built yet", clearable=False),
            html.Div(id="whatif-comparison"),
            html.Div(
                [
                    html.Button("Swap in", id="whatif-swap", className="button-primary", n_clicks=0),
                    html.Button("Discard", id="whatif-discard", className="button-quiet", n_clicks=0),
                ],
                className="share-form",
            ),
            html.Div(id="whatif-status", role="status"),
            html.Div(id="whatif-requests"),
            html.H3("History"),
            html.Ul(id="whatif-history", className="whatif-history"),
        ],
        id=PANEL_ID,
    )


def describe(version: Version) -> str:
    gap_min, bounce_s = version.definitions.session_gap_s / 60, version.definitions.engaged_bounce_ms / 1000
    return f"version {version.number}: session gap {gap_min:g} min, engaged bounce {bounce_s:g} s"


HISTORY_SHOWN = 10  # the newest versions listed; `tally definitions` lists them all


def history(versions: list[Version], current: int) -> list[html.Li]:
    """The newest versions first: each one's note and what it changed from the one before
    (storage.definitions.changes: goals, exclusions, channel rules, session gap, …)."""
    items = []
    for older, newer in reversed(list(zip([None, *versions], versions, strict=False))[-HISTORY_SHOWN:]):
        changed = "; ".join(definitions.changes(older.definitions, newer.definitions)) if older else ""
        marker = " (current)" if newer.number == current else ""
        text = f"v{newer.number}{marker} · {newer.created_at:%Y-%m-%d %H:%M} · {newer.note}"
        items.append(html.Li([text, html.Span(f" — {changed}", className="muted") if changed else ""]))
    return items


def register_whatif_panel(app: Dash, settings: Settings, clients: ClientFactory) -> None:
    @app.callback(
        Output("whatif-current", "children"),
        Output("whatif-version", "options"),
        Output("whatif-version", "value"),
        Output("whatif-history", "children"),
        Input(SETTINGS_SITE, "data"),
        Input("whatif-refresh", "data"),
        Input("clock", "n_intervals"),
        State("whatif-version", "value"),
        State("tabs", "value"),
        prevent_initial_call=True,  # loaded when the Settings view opens
    )
    @friendly(lambda message: (notice(message, "warning"), no_update, no_update, no_update))
    def versions(
        _: str | None, __: int, ___: int | None, chosen: int | None, tab: str | None
    ) -> tuple[Any, list[dict], int | None, Any]:
        if tab != SETTINGS_TAB:  # the clock ticks on every tab: only the Settings view's reads
            raise PreventUpdate
        client = clients()
        current = definitions.current_or_none(client)
        if current is None:
            return "Current: the environment's definitions (no version recorded yet).", [], None, []
        recorded = definitions.list_versions(client)
        built = [v for v in recorded if v.number != current.number and side_tables_exist(client, v.number)]
        options = [{"label": describe(v), "value": v.number} for v in reversed(built)]
        numbers = [v.number for v in built]
        value = chosen if chosen in numbers else (numbers[-1] if numbers else None)
        shown = html.Span(f"Current: {describe(current)}", id="whatif-current-version")
        return shown, options, value, history(recorded, current.number)

    @app.callback(
        Output("whatif-comparison", "children"),
        Input("whatif-version", "value"),
        Input(SETTINGS_SITE, "data"),
        Input(SETTINGS_PERIOD, "data"),
        Input("whatif-refresh", "data"),
        prevent_initial_call=True,  # loaded when the Settings view opens
    )
    @friendly(lambda message: notice(message, "warning"))
    def comparison(number: int | None, site: str | None, period_data: dict | None, _: int) -> Any:
        if number is None or not site or period_data is None:
            return None
        client = clients()
        current = definitions.current_or_none(client)
        if current is None or number == current.number or not side_tables_exist(client, number):
            return None
        period = Period.from_store(period_data)
        q = questions.question(site, period.start, period.end, timezone=period.timezone)
        return comparison_table(compare(client, q, current, definitions.get(client, number)))

    @app.callback(
        Output("whatif-status", "children"),
        Output("whatif-refresh", "data"),
        Input("whatif-swap", "n_clicks"),
        Input("whatif-discard", "n_clicks"),
        State("whatif-version", "value"),
        State("whatif-refresh", "data"),
        prevent_initial_call=True,
    )
    @friendly(lambda message: (notice(message, "warning"), no_update))
    def ask(_: int, __: int, number: int | None, refresh: int) -> tuple[Any, int]:
        if number is None:
            raise PreventUpdate
        action = "swap" if ctx.triggered_id == "whatif-swap" else "discard"
        try:
            definitions.ask(clients(), number, action, settings.owner_email)
        except DefinitionsError as error:
            return notice(str(error), "warning"), refresh
        words = "swap version {n} in" if action == "swap" else "drop version {n}'s side tables"
        text = f"Asked the stream jobs to {words.format(n=number)}: done between two batches."
        return notice(text), refresh + 1

    @app.callback(
        Output("whatif-requests", "children"),
        Input(SETTINGS_SITE, "data"),
        Input("whatif-refresh", "data"),
        Input("clock", "n_intervals"),
        State("tabs", "value"),
        prevent_initial_call=True,  # loaded when the Settings view opens
    )
    @friendly(lambda message: notice(message, "warning"))
    def requests(_: str | None, __: int, ___: int | None, tab: str | None) -> Any:
        if tab != SETTINGS_TAB:
            raise PreventUpdate
        rows = definitions.recent_requests(clients())
        return html.Ul(
            [
                html.Li(
                    f"{r.action} version {r.version}: {r.state}" + (f" ({r.outcome})" if r.outcome else ""),
                    className=f"whatif-request whatif-request-{r.state}",
                )
                for r in rows
            ],
            className="whatif-requests",
        )


def comparison_table(c: Comparison) -> html.Table:
    head = html.Tr(
        [html.Th(""), html.Th(f"v{c.current.version} (current)"), html.Th(f"v{c.proposed.version}")]
    )
    rows = [
        html.Tr(
            [
                html.Th(LABELS[m]),
                html.Td(shown(m, c.current.totals[m])),
                html.Td(shown(m, c.proposed.totals[m])),
            ],
            id=f"whatif-{m}",
        )
        for m in METRICS
    ]
    old_visits = {r.value: r.totals["sessions"] for r in c.current.rows}
    for row in c.proposed.rows:
        old = old_visits.get(row.value)  # None: not among the current version's top entry pages
        cells = [html.Th(f"Entry {row.value}"), html.Td("—" if old is None else shown("sessions", old))]
        rows.append(
            html.Tr([*cells, html.Td(shown("sessions", row.totals["sessions"]))], className="whatif-entry")
        )
    return html.Table([html.Thead(head), html.Tbody(rows)], className="whatif-table")


def shown(metric: str, value: float) -> str:
    if metric == "bounce_rate":
        return f"{value * 100:.1f}%"
    if metric == "avg_session_duration_s":
        return f"{value:.0f} s"
    return f"{int(value):,}"
