"""The Funnel tab: the site owner writes 2-8 steps, one a line, and sees per step a bar of
the visitors reaching it, the conversion from the first step and the drop-off from the one
before. The numbers are storage.queries.funnel's for the site, period and filters above."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from dashboard import display
from dashboard.components import notice
from dashboard.friendly_errors import friendly
from dashboard.periods import Period
from dashboard.segments import applied
from dashboard.store import ClientFactory
from storage import queries
from storage.definitions import CurrentDefinitions
from storage.queries import FunnelStep, StatsQuery, StepResult
from tally.settings import Settings

EXAMPLE = "/product/*\nSignup\n/checkout\n/thanks"
HOW_TO = (
    "One step a line, in order, 2 to 8 steps: a page path (starts with /; * stands for any run "
    "of characters, e.g. /product/*) or the name of a custom event (e.g. Signup). A visit reaches "
    "a step when it went through the steps before it in that order. For the site, period and "
    "filters above; a filter keeps the visits with a page view matching it."
)
NO_STEPS = "Write the funnel's steps above, then show it."


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
                ],
                className="card",
            ),
        ],
        id="funnel-section",
        style={"display": "none"},
    )


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
        State("funnel-steps", "value"),
    )
    @friendly(lambda message: notice(message, "error"))
    def show_funnel(
        _: int, site: str | None, period_data: dict | None, filters: dict | None, tab: str, text: str | None
    ) -> Any:
        if tab != "funnel":  # computed when shown: a hidden tab's funnel would load the store for nothing
            raise PreventUpdate
        if not site or not period_data:
            return notice("Pick a site first.")
        if not text or not text.strip():
            return notice(NO_STEPS)
        period = Period.from_store(period_data)
        q = StatsQuery(
            site,
            period.start,
            period.end,
            filters=dict(filters or {}),
            session_gap_s=defined.settings().session_gap_s,
            engaged_bounce_ms=defined.settings().engaged_bounce_ms,
        )
        q = applied(clients(), q)  # a saved segment's filters
        report = queries.funnel(clients(), q, parse_steps(text), source=source)
        return funnel_chart(report.steps)

    @app.callback(Output("funnel-section", "style"), Input("tabs", "value"))
    def show_tab(tab: str) -> dict:
        return {"display": "block"} if tab == "funnel" else {"display": "none"}
