"""The dashboard's page: header (site, period, live visitors), filter chips, the Overview
(metrics, chart, breakdowns, map, realtime, rate limiting: reports only), the Explore, Funnel,
Journeys, Retention, Realtime, Performance and Settings tabs (dashboard/settings_view.py fills
Settings), and a footer for the signed-in person's own API keys (dashboard/accounts.py).

Static structure only, and the site picker's first answer (the sites this viewer may see, the
first of them chosen), so that the Overview's callbacks start with the page rather than after a
first round trip for the sites; dashboard.overview and dashboard.explore fill the rest. The ids `site`,
`total-pageviews`, `pageviews-per-minute` and `refresh` are also read by
tests/fault/test_local_stack.py.
"""

from __future__ import annotations

from dash import dcc, html

from dashboard import figures
from dashboard.bookmark import location
from dashboard.components import panel, panel_tabs
from dashboard.funnel import funnel_section
from dashboard.goals_panel import goals_panels
from dashboard.journeys import journeys_section
from dashboard.performance_view import performance_section
from dashboard.periods import COMPARISONS, DEFAULT_COMPARISON, DEFAULT_PRESET, PRESETS
from dashboard.realtime_view import realtime_section
from dashboard.retention_view import retention_section
from dashboard.settings_view import settings_section
from dashboard.view_tabs import (
    ADMINISTERED,
    EXPLORE_TAB,
    FUNNEL_TAB,
    JOURNEYS_TAB,
    OVERVIEW_TAB,
    PERFORMANCE_TAB,
    REALTIME_TAB,
    RETENTION_TAB,
    SETTINGS_PERIOD,
    SETTINGS_SITE,
    SETTINGS_TAB,
)

LIVE_REFRESH_MS = 5_000
# The period (and with it every panel) is recomputed once a minute: often enough for a
# morning read, rare enough not to load the store with every open tab.
CLOCK_MS = 60_000
GRAPH_CONFIG = {"displayModeBar": False, "responsive": True}
EXPLORE_LIMITS = [100, 1000, 10_000]


def build_layout(topojson_url: str, sites: list[str] | None = None, site: str | None = None) -> html.Div:
    return html.Div(
        [
            location(),  # the address bar's `?site=` (dashboard/bookmark.py)
            dcc.Store(id="filters", data={}),
            dcc.Store(id="segments-version", data=0),  # bumped when a segment is saved or changed
            dcc.Store(id="segment-changed"),  # the segment renamed or deleted (dashboard/segments.py)
            dcc.Store(id="period"),
            dcc.Store(id=ADMINISTERED, data=[]),  # whose Settings tab this page offers (view_tabs.py)
            dcc.Store(id=SETTINGS_SITE),  # the Settings view's site, once it is opened (view_tabs.py)
            dcc.Store(id=SETTINGS_PERIOD),  # and its period
            dcc.Interval(id="refresh", interval=LIVE_REFRESH_MS),
            dcc.Interval(id="clock", interval=CLOCK_MS),
            _header(sites or [], site),
            html.Div(
                [
                    html.Div(id="period-label", className="period-label"),
                    html.Div(id="filter-chips", className="chips"),
                    dcc.Dropdown(
                        id="segment", placeholder="Segment…", clearable=True, className="segment-picker"
                    ),
                ],
                className="subheader",
            ),
            # Radio buttons rather than dcc.Tabs: keyboard- and screen-reader-usable as they are.
            dcc.RadioItems(
                id="tabs",
                options=[
                    {"label": "Overview", "value": OVERVIEW_TAB},
                    {"label": "Explore", "value": EXPLORE_TAB},
                    {"label": "Funnel", "value": FUNNEL_TAB},
                    {"label": "Journeys", "value": JOURNEYS_TAB},
                    {"label": "Retention", "value": RETENTION_TAB},
                    {"label": "Realtime", "value": REALTIME_TAB},
                    {"label": "Performance", "value": PERFORMANCE_TAB},
                    # Cut for those who administer no site, and per site (dashboard/settings_view.py).
                    {"label": "Settings", "value": SETTINGS_TAB},
                ],
                value=OVERVIEW_TAB,
                inline=True,
                className="view-tabs",
                labelClassName="view-tab",
            ),
            html.Main(
                [
                    _overview(topojson_url),
                    _explore(),
                    funnel_section(),
                    journeys_section(),
                    retention_section(),
                    realtime_section(),
                    performance_section(),
                    settings_section(),
                ]
            ),
            html.Footer(id="account", className="account"),  # dashboard/accounts.py: one's API keys
        ],
        className="page",
    )


def _header(sites: list[str], site: str | None) -> html.Header:
    return html.Header(
        [
            html.Div([html.Span("◆", className="logo-mark"), "Tally"], className="brand"),
            html.Div(
                dcc.Dropdown(
                    id="site",
                    options=sites,
                    value=site,
                    placeholder="Pick a site",
                    clearable=False,
                    searchable=True,
                    # No Dash persistence here: the dropdown clears a value its options do not
                    # hold yet as if the user had (setProps value=None), persistence records that
                    # as the user's choice, and the next load shows "Pick a site" although the
                    # site callback chose one (seen as a flaky sign-in in test_dashboard_team).
                ),
                className="site-box",
            ),
            html.Div(
                [
                    html.Span(className="live-dot"),
                    html.Span("\u2013", id="live-visitors"),
                    " current visitors",
                ],
                className="live",
                title="Distinct visitors in the last 5 minutes",
            ),
            html.Div(
                [
                    dcc.Dropdown(
                        id="preset",
                        options=[{"label": label, "value": key} for key, label in PRESETS.items()],
                        value=DEFAULT_PRESET,
                        clearable=False,
                        searchable=False,
                        persistence=True,
                        persistence_type="local",
                        className="preset-picker",
                    ),
                    dcc.Dropdown(
                        id="compare",
                        options=[
                            {"label": f"vs {label.lower()}", "value": key}
                            for key, label in COMPARISONS.items()
                        ],
                        value=DEFAULT_COMPARISON,
                        clearable=False,
                        searchable=False,
                        persistence=True,
                        persistence_type="local",
                        className="compare-picker",
                    ),
                    html.Div(
                        dcc.DatePickerRange(
                            id="custom-range",
                            display_format="YYYY-MM-DD",
                            minimum_nights=0,
                            start_date_placeholder_text="From",
                            end_date_placeholder_text="To",
                        ),
                        id="custom-range-box",
                        style={"display": "none"},
                    ),
                ],
                className="period-picker",
            ),
            html.Form(
                html.Button("Log out", type="submit", id="logout", className="button-quiet"),
                action="/logout",
                method="POST",
                className="logout",
            ),
        ],
        className="topbar",
    )


def _overview(topojson_url: str) -> html.Section:
    return html.Section(
        [
            loading(html.Div(id="top-metrics", className="metrics")),
            html.Div(id="imported-history", className="imported-history"),
            html.Div(id="provenance", className="provenance", role="status"),  # dashboard/provenance.py
            html.Section(
                [
                    html.Div(
                        [
                            html.H2("Over time"),
                            dcc.RadioItems(
                                id="chart-metric",
                                options=[
                                    {"label": "Visitors", "value": "visitors"},
                                    {"label": "Page views", "value": "pageviews"},
                                ],
                                value="visitors",
                                inline=True,
                                className="panel-tabs",
                                inputClassName="panel-tab-input",
                                labelClassName="panel-tab",
                            ),
                        ],
                        className="panel-heading",
                    ),
                    loading(graph("main-chart", 280, className="chart")),
                    # Filled for an admin of the site (dashboard/settings_view.py): a click adds a note.
                    html.Div(id="chart-annotate-hint", className="hint"),
                    # Bumped by the Settings view's Annotations section: the chart redraws its markers.
                    dcc.Store(id="annotations-version", data=0),
                ],
                className="card",
            ),
            html.Div(
                [
                    panel(
                        "Pages",
                        [loading(html.Div(id="pages-list"))],
                        panel_tabs(
                            "pages-by",
                            {"path": "Top pages", "entry_path": "Entry pages", "exit_path": "Exit pages"},
                        ),
                    ),
                    panel(
                        "Sources",
                        [loading(html.Div(id="sources-list"))],
                        panel_tabs(
                            "sources-by",
                            {
                                "referrer_domain": "Referrers",
                                "utm_source": "UTM sources",
                                "channel": "Channels",
                            },
                        ),
                    ),
                    panel(
                        "Countries",
                        [
                            loading(
                                graph(
                                    "country-map",
                                    240,
                                    className="map",
                                    config={**GRAPH_CONFIG, "topojsonURL": topojson_url, "scrollZoom": False},
                                )
                            ),
                            loading(html.Div(id="countries-list")),
                        ],
                    ),
                    panel(
                        "Devices",
                        [loading(html.Div(id="devices-list"))],
                        panel_tabs(
                            "devices-by",
                            {"device": "Devices", "browser": "Browsers", "os": "OS", "screen_size": "Sizes"},
                        ),
                    ),
                    panel(
                        "Campaigns",
                        [loading(html.Div(id="campaigns-list"))],
                        panel_tabs(
                            "campaigns-by",
                            {
                                "utm_medium": "Medium",
                                "utm_campaign": "Campaign",
                                "utm_content": "Content",
                                "utm_term": "Term",
                            },
                        ),
                    ),
                    # One dimension, no tabs: the list reads its dimension from a store.
                    panel(
                        "Languages",
                        [
                            dcc.Store(id="languages-by", data="language"),
                            loading(html.Div(id="languages-list")),
                        ],
                    ),
                    panel(
                        "Realtime",
                        [
                            html.Div(
                                [
                                    html.Span(id="total-pageviews", className="big-number"),
                                    " page views, all time",
                                ],
                                className="realtime-total",
                            ),
                            html.Div("Page views per minute, last hour", className="caption"),
                            graph("pageviews-per-minute", 160, className="sparkline"),
                        ],
                    ),
                    *goals_panels(),
                    panel("Rate limiting", [html.Div(id="rate-limits")]),
                ],
                className="grid",
            ),
        ],
        id="overview-section",
    )


def _explore() -> html.Section:
    return html.Section(
        [
            html.Section(
                [
                    html.Div(html.H2("Raw archive"), className="panel-heading"),
                    html.P(
                        "Every event as it was archived, for the site and period above. Pick filters to "
                        "start a query, or write your own (read-only SQL on table events).",
                        className="caption",
                    ),
                    html.Div(
                        [
                            _labelled(
                                "Event name", dcc.Input(id="explore-name", value="pageview", debounce=True)
                            ),
                            _labelled(
                                "Page", dcc.Input(id="explore-path", placeholder="/pricing", debounce=True)
                            ),
                            _labelled(
                                "Country", dcc.Input(id="explore-country", placeholder="DE", debounce=True)
                            ),
                            _labelled(
                                "Device",
                                dcc.Dropdown(
                                    id="explore-device",
                                    options=["desktop", "mobile", "tablet"],
                                    placeholder="any",
                                ),
                            ),
                            _labelled(
                                "Rows",
                                dcc.Dropdown(
                                    id="explore-limit",
                                    options=[{"label": f"{n:,}", "value": n} for n in EXPLORE_LIMITS],
                                    value=EXPLORE_LIMITS[0],
                                    clearable=False,
                                ),
                            ),
                        ],
                        className="explore-filters",
                    ),
                    html.Div(id="explore-raw-totals", className="explore-totals"),
                    dcc.Textarea(id="explore-sql", className="sql", spellCheck=False),
                    html.Div(
                        [
                            html.Button(
                                "Run query", id="explore-run", className="button-primary", n_clicks=0
                            ),
                            html.Button(
                                "Download CSV", id="explore-download-button", className="button", n_clicks=0
                            ),
                            dcc.Download(id="explore-download"),
                        ],
                        className="actions",
                    ),
                    html.Div(id="explore-status"),
                    dcc.Store(id="explore-last-sql"),
                    html.Div(id="explore-table", className="result-table"),
                ],
                className="card",
            ),
        ],
        id="explore-section",
        style={"display": "none"},
    )


def graph(component_id: str, height: int, **options: object) -> dcc.Graph:
    """A chart of fixed height that starts as a blank with "Loading" rather than empty axes."""
    options.setdefault("config", GRAPH_CONFIG)
    return dcc.Graph(
        id=component_id,
        figure=figures.message("Loading…", height),
        style={"height": f"{height}px"},
        **options,
    )


def loading(content: object) -> dcc.Loading:
    """A spinner over a panel whose numbers take a while (long ranges, big archives); only
    after a moment, so that fast answers do not flicker."""
    return dcc.Loading(content, type="dot", color="#4f46e5", delay_show=400)


def _labelled(label: str, control: object) -> html.Label:
    return html.Label([html.Span(label, className="field-label"), control], className="field")
