"""The dashboard's view tabs (layout's `tabs` radio items): the callbacks that show a tab's
content, or compute only while it is shown (Explore, Funnel, Realtime), compare against these.

Which section is shown is decided in the page (`register_view_tabs`): a tab opens at once, even
while the server is busy with the numbers' callbacks, and costs the server no request.

The Settings view's panels read the store only once it is opened: their callbacks take the site
from `settings-site` (and the period from `settings-period`), which the page fills with the
picker's site (and period) when the Settings tab is shown on a new one, and leaves them otherwise.
A page load or a change of site on another tab then costs the server none of the panels'
requests (17 of the Overview's first 61 before, each a store query).
"""

from __future__ import annotations

import json

from dash import Dash, Input, Output, State

OVERVIEW_TAB = "overview"
EXPLORE_TAB = "explore"
FUNNEL_TAB = "funnel"
JOURNEYS_TAB = "journeys"
RETENTION_TAB = "retention"  # weekly cohorts (dashboard/retention_view.py)
REALTIME_TAB = "realtime"
PERFORMANCE_TAB = "performance"  # Web Vitals (dashboard/performance_view.py)
SETTINGS_TAB = "settings"  # the site's settings (dashboard/settings_view.py)
# The Settings view's section and the panels' container in it (dashboard/settings_view.py).
SETTINGS_SECTION = "settings-section"
SETTINGS_PANELS = "settings-panels"
# The sites the page's person administers ("*": every site), for the Settings tab (a dcc.Store
# in the layout, filled by dashboard/accounts.py for the signed-in; a shared link's stays empty).
ADMINISTERED = "administered-sites"
# The site the Settings view shows (a dcc.Store in the layout): the picker's, set when the tab opens.
SETTINGS_SITE = "settings-site"
# The period picked, likewise, for the one panel that reads a period (Definitions' comparison).
SETTINGS_PERIOD = "settings-period"

#: Each tab's section in the layout: the picked tab's is shown, every other one hidden.
SECTIONS = {
    OVERVIEW_TAB: "overview-section",
    EXPLORE_TAB: "explore-section",
    FUNNEL_TAB: "funnel-section",
    JOURNEYS_TAB: "journeys-section",
    RETENTION_TAB: "retention-section",
    REALTIME_TAB: "realtime-section",
    PERFORMANCE_TAB: "performance-section",
    SETTINGS_TAB: SETTINGS_SECTION,
}

SHOW_TAB = """function (tab) {
    return %s.map((view) => ({display: view === tab ? "block" : "none"}));
}"""
# Each set only when it changed: a list re-rendered under a click would lose it (its buttons
# replaced), so opening the view again, or the clock moving the period, leaves the site's lists
# as they are (each edit refreshes its own list).
SETTINGS_SITE_WHEN_SHOWN = """function (tab, site, period, shownSite, shownPeriod) {
    const no_update = window.dash_clientside.no_update;
    if (tab !== %s || !site) {
        return [no_update, no_update];
    }
    const samePeriod = JSON.stringify(period) === JSON.stringify(shownPeriod);
    return [site === shownSite ? no_update : site, samePeriod ? no_update : period];
}"""


def register_view_tabs(app: Dash) -> None:
    """Show the picked tab's section and hide the others, in the browser (a shared link's page
    has placeholders for the sections it cuts, so every output exists on every page)."""
    app.clientside_callback(
        SHOW_TAB % json.dumps(list(SECTIONS)),
        *(Output(section, "style") for section in SECTIONS.values()),
        Input("tabs", "value"),
    )
    app.clientside_callback(
        SETTINGS_SITE_WHEN_SHOWN % json.dumps(SETTINGS_TAB),
        Output(SETTINGS_SITE, "data"),
        Output(SETTINGS_PERIOD, "data"),
        Input("tabs", "value"),
        Input("site", "value"),
        Input("period", "data"),
        State(SETTINGS_SITE, "data"),
        State(SETTINGS_PERIOD, "data"),
    )
