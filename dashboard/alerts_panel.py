"""The signed-in operator's Alerts panel: the site's latest alerts (rule, time, status), its
alert rules with a Remove button each, and a form to add one, with "Test against history"
to see when the rule in the form would have fired over the last 7 days before saving it
(storage/alert_backtest.py) — what `tally alerts` does, in the browser. Like the Share panel
it is a site's setting: a section of the Settings view (dashboard/settings_view.py), for admins
and owners, and its callbacks are not the Overview's, so a shared session is refused them by the
sharing guard.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from dash import ALL, Dash, Input, Output, State, dcc, html, no_update

from dashboard.clicks import clicked
from dashboard.components import notice, panel
from dashboard.store import ClientFactory
from dashboard.view_tabs import SETTINGS_SITE, SETTINGS_TAB
from storage import alert_backtest, alert_rules
from storage.sites import InvalidDomain
from tally.settings import Settings

REMOVE = "alert-rule-remove"
REFRESH_MS = 5000
REFRESH_WHEN_SHOWN = "function (tab) { return tab !== %s; }"
# Firings listed under "Test against history" (the total is always said).
BACKTEST_LISTED = 20
RULE_FORM = (
    "alert-kind",
    "alert-minutes",
    "alert-threshold",
    "alert-factor",
    "alert-goal",
    "alert-event",
    "alert-page",
)
KIND_LABELS = {
    "pageviews_above": "Page views above",
    "goal_absent": "Goal not seen for",
    "event_rate_above": "Event or page rate above (per minute)",
}


def alerts_panel() -> html.Section:
    return panel(
        "Alerts",
        [
            html.P(
                "Alerts fire within seconds of the event that triggers them and are POSTed to the "
                "rule's webhook (retried, with the alert's id for deduplication).",
                className="hint",
            ),
            html.Div(id="alerts-recent"),
            html.H3("Rules"),
            html.Div(id="alert-rules"),
            html.Div(
                [
                    dcc.Dropdown(
                        id="alert-kind",
                        options=[{"label": label, "value": kind} for kind, label in KIND_LABELS.items()],
                        value="pageviews_above",
                        clearable=False,
                    ),
                    dcc.Input(id="alert-minutes", type="number", min=1, value=5, placeholder="Minutes"),
                    dcc.Input(id="alert-threshold", type="number", min=0, placeholder="Above N"),
                    dcc.Input(id="alert-factor", type="number", min=0, placeholder="or k x the mean"),
                    dcc.Input(id="alert-goal", placeholder="Goal (goal not seen)"),
                    dcc.Input(id="alert-event", placeholder="Event name"),
                    dcc.Input(id="alert-page", placeholder="or page pattern (/500*)"),
                    dcc.Input(id="alert-webhook", placeholder="Webhook URL (https://…)", maxLength=2000),
                    html.Button(
                        "Test against history", id="alert-backtest", className="button-quiet", n_clicks=0
                    ),
                    html.Button("Add rule", id="alert-add", className="button-primary", n_clicks=0),
                ],
                className="share-form alert-form",
            ),
            html.Div(id="alert-status"),
            html.Div(id="alert-backtest-result"),
            dcc.Interval(id="alerts-refresh", interval=REFRESH_MS, disabled=True),  # on while shown
        ],
        id="alerts-panel",
    )


def register_alerts_panel(app: Dash, settings: Settings, clients: ClientFactory) -> None:
    @app.callback(
        Output("alert-status", "children"),
        Output("alert-webhook", "value"),
        Input("alert-add", "n_clicks"),
        State("site", "value"),
        *(State(field, "value") for field in RULE_FORM),
        State("alert-webhook", "value"),
        prevent_initial_call=True,
    )
    def add(_: int, site: str | None, *values: object) -> tuple:
        if not site:
            return notice("Pick a site first.", "warning"), no_update
        *form, webhook = values
        try:
            rule = alert_rules.make_rule(**rule_fields(site, form), webhook_url=webhook or "")
            added = alert_rules.add_rule(clients(), rule, private_webhooks=settings.alert_webhook_private)
        except alert_rules.InvalidRule as refused:
            return notice(str(refused), "warning"), no_update
        return notice(f"Added the rule {added.rule_id}: {added.describe()}."), ""

    @app.callback(
        Output("alert-backtest-result", "children"),
        Input("alert-backtest", "n_clicks"),
        State("site", "value"),
        *(State(field, "value") for field in RULE_FORM),
        prevent_initial_call=True,
    )
    def backtest(_: int, site: str | None, *form: object) -> object:
        """The rule in the form over the last days of the archive, before it is saved."""
        if not site:
            return notice("Pick a site first.", "warning")
        try:
            rule = alert_backtest.backtest_rule(**rule_fields(site, list(form)))
            start, end = alert_backtest.history(alert_backtest.DEFAULT_HISTORY_DAYS, datetime.now(UTC))
            result = alert_backtest.backtest(clients(), rule, start, end)
        except alert_rules.InvalidRule as refused:
            return notice(str(refused), "warning")
        return backtest_view(result)

    @app.callback(
        Output("alert-rules", "children"),
        Input(SETTINGS_SITE, "data"),
        Input("alert-status", "children"),
        Input({"type": REMOVE, "id": ALL}, "n_clicks"),
        prevent_initial_call=True,  # loaded when the Settings view opens
    )
    def rules(site: str | None, _: object, removes: list[int | None]) -> object:
        if not site:
            return None
        triggered = clicked()  # a list re-rendered also fires, with fresh buttons: only a click counts
        if isinstance(triggered, dict) and triggered.get("type") == REMOVE:
            try:
                alert_rules.remove_rule(clients(), site, str(triggered["id"]))
            except alert_rules.InvalidRule as refused:
                return notice(str(refused), "warning")
        try:
            found = alert_rules.list_rules(clients(), site)
        except InvalidDomain as refused:
            return notice(str(refused), "warning")
        if not found:
            return html.P("No alert rules yet.", className="hint")
        return html.Ul([_rule_row(rule) for rule in found], className="share-links alert-rules")

    # The recent alerts refresh while the Settings view shows them, not from every open page.
    app.clientside_callback(
        REFRESH_WHEN_SHOWN % json.dumps(SETTINGS_TAB),
        Output("alerts-refresh", "disabled"),
        Input("tabs", "value"),
    )

    @app.callback(
        Output("alerts-recent", "children"),
        Input(SETTINGS_SITE, "data"),
        Input("alerts-refresh", "n_intervals"),
        prevent_initial_call=True,  # loaded when the Settings view opens
    )
    def recent(site: str | None, _: int | None) -> object:
        if not site:
            return None
        try:
            found = alert_rules.recent_alerts(clients(), site, limit=20)
        except InvalidDomain as refused:
            return notice(str(refused), "warning")
        if not found:
            return html.P("No alerts yet.", className="hint")
        header = html.Tr([html.Th(name) for name in ("Fired (UTC)", "Rule", "What", "Status")])
        rows = [
            html.Tr(
                [
                    html.Td(f"{alert.fired_at:%Y-%m-%d %H:%M:%S}"),
                    html.Td(alert.rule_id),
                    html.Td(alert.summary),
                    html.Td(_status(alert), className=f"alert-status-{alert.status}"),
                ]
            )
            for alert in found
        ]
        return html.Table([html.Thead(header), html.Tbody(rows)], className="alerts-table", id="alerts-table")


def rule_fields(site: str, form: list[object]) -> dict[str, object]:
    """The form's fields (RULE_FORM's order) as a rule's, empty ones at their defaults."""
    kind, minutes, threshold, factor, goal, event, page = form
    return {
        "site": site,
        "kind": kind or "",
        "window_minutes": minutes or 1,
        "threshold": threshold or 0,
        "factor": factor or 0.0,
        "goal": goal or "",
        "event_name": event or "",
        "page_pattern": page or "",
    }


def backtest_view(result: alert_backtest.Backtest) -> html.Div:
    """ "Would have fired N times", then the first firings: window, value, bound."""
    times = f"{result.total} time{'s' if result.total != 1 else ''}"
    days = round((result.end - result.start).total_seconds() / 86400)
    summary = html.P(
        f"{result.rule.describe()}: would have fired {times} in the last {days} days "
        "(evaluated over the archive, as the streaming alerts evaluate; nothing was sent or saved).",
        id="alert-backtest-summary",
    )
    if not result.firings:
        return html.Div([summary], className="alert-backtest")
    header = html.Tr([html.Th(name) for name in ("Window (UTC)", "Until", "Value", "Above")])
    rows = [
        html.Tr(
            [
                html.Td(f"{firing.window_start:%Y-%m-%d %H:%M}"),
                html.Td(f"{firing.window_end:%Y-%m-%d %H:%M}"),
                html.Td(f"{firing.value:g}"),
                html.Td(f"{firing.threshold:g}"),
            ]
        )
        for firing in result.firings[:BACKTEST_LISTED]
    ]
    more = result.total - len(rows)
    rest = [html.P(f"… and {more} more.", className="hint")] if more > 0 else []
    table = html.Table(
        [html.Thead(header), html.Tbody(rows)], className="alerts-table", id="alert-backtest-table"
    )
    return html.Div([summary, table, *rest], className="alert-backtest")


def _status(alert: alert_rules.FiredAlert) -> str:
    if alert.status == alert_rules.FIRED:
        return "fired, delivering"
    attempts = (
        f" after {alert.attempts} attempt{'s' if alert.attempts != 1 else ''}" if alert.attempts else ""
    )
    error = f" ({alert.last_error})" if alert.last_error and alert.status != alert_rules.DELIVERED else ""
    return f"{alert.status}{attempts}{error}"


def _rule_row(rule: alert_rules.AlertRule) -> html.Li:
    return html.Li(
        [
            html.Strong(rule.describe()),
            f" · {rule.rule_id} · {KIND_LABELS.get(rule.kind, rule.kind)}",
            " ",
            html.Button("Remove", id={"type": REMOVE, "id": rule.rule_id}, className="button-quiet"),
        ],
        className="share-link alert-rule",
    )
