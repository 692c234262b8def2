"""The Retention tab: weekly cohorts of first visit and the share of each back in every
later week, as a Plotly heatmap, for the weeks up to the period's last day (storage/queries/
retention.py says what each number is; /api/v1/stats/retention answers the same). Above it, the
visitor identity the numbers rest on: under daily ids (the default) nobody is recognised in a later
week, and the tab says so and where to change it (Settings, Visitor identity).

Members only, as the Journeys tab: a shared link's page keeps the Overview alone.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import plotly.graph_objects as go
from dash import Dash, Input, Output, dcc, html
from dash.exceptions import PreventUpdate

from dashboard import figures
from dashboard.components import notice, panel
from dashboard.friendly_errors import friendly
from dashboard.periods import Period
from dashboard.store import ClientFactory
from dashboard.view_tabs import RETENTION_TAB
from storage.calendar import local_date, zone
from storage.definitions import CurrentDefinitions
from storage.queries.retention import DEFAULT_WEEKS, MAX_WEEKS, RetentionReport, report_weeks, retention
from tally.settings import Settings

SECTION = "retention-section"
GRAPH_CONFIG = {"displayModeBar": False, "responsive": True}
HOW_TO = (
    "Each row is the visitors first seen in a week (Monday to Sunday, the site's time zone), and each "
    "column the share of them with a visit 1, 2, … weeks later. The last week is the one holding the "
    "period's last day. A visitor is recognised only while its visitor id lives (see below)."
)
DAILY = (
    "Visitor ids of this site rotate daily (the default), so nobody can be recognised in a later week: "
    "later weeks read 0. An admin can choose weekly or monthly ids in Settings, Visitor identity."
)
WEEKLY = (
    "Visitor ids of this site rotate weekly (each ISO week, UTC): a visitor back in a later week has a new "
    "id, so later weeks read about 0. Monthly ids (Settings, Visitor identity) recognise returns within a "
    "calendar month."
)
NOBODY = "No visitor in these weeks."


def retention_section() -> html.Section:
    return html.Section(
        panel(
            "Retention \u00b7 weekly cohorts",
            [
                html.P(HOW_TO, className="caption"),
                html.Label(
                    [
                        html.Span("Weeks", className="field-label"),
                        dcc.Dropdown(
                            id="retention-weeks",
                            options=list(range(2, MAX_WEEKS + 1)),
                            value=DEFAULT_WEEKS,
                            clearable=False,
                        ),
                    ],
                    className="field",
                ),
                html.Div(id="retention-identity"),
                dcc.Graph(id="retention-heatmap", config=GRAPH_CONFIG, figure=figures.message("")),
            ],
        ),
        id=SECTION,
        style={"display": "none"},
    )


def register_retention(app: Dash, settings: Settings, clients: ClientFactory) -> None:
    defined = CurrentDefinitions(settings, clients)  # the current definitions version's session gap
    source = settings.dashboard_source

    @app.callback(
        Output("retention-identity", "children"),
        Output("retention-heatmap", "figure"),
        Input("site", "value"),
        Input("period", "data"),
        Input("tabs", "value"),
        Input("retention-weeks", "value"),
    )
    @friendly(lambda message: (notice(message, "error"), figures.message(message)))
    def show_retention(site: str | None, period_data: dict | None, tab: str, weeks: int | None) -> Any:
        if tab != RETENTION_TAB:  # computed when shown, as the Journeys
            raise PreventUpdate
        if not site or not period_data:
            return notice("Pick a site first."), figures.message("Pick a site first.")
        period = Period.from_store(period_data)
        last_day = local_date(period.end - timedelta(milliseconds=1), zone(period.timezone))
        count = min(max(int(weeks or DEFAULT_WEEKS), 1), MAX_WEEKS)
        report = retention(
            clients(),
            site,
            report_weeks(last_day, count),
            period.timezone,
            defined.settings().session_gap_s,
            source,
        )
        return identity_lines(report), heatmap(report)


def identity_lines(report: RetentionReport) -> list[html.Div]:
    """What the numbers rest on: the identity in force (and each change within the weeks), the
    daily ids' warning, and each cohort's note."""
    first, *changes = report.identity
    since = f" since {first.since:%Y-%m-%d %H:%M} UTC" if first.since else ""
    said = [f"Visitor ids rotate {first.rotation}{since}."]
    said += [f"From {c.since:%Y-%m-%d %H:%M} UTC: {c.rotation}." for c in changes if c.since]
    lines = [notice(" ".join(said))]
    if report.identity[-1].rotation != "monthly":
        lines.append(notice(DAILY if report.identity[-1].rotation == "daily" else WEEKLY, "warning"))
    lines += [notice(line, "warning") for line in cohort_notes(report)]
    return [html.Div(lines, id="retention-identity-lines", **{"data-rotation": report.identity[-1].rotation})]


def cohort_notes(report: RetentionReport) -> list[str]:
    """Each cohort's note once, naming the weeks it is about (a change late in the report is
    spanned by every cohort before it: one line, not one per week)."""
    weeks: dict[str, list[str]] = {}
    for cohort in report.cohorts:
        if cohort.note:
            weeks.setdefault(cohort.note, []).append(f"{cohort.week:%Y-%m-%d}")
    return [
        f"{named[0]}: {note}" if len(named) == 1 else f"The cohorts of {named[0]} to {named[-1]}: {note}"
        for note, named in weeks.items()
    ]


def heatmap(report: RetentionReport) -> go.Figure:
    """A row per cohort (newest at the bottom), a column per week after its first (week 0: all of
    it), each cell the share back that week with the count; empty where the report ends."""
    if not any(cohort.visitors for cohort in report.cohorts):
        return figures.message(NOBODY)
    size = len(report.weeks)
    rows = [f"{c.week:%Y-%m-%d} \u00b7 {c.visitors:,}" for c in report.cohorts]
    z: list[list[float | None]] = []
    text: list[list[str]] = []
    for cohort in report.cohorts:
        if not cohort.visitors:  # nobody first seen that week: a blank row
            z.append([None] * size)
            text.append([""] * size)
            continue
        shares = [1.0, *cohort.shares]
        counts = [cohort.visitors, *cohort.returning]
        padding = size - len(shares)
        z.append([*(100 * share for share in shares), *[None] * padding])
        text.append(
            [*(f"{100 * s:.0f}%<br>{n:,}" for s, n in zip(shares, counts, strict=True)), *[""] * padding]
        )
    figure = go.Figure(
        go.Heatmap(
            z=z,
            x=[f"week {n}" for n in range(size)],
            y=rows,
            text=text,
            texttemplate="%{text}",
            colorscale="Blues",
            zmin=0,
            zmax=100,
            hovertemplate="%{y}<br>%{x}: %{z:.1f}%<extra></extra>",
            colorbar={"title": "%"},
        )
    )
    figure.update_layout(
        height=120 + 34 * size,
        margin={"l": 140, "r": 20, "t": 10, "b": 40},
        yaxis={"autorange": "reversed"},
    )
    return figure
