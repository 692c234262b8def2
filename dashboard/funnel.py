"""The Funnel tab: the site owner writes 2-8 steps, one a line, or picks one of the site's saved
funnels (storage/saved_funnels.py), and sees per step a bar of the visitors reaching it, the
conversion from the first step and the drop-off from the one before. The numbers are
storage.queries.funnel's for the site, period and filters above. Admins and owners save the
steps under a name and remove saved funnels (`register_funnel_saving`, a settings callback).
"""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, ctx, dcc, html, no_update
from dash.exceptions import PreventUpdate

from dashboard import display
from dashboard.clicks import clicked
from dashboard.components import notice
from dashboard.friendly_errors import friendly
from dashboard.periods import Period
from dashboard.store import ClientFactory
from dashboard.view_tabs import FUNNEL_TAB
from storage import queries
from storage import saved_funnels as funnel_store
from storage.definitions import CurrentDefinitions
from storage.queries import FunnelStep, StepResult, questions
from tally.settings import Settings

EXAMPLE = "/product/*\nSignup\n/checkout\n/thanks"
HOW_TO = (
    "One step a line, in order, 2 to 8 steps: a page path (starts with /; * stands for any run "
    "of characters, e.g. /product/*) or the name of a custom event (e.g. Signup). A visit reaches "
    "a step when it went through the steps before it in that order. For the site, period and "
    "filters above; a filter keeps the visits with a page view matching it."
)
NO_STEPS = "Write the funnel's steps above, then show it."
SAVING = "funnel-saving"  # the save and remove controls: dropped from a viewer's page (accounts.py)


def parse_steps(text: str) -> list[FunnelStep]:
    """A step a line: a line starting with / is a page pattern, any other an event's name;
    blank lines are skipped. The query layer checks them (checked_steps)."""
    steps = [
        FunnelStep("page" if line.startswith("/") else "event", line)
        for line in (raw.strip() for raw in text.splitlines())
        if line
    ]
    return queries.checked_steps(steps)


def funnel_section() -> html.Section:
    return html.Section(
        [
            html.Section(
                [
                    html.Div(html.H2("Funnel"), className="panel-heading"),
                    html.P(HOW_TO, className="caption"),
                    html.Label(
                        [
                            html.Span("Saved funnels", className="field-label"),
                            dcc.Dropdown(id="funnel-saved", placeholder="Pick a saved funnel", options=[]),
                        ],
                        className="field",
                    ),
                    html.Label(
                        [
                            html.Span("Steps", className="field-label"),
                            dcc.Textarea(
                                id="funnel-steps",
                                placeholder=EXAMPLE,
                                className="funnel-steps",
                                spellCheck=False,
                                persistence=True,
                                persistence_type="local",
                            ),
                        ],
                        className="field",
                    ),
                    html.Div(
                        html.Button("Show funnel", id="funnel-run", className="button-primary", n_clicks=0),
                        className="actions",
                    ),
                    html.Div(id="funnel-result", className="funnel"),
                    saving_controls(),
                    dcc.Store(id="funnels-version", data=0),
                ],
                className="card",
            ),
        ],
        id="funnel-section",
        style={"display": "none"},
    )


def saving_controls() -> html.Div:
    """One row under the chart: a name, Save, and Remove for the funnel picked above."""
    return html.Div(
        [
            html.Div(
                [
                    dcc.Input(
                        id="funnel-name",
                        type="text",
                        placeholder="Save these steps as… (e.g. Checkout)",
                        maxLength=120,
                        className="funnel-name",
                    ),
                    html.Button("Save funnel", id="funnel-save", className="button", n_clicks=0),
                    html.Button(
                        "Remove the picked funnel", id="funnel-remove", className="button", n_clicks=0
                    ),
                ],
                className="actions funnel-saving",
            ),
            html.Div(id="funnel-save-status", role="status"),
        ],
        id=SAVING,
    )


def steps_text(funnel: funnel_store.SavedFunnel) -> str:
    """A saved funnel's steps as the Steps box shows them, one a line."""
    return "\n".join(step.value for step in funnel.steps)


def funnel_chart(rows: list[StepResult]) -> html.Div:
    """A bar per step, sized by its visitors against the first step's."""
    first = rows[0].visitors if rows else 0
    if not first:
        return notice("No visit in this period reached the first step.")
    return html.Div([_step(index, row, first) for index, row in enumerate(rows, start=1)])


def _step(index: int, row: StepResult, first: int) -> html.Div:
    label = row.step.value if row.step.kind == "page" else f"Event: {row.step.value}"
    numbers = [
        html.Span(
            [html.Strong(display.count(row.visitors)), " visitors"],
            id=f"funnel-visitors-{index}",
            **{"data-value": str(row.visitors)},
        ),
        html.Span(f"{row.conversion_rate:.1%} of step 1", className="muted"),
    ]
    if index > 1:
        numbers.append(
            html.Span(
                f"\u2212{display.count(row.dropoff)} dropped off ({row.dropoff_rate:.1%})",
                className="funnel-dropoff",
                id=f"funnel-dropoff-{index}",
                **{"data-value": str(row.dropoff)},
            )
        )
    return html.Div(
        [
            html.Div(
                [
                    html.Span(str(index), className="funnel-number"),
                    html.Span(label, className="funnel-label"),
                ],
                className="funnel-head",
                title=label,
            ),
            html.Div(
                html.Div(className="funnel-fill", style={"width": f"{row.visitors / first * 100:.1f}%"}),
                className="funnel-bar",
            ),
            html.Div(numbers, className="funnel-numbers"),
        ],
        className="funnel-step",
    )


def register_funnel(app: Dash, settings: Settings, clients: ClientFactory) -> None:
    defined = CurrentDefinitions(settings, clients)  # the current definitions version's
    source = settings.dashboard_source

    @app.callback(
        Output("funnel-result", "children"),
        Input("funnel-run", "n_clicks"),
        Input("site", "value"),
        Input("period", "data"),
        Input("filters", "data"),
        Input("tabs", "value"),
        Input("funnel-saved", "value"),
        State("funnel-steps", "value"),
    )
    @friendly(lambda message: notice(message, "error"))
    def show_funnel(
        _: int, site: str | None, period_data: dict | None, filters: dict | None, tab: str,
        saved: str | None, text: str | None,
    ) -> Any:  # fmt: skip
        if tab != FUNNEL_TAB:  # computed when shown: a hidden tab's funnel would load the store for nothing
            raise PreventUpdate
        if not site or not period_data:
            return notice("Pick a site first.")
        if ctx.triggered_id == "funnel-saved" and saved:  # the Steps box fills in the same round trip
            text = steps_text(funnel_store.find_funnel(clients(), site, saved))
        if not text or not text.strip():
            return notice(NO_STEPS)
        period = Period.from_store(period_data)
        q = questions.question(
            site, period.start, period.end, defined.settings(), timezone=period.timezone, filters=filters
        )
        q = questions.with_saved_segment(clients(), q)
        report = queries.funnel(clients(), q, parse_steps(text), source=source)
        return funnel_chart(report.steps)

    @app.callback(Output("funnel-saved", "options"), Input("site", "value"), Input("funnels-version", "data"))
    def saved_funnels(site: str | None, _: int) -> list[dict[str, str]]:
        if not site:
            return []
        return [{"label": f.name, "value": f.name} for f in funnel_store.list_funnels(clients(), site)]

    @app.callback(
        Output("funnel-steps", "value"),
        Input("funnel-saved", "value"),
        State("site", "value"),
        prevent_initial_call=True,
    )
    def load_saved(saved: str | None, site: str | None) -> str:
        if not saved or not site:
            raise PreventUpdate  # cleared: the steps stay, to edit or save under another name
        try:
            return steps_text(funnel_store.find_funnel(clients(), site, saved))
        except funnel_store.InvalidFunnel:
            raise PreventUpdate from None  # removed meanwhile: the options refresh says so


def register_funnel_saving(app: Dash, clients: ClientFactory) -> None:
    """Saving the Steps box under a name and removing the picked saved funnel: a change to the
    site's configuration, for admins and owners (a settings callback, dashboard/app.py)."""

    @app.callback(
        Output("funnel-save-status", "children"),
        Output("funnels-version", "data"),
        Input("funnel-save", "n_clicks"),
        Input("funnel-remove", "n_clicks"),
        State("site", "value"),
        State("funnel-name", "value"),
        State("funnel-steps", "value"),
        State("funnel-saved", "value"),
        State("funnels-version", "data"),
        prevent_initial_call=True,
    )
    def edit_saved_funnels(
        _save: int, _remove: int, site: str | None, name: str | None, text: str | None,
        picked: str | None, version: int,
    ) -> tuple[Any, Any]:  # fmt: skip
        trigger = clicked()
        if not site or trigger is None:
            raise PreventUpdate  # a button (re)appearing, not a click
        try:
            if trigger == "funnel-remove":
                if not picked:
                    return notice("Pick the saved funnel to remove first.", "error"), no_update
                removed = funnel_store.remove_funnel(clients(), site, picked)
                return notice(f"Removed the funnel {removed.name}."), version + 1
            steps = [funnel_store.parse_step(line) for line in (text or "").splitlines() if line.strip()]
            saved = funnel_store.add_funnel(clients(), site, name or "", steps)
        except funnel_store.InvalidFunnel as refused:
            return notice(str(refused), "error"), no_update
        return notice(f"Saved the funnel {saved.name}: pick it above to show it again."), version + 1
