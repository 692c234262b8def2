"""The Overview tab's callbacks: site list, period, filters, top-line metrics, chart,
breakdowns, map, live numbers and rate limiting. Every number comes from storage.queries,
from the source the settings name (`agg` by default: the derived tables, where they exist)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from threading import Lock
from typing import Any

import plotly.graph_objects as go
from clickhouse_connect.driver.client import Client
from dash import ALL, Dash, Input, Output, State, ctx, html, no_update
from dash.exceptions import PreventUpdate

from dashboard import components, display, figures, periods
from dashboard.clicks import clicked
from dashboard.components import notice
from dashboard.friendly_errors import friendly
from dashboard.goals_panel import register_goals
from dashboard.periods import Period
from dashboard.sharing import shared_link, visible_sites
from dashboard.store import ClientFactory
from storage import annotations, queries
from storage.definitions import CurrentDefinitions
from storage.queries import Source, StatsQuery, questions
from storage.rate_limits import rate_limit_status
from storage.sites import site_timezone
from tally.settings import Settings

LIVE_CHART = timedelta(minutes=60)
BREAKDOWN_ROWS = 10
MAP_ROWS = 250
# A page is a page wherever it is listed: clicking an entry or exit page filters by it.
FILTER_FOR = {"entry_path": "path", "exit_path": "path"}
NO_SITE = "No page views yet. Add the tracker snippet to a site and its traffic shows up here."
EMPTY = "Nothing in this period yet."
NOT_AVAILABLE = "\u2013"  # an en dash where a number could not be read

Clock = Callable[[], datetime]


def compared_name(period: Period) -> str:
    """What the dashed line and the cards' changes compare with, in words."""
    return periods.COMPARISONS[period.compare].lower()


def filterable(dimension: str) -> bool:
    """Whether the query layer can filter by a dimension: asked of it, not assumed here."""
    probe = questions.question(
        "", datetime(2000, 1, 1, tzinfo=UTC), datetime(2000, 1, 2, tzinfo=UTC), filters={dimension: ""}
    )
    try:
        queries.validate(probe)
    except queries.UnsupportedQuery:
        return False
    return True


def filter_dimension(dimension: str) -> str | None:
    candidate = FILTER_FOR.get(dimension, dimension)
    return candidate if filterable(candidate) else None


def site_choice(clients: ClientFactory, current: str | None = None) -> tuple[list[str], str | None]:
    """The sites this viewer may pick, and the one shown: `current` while it is one of them, else
    the first (the busiest), else none."""
    known = visible_sites(queries.sites(clients()))
    return known, current if current in known else (known[0] if known else None)


def first_sites(clients: ClientFactory, wanted: str | None = None) -> tuple[list[str], str | None]:
    """The site picker as the page starts (dashboard/layout.py): `wanted` (the page address's
    `?site=`, dashboard/bookmark.py) if this viewer may see it, else the busiest; with the store
    down, empty, as the picker's callback leaves it then (it asks again on the next clock tick)."""

    @friendly(lambda message: ([], None))
    def sites_on_load() -> tuple[list[str], str | None]:
        return site_choice(clients, wanted)

    return sites_on_load()


def chart_notes(client: Client, site: str, start: datetime, end: datetime) -> list[annotations.Annotation]:
    """The annotations a time chart of [start, end) marks (figures.mark_annotations); on a shared
    link's public page, the notes without who wrote them."""
    return for_this_viewer(annotations.list_annotations(client, site, start, end))


def for_this_viewer(notes: list[annotations.Annotation]) -> list[annotations.Annotation]:
    if shared_link() is not None:
        return [replace(note, author="") for note in notes]
    return notes


class LiveChartNotes:
    """The live chart's annotations, read once per site and chart window (a minute) rather than on
    every 5-second tick of every open dashboard: a read takes six queries (notes, imports, alerts,
    definitions switches, the cap) and the notes of the last hour change rarely. A note added now
    shows from the chart's next minute (the Over time chart redraws at once). At most MAX_SITES
    sites are held, the oldest read dropped first."""

    MAX_SITES = 1024

    def __init__(self) -> None:
        self._lock = Lock()
        self._by_site: dict[str, tuple[datetime, list[annotations.Annotation]]] = {}

    def read(self, client: Client, site: str, start: datetime, end: datetime) -> list[annotations.Annotation]:
        with self._lock:
            held = self._by_site.get(site)
        if held is not None and held[0] == end:
            return for_this_viewer(held[1])
        notes = annotations.list_annotations(client, site, start, end)
        with self._lock:
            self._by_site.pop(site, None)
            while len(self._by_site) >= self.MAX_SITES:
                self._by_site.pop(next(iter(self._by_site)))
            self._by_site[site] = (end, notes)
        return for_this_viewer(notes)


def register_overview(app: Dash, settings: Settings, clients: ClientFactory, clock: Clock) -> None:
    defined = CurrentDefinitions(settings, clients)  # the current definitions version's
    source: Source = settings.dashboard_source

    def stats_query(site: str, period: Period, filters: dict[str, str], previous: bool = False) -> StatsQuery:
        start, end = (period.previous_start, period.previous_end) if previous else (period.start, period.end)
        q = questions.question(
            site, start, end, defined.settings(), timezone=period.timezone, filters=filters
        )
        return questions.with_saved_segment(clients(), q)  # a saved segment's filters

    def inputs_ready(site: str | None, period_data: dict | None) -> Period | None:
        if period_data is None:
            raise PreventUpdate
        return Period.from_store(period_data) if site else None

    @app.callback(
        Output("site", "options"),
        Output("site", "value"),
        Input("clock", "n_intervals"),
        State("site", "value"),
        # The page comes with the picker filled (first_sites): asking again on load would hold
        # every panel of the chosen site back by a round trip, answered only once the browser
        # has parsed plotly. The clock asks every minute (a site whose first event just arrived).
        prevent_initial_call=True,
    )
    @friendly(lambda message: (no_update, no_update))
    def site_options(_: int | None, current: str | None) -> tuple[list[str], Any]:
        known, chosen = site_choice(clients, current)
        # Setting the picker's value, even to the same site, fires every callback reading it:
        # change_filters would clear the filters in force on each tick of the clock.
        return known, (no_update if chosen == current else chosen)

    @app.callback(
        Output("period", "data"),
        Output("custom-range-box", "style"),
        Output("period-label", "children"),
        Input("preset", "value"),
        Input("custom-range", "start_date"),
        Input("custom-range", "end_date"),
        Input("clock", "n_intervals"),
        Input("site", "value"),
        Input("compare", "value"),
        State("period", "data"),
    )
    def choose_period(
        preset: str,
        custom_start: str | None,
        custom_end: str | None,
        _: int | None,
        site: str | None,
        compare: str | None,
        shown: dict | None,
    ) -> tuple[Any, dict, Any]:
        """The range in the site's time zone (storage/sites.py), and the one it is compared with."""
        client = clients() if site else None
        timezone = site_timezone(client, site) if client and site else "UTC"
        comparison = compare if compare in periods.COMPARISONS else periods.DEFAULT_COMPARISON
        refused = ""
        try:  # the picker's dates come from the browser: a day, within periods' bounds
            chosen = periods.period(
                preset if preset in periods.PRESETS else periods.DEFAULT_PRESET,
                clock(),
                periods.picked_day(custom_start),
                periods.picked_day(custom_end),
                timezone=timezone,
                compare=comparison,
                first_day=queries.first_day(client, site) if client and site and preset == "all" else None,
            )
        except periods.UnknownPeriod as error:
            refused = f"{error}; showing {periods.PRESETS[periods.DEFAULT_PRESET].lower()}: "
            chosen = periods.period(periods.DEFAULT_PRESET, clock(), timezone=timezone, compare=comparison)
        data = chosen.to_store()
        label = html.Span(
            [
                refused,
                periods.describe(chosen),
                html.Span(
                    f" \u00b7 vs {periods.describe_comparison(chosen)}",
                    id="comparison-range",
                    className="comparison-range",
                ),
            ],
            id="period-range",
            **{
                "data-start": chosen.start.isoformat(),
                "data-end": chosen.end.isoformat(),
                "data-timezone": chosen.timezone,
                "data-previous-start": chosen.previous_start.isoformat(),
            },
        )
        custom_style = {"display": "block"} if preset == "custom" else {"display": "none"}
        return (no_update if data == shown else data), custom_style, label

    @app.callback(
        Output("filters", "data"),
        Input({"type": components.BREAKDOWN_ITEM, "dim": ALL, "value": ALL}, "n_clicks"),
        Input({"type": components.CHIP_REMOVE, "dim": ALL}, "n_clicks"),
        Input("country-map", "clickData"),
        Input("site", "value"),
        State("filters", "data"),
        prevent_initial_call=True,
    )
    def change_filters(
        _items: list, _removals: list, map_click: dict | None, _site: str, filters: dict
    ) -> dict:
        filters = dict(filters or {})
        trigger = ctx.triggered_id
        if trigger == "site":
            return {} if filters else no_update  # another site's pages are not this one's
        if trigger == "country-map":
            points = (map_click or {}).get("points") or [{}]
            code = points[0].get("customdata")
            if not code or not filterable("country"):
                raise PreventUpdate
            return {**filters, "country": code}
        # Buttons that (re)appear fire with 0 or None clicks: only a real click changes filters,
        # wherever it is among the inputs that fired (dashboard/clicks.py).
        trigger = clicked()
        if not isinstance(trigger, dict):
            raise PreventUpdate
        if trigger["type"] == components.CHIP_REMOVE:
            filters.pop(trigger["dim"], None)
            return filters
        return {**filters, trigger["dim"]: components.decode_value(trigger["value"])}

    @app.callback(Output("filter-chips", "children"), Input("filters", "data"))
    def show_filters(filters: dict | None) -> list:
        return [components.filter_chip(dimension, value) for dimension, value in (filters or {}).items()]

    @app.callback(
        Output("top-metrics", "children"),
        Input("site", "value"),
        Input("period", "data"),
        Input("filters", "data"),
    )
    @friendly(lambda message: notice(message, "error"))
    def top_metrics(site: str | None, period_data: dict | None, filters: dict | None) -> Any:
        period = inputs_ready(site, period_data)
        if period is None:
            return notice(NO_SITE)
        client = clients()
        current = queries.aggregate(client, stats_query(site, period, filters), source=source)
        previous = queries.aggregate(client, stats_query(site, period, filters, previous=True), source=source)
        compared = previous if previous["pageviews"] else {}
        name = compared_name(period)
        return [components.metric_card(m, current[m.key], compared.get(m.key), name) for m in display.METRICS]

    @app.callback(
        Output("main-chart", "figure"),
        Input("site", "value"),
        Input("period", "data"),
        Input("filters", "data"),
        Input("chart-metric", "value"),
    )
    @friendly(figures.message)
    def main_chart(
        site: str | None, period_data: dict | None, filters: dict | None, metric: str
    ) -> go.Figure:
        period = inputs_ready(site, period_data)
        if period is None:
            return figures.message(NO_SITE)
        client = clients()
        current = queries.timeseries(
            client, stats_query(site, period, filters), period.interval, source=source
        )
        previous = queries.timeseries(
            client, stats_query(site, period, filters, previous=True), period.interval, source=source
        )
        label = "Visitors" if metric == "visitors" else "Page views"
        notes = chart_notes(client, site or "", period.start, period.end)
        return figures.timeseries(
            current, previous, metric, label, period.interval, period.timezone, compared_name(period), notes
        )

    @app.callback(
        Output("main-chart", "figure", allow_duplicate=True),
        Input("annotations-version", "data"),
        State("site", "value"),
        State("period", "data"),
        State("filters", "data"),
        State("chart-metric", "value"),
        prevent_initial_call=True,
    )
    @friendly(figures.message)
    def chart_with_new_annotations(
        _: int, site: str | None, period_data: dict | None, filters: dict | None, metric: str
    ) -> go.Figure:
        """The chart again once an annotation is added or removed in the Settings view."""
        return main_chart(site, period_data, filters, metric)

    register_goals(app, clients, source, stats_query, inputs_ready)
    for list_id, tabs_id in (
        ("pages-list", "pages-by"),
        ("sources-list", "sources-by"),
        ("devices-list", "devices-by"),
        ("campaigns-list", "campaigns-by"),
    ):
        register_breakdown(app, list_id, Input(tabs_id, "value"), clients, source, stats_query, inputs_ready)
    register_breakdown(
        app, "languages-list", Input("languages-by", "data"), clients, source, stats_query, inputs_ready
    )

    @app.callback(
        Output("country-map", "figure"),
        Output("countries-list", "children"),
        Input("site", "value"),
        Input("period", "data"),
        Input("filters", "data"),
    )
    @friendly(lambda message: (figures.message(message, 240), None))
    def countries(site: str | None, period_data: dict | None, filters: dict | None) -> tuple[go.Figure, Any]:
        period = inputs_ready(site, period_data)
        if period is None:
            return figures.message(NO_SITE, 240), None
        rows = queries.breakdown(
            clients(), stats_query(site, period, filters), "country", MAP_ROWS, source=source
        )
        top = rows[:BREAKDOWN_ROWS]
        return figures.countries_map(rows), components.breakdown_list(
            top, "country", filter_dimension("country"), EMPTY
        )

    @app.callback(
        Output("live-visitors", "children"), Input("site", "value"), Input("refresh", "n_intervals")
    )
    @friendly(lambda message: NOT_AVAILABLE)
    def live_visitors(site: str | None, _: int | None) -> str:
        if not site:
            return "0"
        return display.count(queries.realtime(clients(), site, now=clock(), source=source)["visitors"])

    live_notes = LiveChartNotes()

    # Read by tests/fault/test_local_stack.py through /_dash-update-component: keep
    # these two outputs and two inputs as they are.
    @app.callback(
        Output("total-pageviews", "children"),
        Output("pageviews-per-minute", "figure"),
        Input("site", "value"),
        Input("refresh", "n_intervals"),
    )
    @friendly(lambda message: (NOT_AVAILABLE, figures.message(message, 160)))
    def live_numbers(site: str | None, _: int | None) -> tuple[str, go.Figure]:
        if not site:
            return "0", figures.message(NO_SITE, 160)
        client = clients()
        end = clock().replace(second=0, microsecond=0) + timedelta(minutes=1)
        points = queries.pageviews_per_minute(client, site, end - LIVE_CHART, end, source)
        notes = live_notes.read(client, site, end - LIVE_CHART, end)
        return f"{queries.total_pageviews(client, site):,}", figures.per_minute(points, notes)

    @app.callback(Output("rate-limits", "children"), Input("clock", "n_intervals"))
    @friendly(lambda message: notice(message, "error"))
    def rate_limits(_: int | None) -> Any:
        status = rate_limit_status(clients(), clock(), settings.rate_window_s)
        return components.rate_limit_panel(status, settings.rate_limit, settings.rate_window_s)


def register_breakdown(
    app: Dash,
    list_id: str,
    dimension: Input,
    clients: ClientFactory,
    source: Source,
    stats_query: Callable[..., StatsQuery],
    inputs_ready: Callable[[str | None, dict | None], Period | None],
) -> None:
    """One breakdown panel: its list follows the site, period, filters and `dimension` (the
    panel's tabs, or a store holding its one dimension)."""

    @app.callback(
        Output(list_id, "children"),
        Input("site", "value"),
        Input("period", "data"),
        Input("filters", "data"),
        dimension,
    )
    @friendly(lambda message: notice(message, "error"))
    def breakdown(site: str | None, period_data: dict | None, filters: dict | None, by: str) -> Any:
        period = inputs_ready(site, period_data)
        if period is None:
            return notice(NO_SITE)
        q = stats_query(site, period, filters)
        rows = queries.breakdown(clients(), q, by, BREAKDOWN_ROWS, source=source)
        # The Pages tab also shows each page's time on page and scroll depth.
        paths = [row.value for row in rows] if by == "path" else None
        engagement = None if paths is None else queries.engagement(clients(), q, paths, source=source)
        return components.breakdown_list(rows, by, filter_dimension(by), EMPTY, engagement)
