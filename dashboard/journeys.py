"""The Journeys tab: where the period's visits go next from a page (or their entry), or came from
into it, as a Sankey diagram (Plotly's own). The numbers are storage.queries.journeys' for the
site and period above (its definition: docs/architecture.md, "Journeys"), of the visits passing the
filters in force (a saved segment's too) when they are on a visit's properties; a filter on an
event (a page, a goal, a property) shows the query layer's refusal instead of a chart, since a
journey is a whole visit's path. Clicking a node makes its page the one followed, so the diagram
re-centres on it.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import plotly.graph_objects as go
from dash import Dash, Input, Output, State, ctx, dcc, html
from dash.exceptions import PreventUpdate

from dashboard.components import notice
from dashboard.friendly_errors import friendly
from dashboard.periods import Period
from dashboard.store import ClientFactory
from dashboard.view_tabs import JOURNEYS_TAB
from storage import queries
from storage.definitions import CurrentDefinitions
from storage.page_patterns import BadPattern, validate_pattern
from storage.queries import JourneyQuestion, JourneyRow, questions
from storage.queries.journeys import MAX_STEPS, OTHER
from tally.settings import Settings

SECTION = "journeys-section"
HOW_TO = (
    "From a page (its first view in each visit), the next or previous steps of the visits starting "
    "in the period; without a page, from the visits' entry (next) or into their exit (previous). "
    "A page viewed again at once is one step. Group pages by patterns (e.g. /blog/*), comma-separated. "
    "Click a page in the diagram to follow it. The filters above choose the visits followed: those on "
    "a visit (source, channel, UTMs, entry or exit page, country, device, browser, OS, screen size, "
    "language: the visit's first page view's); a page, goal or property filter cannot apply to a "
    "whole visit's path."
)
NO_VISITS = "No visit in this period (under the filters in force) took that page."
# The paths of the most visitors drawn, the others folded into "(other)": a month of a busy site
# has thousands of paths (7,620 from the entry at 10M events), which no diagram shows legibly.
DEFAULT_PATHS_DRAWN = 25
MAX_PATHS_DRAWN = 500


def journeys_section() -> html.Section:
    return html.Section(
        html.Section(
            [
                html.Div(html.H2("Journeys"), className="panel-heading"),
                html.P(HOW_TO, className="caption"),
                html.Div(
                    [
                        _field(
                            "Page",
                            dcc.Input(
                                id="journeys-page", type="text", placeholder="/ (entry)", debounce=True
                            ),
                        ),
                        _field(
                            "Direction",
                            dcc.RadioItems(
                                id="journeys-direction",
                                options=[
                                    {"label": "Next", "value": "next"},
                                    {"label": "Previous", "value": "previous"},
                                ],
                                value="next",
                                inline=True,
                            ),
                        ),
                        _field(
                            "Steps",
                            dcc.Dropdown(
                                id="journeys-steps",
                                options=list(range(1, MAX_STEPS + 1)),
                                value=3,
                                clearable=False,
                            ),
                        ),
                        _field(
                            "Group pages",
                            dcc.Input(id="journeys-group", type="text", placeholder="/blog/*", debounce=True),
                        ),
                        _field(
                            "Fewest visitors per path",
                            dcc.Input(
                                id="journeys-min-visitors", type="number", min=1, value=1, debounce=True
                            ),
                        ),
                        _field(
                            "Most paths drawn",
                            dcc.Input(
                                id="journeys-limit",
                                type="number",
                                min=1,
                                max=MAX_PATHS_DRAWN,
                                value=DEFAULT_PATHS_DRAWN,
                                debounce=True,
                            ),
                        ),
                    ],
                    className="journeys-controls",
                ),
                html.Div(id="journeys-result"),
                dcc.Graph(id="journeys-sankey", config={"displayModeBar": False}, style={"display": "none"}),
            ],
            className="card",
        ),
        id=SECTION,
        style={"display": "none"},
    )


def _field(label: str, control: Any) -> html.Label:
    return html.Label([html.Span(label, className="field-label"), control], className="field")


def sankey(rows: list[JourneyRow], question: JourneyQuestion) -> go.Figure:
    """A node per (position, page) — a page at two positions is two nodes, so a return to a page
    draws no cycle — and a link per consecutive pair of a path, as wide as its visits. The
    "(other)" row hangs off the page followed (without one it is left out: it has no anchor)."""
    nodes: dict[tuple[int, str], int] = {}
    links: dict[tuple[int, int], int] = {}
    for row in rows:
        steps = list(row.steps)
        if steps == [OTHER]:
            if question.page is None:
                continue
            steps = [question.page, OTHER] if question.direction == "next" else [OTHER, question.page]
        offset = 0 if question.direction == "next" else -len(steps) + 1
        ids = [nodes.setdefault((offset + i, step), len(nodes)) for i, step in enumerate(steps)]
        for source, target in pairwise(ids):
            links[(source, target)] = links.get((source, target), 0) + row.visits
    labels = [page for _, page in nodes]
    figure = go.Figure(
        go.Sankey(
            arrangement="fixed",  # a click on a node follows it (no drag to tell apart)
            # left-aligned: a path that ends early stops in its own column, not the last one
            node={"label": labels, "customdata": labels, "pad": 18, "thickness": 14, "align": "left"},
            link={
                "source": [source for source, _ in links],
                "target": [target for _, target in links],
                "value": list(links.values()),
            },
        )
    )
    figure.update_layout(margin={"l": 10, "r": 10, "t": 10, "b": 10}, height=420)
    return figure


def register_journeys(app: Dash, settings: Settings, clients: ClientFactory) -> None:
    defined = CurrentDefinitions(settings, clients)  # the current definitions version's
    source = settings.dashboard_source

    @app.callback(
        Output("journeys-result", "children"),
        Output("journeys-sankey", "figure"),
        Output("journeys-sankey", "style"),
        Input("site", "value"),
        Input("period", "data"),
        Input("filters", "data"),
        Input("tabs", "value"),
        Input("journeys-page", "value"),
        Input("journeys-direction", "value"),
        Input("journeys-steps", "value"),
        Input("journeys-group", "value"),
        Input("journeys-min-visitors", "value"),
        Input("journeys-limit", "value"),
    )
    @friendly(lambda message: (notice(message, "error"), go.Figure(), {"display": "none"}))
    def show_journeys(
        site: str | None, period_data: dict | None, filters: dict | None, tab: str, page: str | None,
        direction: str, steps: int, group: str | None, min_visitors: int | None, most: int | None,
    ) -> Any:  # fmt: skip
        if tab != JOURNEYS_TAB:  # computed when shown, as the Funnel
            raise PreventUpdate
        hidden = {"display": "none"}
        if not site or not period_data:
            return notice("Pick a site first."), go.Figure(), hidden
        try:
            patterns = tuple(validate_pattern(p) for p in (group or "").split(",") if p.strip())
        except BadPattern as refused:
            return notice(f"Group pages: {refused}", "error"), go.Figure(), hidden
        page = (page or "").strip() or None
        if page is not None and not page.startswith("/"):
            return notice("A page starts with /, e.g. /pricing.", "error"), go.Figure(), hidden
        drawn = min(max(1, int(most or DEFAULT_PATHS_DRAWN)), MAX_PATHS_DRAWN)
        fewest = max(1, int(min_visitors or 1))
        question = JourneyQuestion(page, direction, int(steps), patterns, fewest)  # type: ignore[arg-type]
        period = Period.from_store(period_data)
        q = questions.question(
            site, period.start, period.end, defined.settings(), timezone=period.timezone, filters=filters
        )
        q = questions.with_saved_segment(clients(), q)  # as the other panels: a segment's filters too
        rows = queries.journeys(clients(), q, question, source)  # an event filter: refused, its message shown
        if not rows:
            return notice(NO_VISITS), go.Figure(), hidden
        visits = sum(row.visits for row in rows)
        # the paths of the most visitors drawn (rows come so ordered); the others' visits as OTHER
        paths = [row for row in rows if row.steps != (OTHER,)]
        shown = paths[:drawn]
        folded = visits - sum(row.visits for row in shown)
        text = f"{visits:,} visits, {len(paths):,} paths" + (
            f"; {folded:,} visits on other paths, drawn as {OTHER}." if folded else "."
        )
        caption = html.P(
            text, id="journeys-total", className="caption",
            **{"data-paths": str(len(paths)), "data-visits": str(visits), "data-folded": str(folded)},
        )  # fmt: skip
        drawn_rows = [*shown, JourneyRow((OTHER,), folded, 0)] if folded else shown
        return caption, sankey(drawn_rows, question), {"display": "block"}

    @app.callback(
        Output("journeys-page", "value"),
        Input("journeys-sankey", "clickData"),
        State("site", "value"),  # the site's members only (dashboard/access.py checks it)
        prevent_initial_call=True,
    )
    def recentre(click: dict | None, site: str | None) -> str:
        """A click on a node follows its page (a click on a link, or on "(other)", does nothing)."""
        if not site:
            raise PreventUpdate
        point = (click or {}).get("points", [{}])[0]
        label = point.get("label")
        if ctx.triggered_id != "journeys-sankey" or not isinstance(label, str) or label == OTHER:
            raise PreventUpdate
        if "source" in point and "target" in point:  # a link, not a node
            raise PreventUpdate
        return label
