"""The dashboard: a Plotly Dash app on a Flask server (which also serves /healthz).

Reads the store only through storage.queries. Run with `python -m dashboard.app`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import plotly.graph_objects as go
from clickhouse_connect.driver.client import Client
from dash import Dash, Input, Output, dcc, html
from waitress import serve

from storage import queries
from storage.client import connect
from tally.settings import Settings

LIVE_REFRESH_MS = 5_000
CHART_MINUTES = 60


def thread_local_clients(settings: Settings) -> Callable[[], Client]:
    """One store client per server thread: clients are not thread-safe, and connecting per
    request would add a round trip to every callback."""
    local = threading.local()

    def client() -> Client:
        if not hasattr(local, "client"):
            local.client = connect(settings)
        return local.client

    return client


def build_app(settings: Settings) -> Dash:
    make_client = thread_local_clients(settings)
    app = Dash(__name__, title="Tally", update_title=None)
    app.layout = html.Main(
        [
            html.H1("Tally"),
            dcc.Dropdown(id="site", placeholder="Site", clearable=False),
            html.Section(
                [
                    html.Div("Page views", className="label"),
                    html.Div(id="total-pageviews", className="metric"),
                ],
                className="card",
            ),
            dcc.Graph(id="pageviews-per-minute", config={"displayModeBar": False}),
            dcc.Interval(id="refresh", interval=LIVE_REFRESH_MS),
        ],
        style={"maxWidth": "960px", "margin": "0 auto", "fontFamily": "system-ui, sans-serif"},
    )

    @app.server.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.callback(
        Output("site", "options"),
        Output("site", "value"),
        Input("refresh", "n_intervals"),
        Input("site", "value"),
    )
    def site_options(_: int | None, current: str | None) -> tuple[list[str], str | None]:
        known = queries.sites(make_client())
        return known, current if current in known else (known[0] if known else None)

    @app.callback(
        Output("total-pageviews", "children"),
        Output("pageviews-per-minute", "figure"),
        Input("site", "value"),
        Input("refresh", "n_intervals"),
    )
    def live_numbers(site: str | None, _: int | None) -> tuple[str, go.Figure]:
        if not site:
            return "No page views yet", go.Figure()
        client: Client = make_client()
        end = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
        points = queries.pageviews_per_minute(
            client, site, end - timedelta(minutes=CHART_MINUTES), end, "agg"
        )
        figure = go.Figure(
            go.Bar(x=[p.t for p in points], y=[p.pageviews for p in points], name="page views")
        )
        figure.update_layout(
            title="Page views per minute (last hour)", margin={"l": 40, "r": 10, "t": 40, "b": 30}
        )
        return f"{queries.total_pageviews(client, site):,}", figure

    return app


def main() -> None:
    settings = Settings()
    app = build_app(settings)
    serve(app.server, host=settings.dashboard_host, port=settings.dashboard_port, threads=8, _quiet=True)


if __name__ == "__main__":
    main()
