"""The Settings view: every settings panel of the site in the site picker, one section per kind
(as Plausible's site settings), under a fifth view tab "Settings" beside Overview, Explore,
Funnel and Realtime; the Overview keeps the reports only.

A view tab rather than a `/settings` page: the dashboard is one Dash page whose header (the site
picker, the period, the filters and the stores the panels share: goals' and segments' versions)
every view reads. A tab keeps the site picked and the filters in force (the Segments section
saves them) without a second layout to build, cut for each viewer and guard, and without a
reload; the callbacks are the same ones, declared in dashboard/access.py as before.

Who sees it: the page's layout (dashboard/sharing.py `layout_for_viewer`) fills the section for
the operator and for a member who administers some site, and cuts it for everyone else
(dashboard/accounts.py `for_signed_in`: a viewer's page holds no settings panel at all; a shared
link's none either). The Settings tab is offered only for a site the signed-in person
administers (`SETTINGS_TAB_FOR_SITE`, run in the page when the site changes, from the sites the
page says the person administers): an admin of A and viewer of B sees it for A and not for B.
The guards, not the tab, are what refuse a settings change.

A click on a point of the Overview's "Over time" chart opens this view at the Annotations
section with the point's date filled in, for an admin (`note_on_clicked_day`); a viewer's page
has no hint under the chart and nothing happens on a click.
"""

from __future__ import annotations

import json
from typing import Any

from dash import Dash, Input, Output, State, html
from dash.exceptions import PreventUpdate
from flask import g

from dashboard.accounts import current_user, team_panel
from dashboard.alerts_panel import alerts_panel
from dashboard.annotations_panel import annotations_panel
from dashboard.components import find, notice, panel_children
from dashboard.custom_props_panel import custom_props_panel
from dashboard.exclusions_panel import exclusions_panel
from dashboard.goals_panel import goals_settings_panel
from dashboard.identity_panel import identity_panel
from dashboard.periods import picked_day
from dashboard.segments import segments_panel
from dashboard.share_panel import share_panel
from dashboard.site_settings_panel import site_settings_panels
from dashboard.timezone_panel import timezone_panel
from dashboard.view_tabs import ADMINISTERED, OVERVIEW_TAB, SETTINGS_PANELS, SETTINGS_SECTION, SETTINGS_TAB
from dashboard.whatif_panel import whatif_panel

SETTINGS_OPTION = {"label": "Settings", "value": SETTINGS_TAB}


def settings_section() -> html.Section:
    """The view's frame, empty: `with_settings` puts the panels in for those who may see them."""
    return html.Section(
        [
            html.Div(
                [
                    html.H2("Site settings"),
                    html.P("For the site in the picker above.", className="hint"),
                ],
                className="settings-heading",
            ),
            html.Div(id=SETTINGS_PANELS, className="settings-panels"),
        ],
        id=SETTINGS_SECTION,
        style={"display": "none"},
    )


def settings_panels() -> list[html.Section]:
    """Every settings kind, one panel each, in the order of Plausible's site settings: general,
    goals and segments, visibility and people, then integrations and the operator's definitions."""
    return [
        timezone_panel(),
        identity_panel(),
        goals_settings_panel(),
        custom_props_panel(),
        segments_panel(),
        annotations_panel(),
        exclusions_panel(),
        share_panel(),
        team_panel(),
        alerts_panel(),
        *site_settings_panels(),  # Import history, Email reports
        whatif_panel(),
    ]


def with_settings(page: html.Div) -> html.Div:
    """The page with every settings panel in the Settings view (the operator's page; a member's
    is then cut by dashboard/accounts.py)."""
    container = find(page, SETTINGS_PANELS)
    if container is not None:
        container.children = [*panel_children(container), *settings_panels()]  # type: ignore[attr-defined]
    return page


def may_administer(site: str | None) -> bool:
    """Whether this request's signed-in person may change `site`'s settings: the operator, or a
    member with admin (or owner) on it. Never a shared link (its page has no settings)."""
    if g.get("shared_link") is not None or not site:  # set by dashboard/sharing.py's guard
        return False
    user = current_user()
    return user is None or user.may(site, "admin")


# Whether the picked site is one the page's person administers ("*": the operator, every site),
# and the tab options and value that follow from it. Run in the page: the tab switch shows a
# section from `tabs.value`, and a server callback writing it would hold every tab click back
# until the server answered (behind the site's other callbacks: 20 s under CI's load, stop 51).
SETTINGS_TAB_FOR_SITE = """function (site, administered, options, tab) {
    const option = %s;
    const may = Boolean(site) && (administered === "*" || (administered || []).includes(site));
    const current = options || [];
    const others = current.filter((o) => o.value !== option.value);
    const wanted = may ? others.concat([option]) : others;
    if (wanted.length === current.length) {
        return [window.dash_clientside.no_update, window.dash_clientside.no_update];
    }
    return [wanted, tab === option.value && !may ? %s : window.dash_clientside.no_update];
}"""


def register_settings_view(app: Dash) -> None:
    # The Settings tab for a site the person administers, none for another (back to the Overview
    # if it was open): the guards, not the tab, are what refuse a settings change.
    app.clientside_callback(
        SETTINGS_TAB_FOR_SITE % (json.dumps(SETTINGS_OPTION), json.dumps(OVERVIEW_TAB)),
        Output("tabs", "options"),
        Output("tabs", "value"),
        Input("site", "value"),
        State(ADMINISTERED, "data"),
        State("tabs", "options"),
        State("tabs", "value"),
    )

    @app.callback(
        Output("chart-annotate-hint", "children"),
        Input("site", "value"),
    )
    def chart_click_hint(site: str | None) -> str:
        """Under the "Over time" chart, for those who may annotate the site: a click adds a note."""
        return "Click a point of the chart to add a note on its date." if may_administer(site) else ""

    @app.callback(
        Output("annotation-date", "value"),
        Output("tabs", "value", allow_duplicate=True),
        Output("annotation-status", "children", allow_duplicate=True),
        Input("main-chart", "clickData"),
        State("site", "value"),
        prevent_initial_call=True,
    )
    def note_on_clicked_day(click: dict | None, site: str | None) -> Any:
        """A click on a point of the "Over time" chart opens the Annotations section with the
        point's date in its form (an admin's page: a viewer's holds no such form, and the guard
        refuses the call). The chart draws the site's wall clock, so the date is the site's."""
        day = clicked_day(click)
        if day is None or not may_administer(site):
            raise PreventUpdate
        return day, SETTINGS_TAB, notice(f"Write what happened on {day}, then Add.")


def clicked_day(click: dict | None) -> str | None:
    """The date (YYYY-MM-DD) of the point clicked in a time chart's clickData, if it is one."""
    points = (click or {}).get("points") or []
    day = picked_day(points[0].get("x")) if points and isinstance(points[0], dict) else None
    return day.isoformat() if day else None
