"""The Overview's Goals and Properties report panels: per goal its unique conversions,
total events, conversion rate and revenue, a goal's name filtering the dashboard by it; the
values of a chosen custom property (the picker offers only the site's custom properties when it
has a list, storage/custom_properties.py, else every property the events carry). Numbers from
storage.queries (contract.py states them), from the dashboard's source. The Goals section of the
Settings view (dashboard/settings_view.py) lists the site's goals with a Remove button each and a
form to add one: editing is a setting."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dash import ALL, Dash, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate

from dashboard import display
from dashboard.clicks import clicked
from dashboard.components import BREAKDOWN_ITEM, decode_value, encode_value, notice, panel, removable_list
from dashboard.friendly_errors import friendly
from dashboard.periods import Period
from dashboard.store import ClientFactory
from dashboard.view_tabs import SETTINGS_SITE
from storage import custom_properties, queries
from storage import goals as goal_store
from storage.queries import EventRow, GoalRow, Source, StatsQuery

GOAL_REMOVE = "goal-remove"
PROPERTY_ROWS = 10
NO_GOALS = "No goals yet. An admin adds a custom event (e.g. Signup) or a page (/checkout/*) in Settings."
NO_GOALS_SET = "No goals yet: add a custom event (e.g. Signup) or a page (/checkout/*)."
GOALS_SETTINGS = "goals-settings"
NO_PROPERTIES = "No custom event carries properties in this period."


def goals_panels() -> list[Any]:
    """The two report panels, placed in the Overview's grid by dashboard.layout."""
    goals = panel(
        "Goals",
        [dcc.Store(id="goals-version", data=0), html.Div(id="goals-list")],  # version: bumped by edits
        id="goals-panel",
    )
    properties = panel(
        "Properties",
        [
            # Bumped by the Settings view's Custom properties section (dashboard/custom_props_panel.py):
            # here, on the Overview, so that every page has it (a viewer's has no settings panels).
            dcc.Store(id="custom-props-version", data=0),
            dcc.Dropdown(id="property-key", placeholder="Pick a property", clearable=False),
            html.Div(id="properties-list"),
        ],
        id="properties-panel",
    )
    return [goals, properties]


def goals_settings_panel() -> html.Section:
    """The Settings view's Goals section: the site's goals, each with Remove, and the add form."""
    return panel(
        "Goals",
        [
            html.P(
                "A goal is a custom event (Signup) or a page pattern (/checkout/*); with a currency, "
                "the event's revenue is summed. The Overview's Goals panel counts them.",
                className="hint",
            ),
            html.Div(id="goals-settings-list"),
            html.Div(
                [
                    dcc.Input(id="goal-event", placeholder="Event, e.g. Signup", className="goal-input"),
                    dcc.Input(id="goal-page", placeholder="or page, /checkout/*", className="goal-input"),
                    dcc.Input(id="goal-currency", placeholder="Currency", className="goal-input short"),
                    html.Button("Add goal", id="goal-add", className="button-primary", n_clicks=0),
                ],
                className="goal-form",
            ),
            html.Div(id="goal-status", role="status"),
        ],
        id=GOALS_SETTINGS,
    )


def goals_table(rows: list[GoalRow]) -> Any:
    if not rows:
        return notice(NO_GOALS)
    revenue = any(row.currency for row in rows)
    most = max(row.visitors for row in rows) or 1
    columns = {
        "Goal": "col-value",
        "Uniques": "col-number",
        "Total": "col-number goal-events",
        "CR": "col-number",
    }
    columns |= {"Revenue": "col-number"} if revenue else {}
    header = html.Div(
        [html.Span(name, className=style) for name, style in columns.items()],
        className=f"breakdown-header goals-row{' with-revenue' if revenue else ''}",
    )
    return html.Div([header, *(_goal_row(row, revenue, most) for row in rows)], id="goals-table")


def _goal_row(row: GoalRow, revenue: bool, most: int) -> html.Div:
    cells: list[Any] = [
        html.Div(className="breakdown-bar", style={"width": f"{row.visitors / most * 100:.1f}%"}),
        html.Div(
            html.Button(
                row.goal,
                id={"type": BREAKDOWN_ITEM, "dim": queries.GOAL_FILTER, "value": encode_value(row.goal)},
                className="breakdown-link",
                title=f"Filter by visitors who converted on {row.goal}",
                n_clicks=0,
            ),
            className="col-value",
        ),
        html.Span(display.count(row.visitors), className="col-number goal-visitors"),
        html.Span(display.count(row.events), className="col-number muted goal-events"),
        html.Span(f"{row.conversion_rate * 100:.1f}%", className="col-number goal-rate"),
    ]
    if revenue:
        text = f"{row.revenue_total:,.2f} {row.currency}" if row.currency else ""
        title = f"average {row.revenue_average:,.2f} {row.currency}" if row.currency else ""
        cells.append(html.Span(text, className="col-number goal-revenue", title=title))
    return html.Div(
        cells,
        className=f"breakdown-row goals-row{' with-revenue' if revenue else ''}",
        **{"data-goal": row.goal},
    )


def properties_list(rows: list[EventRow]) -> Any:
    if not rows:
        return notice("No value in this period.")
    most = max(row.visitors for row in rows) or 1
    header = html.Div(
        [
            html.Span("Value", className="col-value"),
            html.Span("Visitors", className="col-number"),
            html.Span("Events", className="col-number"),
        ],
        className="breakdown-header",
    )
    return html.Div(
        [
            header,
            *(
                html.Div(
                    [
                        html.Div(
                            className="breakdown-bar", style={"width": f"{row.visitors / most * 100:.1f}%"}
                        ),
                        html.Div(
                            html.Span(row.value or "(empty)", className="breakdown-text"),
                            className="col-value",
                        ),
                        html.Span(display.count(row.visitors), className="col-number"),
                        html.Span(display.count(row.events), className="col-number muted"),
                    ],
                    className="breakdown-row property-row",
                )
                for row in rows
            ),
        ]
    )


def register_goals(
    app: Dash,
    clients: ClientFactory,
    source: Source,
    stats_query: Callable[..., StatsQuery],
    inputs_ready: Callable[[str | None, dict | None], Period | None],
) -> None:
    @app.callback(
        Output("goals-list", "children"),
        Input("site", "value"),
        Input("period", "data"),
        Input("filters", "data"),
        Input("goals-version", "data"),
    )
    @friendly(lambda message: notice(message, "error"))
    def goals(site: str | None, period_data: dict | None, filters: dict | None, _: int) -> Any:
        period = inputs_ready(site, period_data)
        if period is None:
            return notice(NO_GOALS)
        return goals_table(queries.goals(clients(), stats_query(site, period, filters), source=source))

    @app.callback(
        Output("property-key", "options"),
        Output("property-key", "value"),
        Input("site", "value"),
        Input("period", "data"),
        Input("filters", "data"),
        Input("custom-props-version", "data"),  # the site's list changed in the Settings view
        State("property-key", "value"),
    )
    @friendly(lambda message: ([], None))
    def property_keys(
        site: str | None, period_data: dict | None, filters: dict | None, _: int, chosen: str | None
    ) -> tuple[list[str], str | None]:
        period = inputs_ready(site, period_data)
        if period is None:
            return [], None
        client = clients()
        # The site's custom properties (the Sites API's custom-props), when it has any: only those.
        only = custom_properties.list_properties(client, site) if site else []
        keys = queries.property_keys(client, stats_query(site, period, filters), source=source, only=only)
        return keys, chosen if chosen in keys else (keys[0] if keys else None)

    @app.callback(
        Output("properties-list", "children"),
        Input("site", "value"),
        Input("period", "data"),
        Input("filters", "data"),
        Input("property-key", "value"),
    )
    @friendly(lambda message: notice(message, "error"))
    def properties(site: str | None, period_data: dict | None, filters: dict | None, key: str | None) -> Any:
        period = inputs_ready(site, period_data)
        if period is None or not key:
            return notice(NO_PROPERTIES)
        q = stats_query(site, period, filters)
        return properties_list(queries.properties(clients(), q, key, limit=PROPERTY_ROWS, source=source))


def register_goal_editing(app: Dash, clients: ClientFactory) -> None:
    """The Settings view's Goals section: its list and its add and remove buttons, a change to
    the site's configuration, so registered apart from the Overview's read-only callbacks, which
    a shared link may call (dashboard/sharing.py allows those only)."""

    @app.callback(
        Output("goals-settings-list", "children"),
        Input(SETTINGS_SITE, "data"),
        Input("goals-version", "data"),
        prevent_initial_call=True,  # loaded when the Settings view opens
    )
    def listed(site: str | None, _: int) -> Any:
        if not site:
            raise PreventUpdate
        rows = [
            (
                html.Strong(goal.name),
                (goal.page_pattern or f"event {goal.event_name}")
                + (f" · revenue in {goal.currency}" if goal.currency else ""),
                html.Button(
                    "Remove",
                    id={"type": GOAL_REMOVE, "name": encode_value(goal.name)},
                    className="button-quiet",
                    title=f"Remove the goal {goal.name}",
                ),
            )
            for goal in goal_store.list_goals(clients(), site)
        ]
        return removable_list(rows, NO_GOALS_SET, item_class="goal", list_class="goal-list")

    # Add and Remove are two callbacks: a click on Add must not wait on the list re-rendering
    # its Remove buttons (dashboard/clicks.py).
    @app.callback(
        Output("goal-status", "children"),
        Output("goals-version", "data"),
        Input("goal-add", "n_clicks"),
        State("site", "value"),
        State("goal-event", "value"),
        State("goal-page", "value"),
        State("goal-currency", "value"),
        State("goals-version", "data"),
        prevent_initial_call=True,
    )
    def add_goal(
        clicks: int | None,
        site: str | None,
        event: str | None,
        page: str | None,
        currency: str | None,
        version: int,
    ) -> tuple[Any, Any]:
        if not site or not clicks:  # not a click: the button (re)appearing
            raise PreventUpdate
        try:
            goal = goal_store.make_goal(site, event or "", page or "", currency or "")
            added = goal_store.add_goal(clients(), goal)
        except (goal_store.InvalidGoal, ValueError) as refused:
            return notice(str(refused), "error"), no_update
        return notice(f"Added the goal {added.name}."), version + 1

    @app.callback(
        Output("goal-status", "children", allow_duplicate=True),
        Output("goals-version", "data", allow_duplicate=True),
        Input({"type": GOAL_REMOVE, "name": ALL}, "n_clicks"),
        State("site", "value"),
        State("goals-version", "data"),
        prevent_initial_call=True,
    )
    def remove_goal(_: list, site: str | None, version: int) -> tuple[Any, Any]:
        trigger = clicked()
        if not site or trigger is None:
            raise PreventUpdate  # a button (re)appearing, not a click
        try:
            removed = goal_store.remove_goal(clients(), site, decode_value(trigger["name"]))
        except (goal_store.InvalidGoal, ValueError) as refused:
            return notice(str(refused), "error"), no_update
        return notice(f"Removed the goal {removed.name}."), version + 1
