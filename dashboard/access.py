"""Who may call what: every Dash callback and every route of the dashboard server declares the
site it acts on and the role it needs, here, in one table each; the guards read these tables.

A callback is named by its function (`module.function`, as Dash keeps it in `app.callback_map`),
and declares
  - `site`: the id of the component whose value is the site it reads or changes (`"site"`, the
    site picker; `"settings-site"`, the site the Settings view shows, for its panels' lists), or
    None when it acts on no site;
  - `role`: what the caller needs on that site: `viewer` (read), `admin` (the site's settings),
    `owner` (its members), or `operator` (the whole installation: every site at once, or raw
    SQL over every tenant's rows);
  - `shared`: whether a shared link (dashboard/sharing.py, always `viewer` of its one site) may call it.
A callback missing from the table is the operator's alone (fail closed): a new panel is refused
to team members and shared links until it is declared here, and tests/security/
test_access_declared.py fails until it is. A clientside callback (dashboard/bookmark.py: the site
picker and the address bar; dashboard/view_tabs.py: which tab's section shows and the Settings
view's site; dashboard/alerts_panel.py: its refresh, on while shown) runs in the page
and never on the server: it needs no declaration, and a request naming it answers 400.

Before any guard, every callback request is checked for its shape against the callback's
definition (`body_problem`), for the operator too: a malformed body answers 400, never a 500
from inside Dash.

Routes are declared by endpoint (`ROUTES`): who may call them at all (anyone, a dashboard session,
an API key), where the site is (query, body, none) and the role and key scope they need. The
stats API's key check (dashboard/http_api/stats.py) refuses an undeclared endpoint to every key but the
operator's, and a role above `viewer` when the site is in the query, so the API asks of a key's
user what the dashboard asks of the same person.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from dash import Dash
from flask import Flask, Response, jsonify, request

from dashboard.http_api.authorisation import Access
from dashboard.view_tabs import SETTINGS_SITE
from storage.users import Scope, User

CALLBACK_PATH = "/_dash-update-component"
# Deep enough for any component value the pages send (a figure's click data is a few levels).
MAX_DEPTH = 32

Role = Literal["viewer", "admin", "owner", "operator"]


@dataclass(frozen=True)
class CallbackAccess:
    site: str | None  # the component id whose value is the site; None: acts on no site
    role: Role
    shared: bool = False  # a shared link (viewer of its one site) may call it


def overview(site: str | None = "site") -> CallbackAccess:
    """What a site's readers see, shared links included."""
    return CallbackAccess(site, "viewer", shared=True)


def reader(site: str | None = "site") -> CallbackAccess:
    """What a site's members read, but a shared link does not (the Funnel, the Team panel's keys)."""
    return CallbackAccess(site, "viewer")


ADMIN = CallbackAccess("site", "admin")  # a site's settings panels: their buttons
# The panels' lists, read for the site the Settings view shows (dashboard/view_tabs.py).
SETTINGS = CallbackAccess(SETTINGS_SITE, "admin")
OWNER = CallbackAccess("site", "owner")  # a site's members
# Every site at once (rate limiting, definitions) or raw SQL over every tenant's rows (Explore:
# its queries name no site and `readonly_sql` reads every site's events and the site registry).
OPERATOR = CallbackAccess(None, "operator")

CALLBACKS: dict[str, CallbackAccess] = {
    # The Overview (overview.py, goals_panel.py, imports_panel.py, segments.py, realtime_view.py,
    # provenance.py): a shared link's page.
    "dashboard.overview.site_options": overview(),
    "dashboard.overview.choose_period": overview(),
    "dashboard.overview.change_filters": overview(),
    "dashboard.overview.show_filters": overview(None),
    "dashboard.overview.top_metrics": overview(),
    "dashboard.overview.main_chart": overview(),
    "dashboard.settings_view.chart_click_hint": overview(),  # empty but for the site's admins
    "dashboard.overview.chart_with_new_annotations": overview(),
    "dashboard.overview.breakdown": overview(),
    "dashboard.overview.countries": overview(),
    "dashboard.overview.live_visitors": overview(),
    "dashboard.overview.live_numbers": overview(),
    "dashboard.overview.rate_limits": OPERATOR,  # every site's collector limits
    "dashboard.goals_panel.goals": overview(),
    "dashboard.goals_panel.property_keys": overview(),
    "dashboard.goals_panel.properties": overview(),
    "dashboard.imports_panel.imported_history": overview(),
    "dashboard.segments.segment_options": overview(),
    "dashboard.segments.apply_segment": overview(None),  # the segment's filters: of the listed site
    "dashboard.segments.follow_segment": overview(None),
    "dashboard.realtime_view.realtime": overview(),
    "dashboard.performance_view.performance": overview(),  # the Performance tab (Web Vitals)
    "dashboard.provenance.show": overview(),
    # Explore: the operator's (README, "Explore").
    "dashboard.explore.write_sql": OPERATOR,
    "dashboard.explore.raw_totals": OPERATOR,
    "dashboard.explore.run_query": OPERATOR,
    "dashboard.explore.download_csv": OPERATOR,
    # The Funnel tab: members, not shared links.
    "dashboard.funnel.show_funnel": reader(),
    "dashboard.funnel.saved_funnels": reader(),
    "dashboard.funnel.load_saved": reader(),
    # The Journeys tab likewise (dashboard/journeys.py).
    "dashboard.journeys.show_journeys": reader(),
    "dashboard.journeys.recentre": reader(),
    # The Retention tab likewise (dashboard/retention_view.py).
    "dashboard.retention_view.show_retention": reader(),
    # A site's settings (the Settings view, dashboard/settings_view.py): admins and owners.
    "dashboard.share_panel.create": ADMIN,
    "dashboard.share_panel.links": SETTINGS,
    "dashboard.alerts_panel.add": ADMIN,
    "dashboard.alerts_panel.backtest": ADMIN,
    "dashboard.alerts_panel.rules": SETTINGS,
    "dashboard.alerts_panel.recent": SETTINGS,
    "dashboard.site_settings_panel.upload": ADMIN,
    "dashboard.site_settings_panel.imported_files": SETTINGS,
    "dashboard.site_settings_panel.subscribe": ADMIN,
    "dashboard.site_settings_panel.listed": SETTINGS,
    "dashboard.goals_panel.listed": SETTINGS,
    "dashboard.goals_panel.add_goal": ADMIN,
    "dashboard.goals_panel.remove_goal": ADMIN,
    "dashboard.funnel.edit_saved_funnels": ADMIN,
    "dashboard.exclusions_panel.listed": SETTINGS,
    "dashboard.exclusions_panel.add": ADMIN,
    "dashboard.exclusions_panel.remove": ADMIN,
    "dashboard.custom_props_panel.listed": SETTINGS,
    "dashboard.custom_props_panel.add": ADMIN,
    "dashboard.custom_props_panel.remove": ADMIN,
    "dashboard.annotations_panel.listed": SETTINGS,
    "dashboard.annotations_panel.add": ADMIN,
    "dashboard.annotations_panel.remove": ADMIN,
    "dashboard.settings_view.note_on_clicked_day": ADMIN,
    "dashboard.segments.listed": SETTINGS,
    "dashboard.segments.save": ADMIN,
    "dashboard.segments.edit": ADMIN,
    "dashboard.timezone_panel.shown": SETTINGS,
    "dashboard.timezone_panel.save": ADMIN,
    "dashboard.identity_panel.shown": SETTINGS,
    "dashboard.identity_panel.save": ADMIN,
    # Definitions versions change every site's numbers: the operator's.
    "dashboard.whatif_panel.versions": OPERATOR,
    "dashboard.whatif_panel.comparison": OPERATOR,
    "dashboard.whatif_panel.ask": OPERATOR,
    "dashboard.whatif_panel.requests": OPERATOR,
    # Each member's own keys ("Your API keys", on every member's page) and the Team section of
    # Settings: the members list answers "hidden" to non-owners (the section is on every admin's
    # page), the changes are the owners'.
    "dashboard.accounts.keys": reader(),
    "dashboard.accounts.create_key": reader(),
    "dashboard.accounts.revoke_key": reader(),
    "dashboard.accounts.members": reader(SETTINGS_SITE),
    "dashboard.accounts.remove_member": OWNER,
    "dashboard.accounts.change_role": OWNER,
    "dashboard.accounts.invite": OWNER,
    # Waiting invitations: listed to owners ("nothing" to other members), revoked by owners.
    "dashboard.accounts.waiting_invites": reader(SETTINGS_SITE),
    "dashboard.accounts.revoke_invite": OWNER,
}


def runs_in_browser(app: Dash, output: str) -> bool:
    """A clientside callback (dashboard/bookmark.py, view_tabs.py): the page runs it, not the server."""
    return "callback" not in app.callback_map[output]


def callback_name(app: Dash, output: str) -> str:
    if runs_in_browser(app, output):
        return f"browser:{output}"  # declared nowhere: the operator's (no one's) on the server
    function = app.callback_map[output]["callback"]
    return f"{function.__module__}.{function.__name__}"


def declaration(app: Dash, output: str) -> CallbackAccess:
    """The callback's declaration; the operator's alone when it has none (fail closed)."""
    return CALLBACKS.get(callback_name(app, output), OPERATOR)


def undeclared(app: Dash) -> list[str]:
    """The registered callbacks this module says nothing about (a test keeps this empty)."""
    names = {callback_name(app, output) for output in app.callback_map if not runs_in_browser(app, output)}
    return sorted(names - set(CALLBACKS))


# -- the shape of a callback request, for everyone --------------------------------------------


def body_problem(app: Dash, body: Any) -> str | None:
    """What is wrong with this callback request's shape (None if Dash can run it): the output a
    registered callback's, inputs and state as many as it declares, each naming the component
    and property it declares, and no value nested deeper than MAX_DEPTH."""
    if not isinstance(body, dict):
        return "body: a JSON object"
    output = body.get("output")
    if not isinstance(output, str) or output not in app.callback_map:
        return "output: not a callback of this dashboard"
    if runs_in_browser(app, output):  # Dash has no function to call for it: a 500 otherwise
        return "output: a callback the page runs itself"
    if too_deep(body):
        return f"body: nested deeper than {MAX_DEPTH} levels"
    declared = app.callback_map[output]
    for kind in ("inputs", "state"):
        sent = body.get(kind, [])
        wanted = declared.get(kind) or []
        if not isinstance(sent, list) or len(sent) != len(wanted):
            return f"{kind}: {len(wanted)} entries as the callback declares"
        for expected, given in zip(wanted, sent, strict=True):
            if not matches(expected, given):
                return f"{kind}: {expected['id']}.{expected['property']} expected"
    declared_site = CALLBACKS.get(callback_name(app, output), OPERATOR).site
    if declared_site is not None and any(
        site is not None and not isinstance(site, str) for site in sites_sent(app, body, declared_site)
    ):
        return f"{declared_site}: a site name"
    if "outputs" in body:
        outputs = body["outputs"]
        count = (
            len(output.removeprefix("..").removesuffix("..").split("...")) if output.startswith("..") else 1
        )
        if count > 1 and not (isinstance(outputs, list) and len(outputs) == count):
            return f"outputs: a list of {count} outputs"
        if not all(output_entry(item) for item in (outputs if count > 1 else [outputs])):
            return "outputs: objects naming an id and a property"
    changed = body.get("changedPropIds", [])
    if not isinstance(changed, list) or not all(isinstance(item, str) for item in changed):
        return "changedPropIds: a list of strings"
    return None


def matches(expected: dict, given: Any) -> bool:
    """Whether one sent input or state is the component and property the callback declares: a
    plain id is one object; a pattern id (`{"type": ..., "id": ["ALL"]}`, as the callback map
    spells it) a list of objects, or one, whose ids fit the pattern."""
    if not expected["id"].startswith("{"):
        return entry(given, expected["property"]) and given["id"] == expected["id"]
    pattern = json.loads(expected["id"])
    items = given if isinstance(given, list) else [given]
    return all(entry(item, expected["property"]) and fits(item["id"], pattern) for item in items)


def fits(sent: Any, pattern: dict) -> bool:
    """A sent pattern-matching id: the pattern's keys, its fixed values (wildcards are lists)."""
    return (
        isinstance(sent, dict)
        and sent.keys() == pattern.keys()
        and all(isinstance(wanted, list) or sent[name] == wanted for name, wanted in pattern.items())
    )


def output_entry(given: Any) -> bool:
    """One output as Dash sends it: {id, property}, or a list of them for a pattern (ALL) output."""
    items = given if isinstance(given, list) else [given]
    return all(isinstance(item, dict) and "id" in item and "property" in item for item in items)


def entry(given: Any, prop: str) -> bool:
    return isinstance(given, dict) and given.get("property") == prop and "id" in given


def too_deep(value: Any) -> bool:
    # Iterative (no recursion to exhaust), and the body is already bounded in size.
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return False


def malformed_callback(app: Dash) -> Response | None:
    """A 400 naming the field when this callback request is not the shape its callback declares
    (None when it is, or when this is no callback request). The JSON is parsed once and cached
    for the guards and for Dash."""
    if request.path != CALLBACK_PATH or request.method != "POST" or not request.is_json:
        return None  # not JSON: Dash answers 415 (a cross-site form cannot send JSON)
    try:
        problem = body_problem(app, request.get_json(silent=True))
    except RecursionError:  # nested past the parser's own recursion limit
        problem = f"body: nested deeper than {MAX_DEPTH} levels"
    if problem is None:
        return None
    response = jsonify({"error": problem})
    response.status_code = 400
    return response


def install_shape_check(app: Dash) -> None:
    """After the sign-in guard (a stranger is told to sign in, not what is wrong with the body),
    for the operator, whom the member and shared-link guards let through: a callback request of
    the wrong shape answers 400 with the field, not a 500 from inside Dash. The member and
    shared-link guards run the same check first."""
    app.server.before_request_funcs.setdefault(None, []).append(lambda: malformed_callback(app))


# -- who may run a callback -------------------------------------------------------------------


def sites_sent(app: Dash, body: dict, site_id: str) -> Iterator[Any]:
    """The values of every input and state of the callback that is the `site_id` component."""
    declared = app.callback_map[body["output"]]
    for kind in ("inputs", "state"):
        for expected, given in zip(declared.get(kind) or [], body.get(kind, []), strict=True):
            if expected["id"] == site_id:
                yield given.get("value")


def member_refusal(app: Dash, body: dict, user: User) -> str | None:
    """Why this team member may not run this (well-formed) callback request, or None if they may."""
    declared = declaration(app, body["output"])
    if declared.role == "operator":
        return "only the operator may use this"
    if declared.site is None:
        return None
    sites = list(sites_sent(app, body, declared.site))
    if any(site is not None and not isinstance(site, str) for site in sites):
        return "site: a site name"
    if any(site is not None and site not in user.roles for site in sites):
        return "you have no role on this site"
    if declared.role == "viewer":
        return None
    short = [site for site in sites if site is None or not user.may(site, declared.role)]
    if not sites or short:
        held = user.role_on(short[0]) if short and short[0] is not None else None
        return f"this needs {declared.role} on the site; your role there is {held or 'none'}"
    return None


def shared_refusal(app: Dash, body: dict, link_site: str) -> str | None:
    """Why a shared link of `link_site` may not run this (well-formed) callback request."""
    declared = declaration(app, body["output"])
    if not declared.shared:
        return "not available in a shared view"
    if declared.site is not None and any(site != link_site for site in sites_sent(app, body, declared.site)):
        return "a shared view shows only its own site"
    return None


# -- routes -----------------------------------------------------------------------------------

Caller = Literal["anyone", "session", "key"]
SiteIn = Literal["query", "body", "path", "none"]


@dataclass(frozen=True)
class RouteAccess:
    """`caller`: anyone (the route checks its own credential: a password, a link's or an
    invitation's token), a dashboard session (operator, member or shared link: the sign-in,
    member and shared guards) or an API key (dashboard/http_api/authorisation.py). `site`: where the site is
    named; `role` and `scope`: what a key's user needs on it."""

    caller: Caller
    site: SiteIn = "none"
    role: Role = "viewer"
    scope: Scope = "read"


PUBLIC = RouteAccess("anyone")
PAGE = RouteAccess("session")  # the Dash page and its assets; callbacks as CALLBACKS declares


def key(role: Role = "viewer", scope: Scope = "read", site: SiteIn = "query") -> RouteAccess:
    return RouteAccess("key", site, role, scope)


ROUTES: dict[str, RouteAccess] = {
    "login": PUBLIC,
    "logout": PUBLIC,
    "healthz": PUBLIC,
    "open_link": PUBLIC,  # the link's token (and password) is the credential
    "accept": PUBLIC,  # the invitation's token is the credential
    "static": PAGE,
    "_dash_assets.static": PAGE,
    "/_dash-component-suites/<string:package_name>/<path:fingerprinted_path>": PAGE,
    "/_dash-layout": PAGE,
    "/_dash-dependencies": PAGE,
    "/_dash-update-component": PAGE,
    "/_reload-hash": PAGE,
    "/_favicon.ico": PAGE,
    "/": PAGE,
    "/<path:path>": PAGE,
    # The stats API: what the dashboard shows a viewer, a viewer's key reads.
    "stats_api.openapi": PUBLIC,  # the description of the API, not its numbers
    "stats_api.aggregate": key(),
    "stats_api.timeseries": key(),
    "stats_api.breakdown": key(),
    "stats_api.funnel": key(),
    "stats_api.journeys": key(),
    "stats_api.retention_report": key(),
    "stats_api.goals": key(),
    "stats_api.web_vitals": key(),
    "stats_api.realtime": key(),
    "stats_api.sessions": key(),
    "stats_api.segments_list": key(),  # the segment picker is on a viewer's page
    "stats_api.timezone": key(),
    "stats_api.identity": key(),
    "stats_api.not_found": key(site="none"),
    # The Alerts and Import panels are the admins': so are their rules, alerts and files.
    "stats_api.alerts": key("admin"),
    "stats_api.list_imports": key("admin"),
    "stats_api.alerts_backtest": key("admin", site="body"),
    # Raw SQL over every tenant's rows (Explore's, over HTTP; `tally mcp`'s sql tool): the operator's.
    "stats_api.sql": key("operator", site="none"),
    "stats_api.upload": key("admin", "manage"),
    "stats_api.remove": key("admin", "manage"),
    "stats_api.segments_add": key("admin", "manage"),
    "stats_api.segments_change": key("admin", "manage"),
    "stats_api.segments_remove": key("admin", "manage"),
    "stats_api.list_exclusions": key("admin"),
    "stats_api.add_exclusion": key("admin", "manage"),
    "stats_api.remove_exclusion": key("admin", "manage"),
    "stats_api.set_timezone": key("admin", "manage"),
    "stats_api.set_identity": key("admin", "manage"),
    "stats_api.list_subscriptions": key("admin"),
    "stats_api.subscribe": key("admin", "manage"),
    "stats_api.unsubscribe": key("admin", "manage"),
    "stats_api.whatif_goals": key("admin"),
    "stats_api.list_members": key("owner"),
    "stats_api.change_role": key("owner", "manage"),
    "stats_api.remove_member": key("owner", "manage"),
    "stats_api.invite": key("owner", "manage"),
    "stats_api.list_invites": key("owner"),
    "stats_api.revoke_invite": key("owner", "manage"),
    "stats_api.audit_log": key("owner"),
    # A key's own keys (its user's; the operator's key names the user): no site.
    "stats_api.list_keys": key(site="none"),
    "stats_api.create_key": key(scope="manage", site="body"),
    "stats_api.revoke_key": key(scope="manage", site="none"),
    # Plausible's Sites API (dashboard/http_api/sites_api.py): the site is `site_id`, in the
    # path, the body or (listing goals and guests) the query; the endpoints check the role there.
    "stats_api.sites_list": key(site="none"),  # a member's key: the sites it may read
    "stats_api.sites_teams": key(site="none"),  # the installation, Tally's one team
    "stats_api.sites_create": key("operator", "manage", site="none"),
    "stats_api.sites_get": key(site="path"),
    "stats_api.sites_update": key("admin", "manage", site="path"),
    "stats_api.sites_delete": key("owner", "manage", site="path"),
    "stats_api.sites_goals_list": key(site="query"),
    "stats_api.sites_goal_put": key("admin", "manage", site="body"),
    "stats_api.sites_goal_delete": key("admin", "manage", site="body"),
    "stats_api.sites_shared_link_put": key("admin", "manage", site="body"),
    "stats_api.sites_custom_props_list": key(site="query"),
    "stats_api.sites_custom_prop_put": key("admin", "manage", site="body"),
    "stats_api.sites_custom_prop_delete": key("admin", "manage", site="body"),
    "stats_api.sites_guests_list": key("owner", site="query"),
    "stats_api.sites_guest_put": key("owner", "manage", site="body"),
    "stats_api.sites_guest_delete": key("owner", "manage", site="body"),
    # Notes on the chart (dashboard/http_api/annotations.py): read by members, written by admins
    # (the site in the query or, adding one, the body; the endpoints check the role there).
    "stats_api.annotations_list": key(),
    # The events behind a figure (dashboard/http_api/export.py): what a viewer's key reads; the
    # Overview's download link, the same for a signed-in session (the view checks the site).
    "stats_api.export_events": key(),
    "export_download": RouteAccess("session", "query", "viewer"),
    "stats_api.annotations_add": key("admin", "manage", site="body"),
    "stats_api.annotations_remove": key("admin", "manage"),
    "plausible_api.query": key(site="body"),
    "plausible_api.not_found": key(site="none"),
}


def undeclared_routes(server: Flask) -> list[str]:
    return sorted({rule.endpoint for rule in server.url_map.iter_rules()} - set(ROUTES))


def route_access(endpoint: str | None) -> RouteAccess | None:
    return ROUTES.get(endpoint or "")


WHOSE_KEY = {"viewer": "a member's", "admin": "an admin's or the owner's", "owner": "the owner's"}


def key_refusal(
    declared: RouteAccess | None, access: Access, site: str, member: Callable[[], User | None]
) -> str | None:
    """Why this API key may not call this endpoint for `site` ("" when the site is not known
    here: the endpoint checks it where it reads it), or None when it may. The operator's key may
    call everything; a member's key needs the declared scope, and its user the declared role on
    the site now (`member()` reads the store, so a role taken away counts at once). An
    undeclared endpoint is the operator's alone."""
    if access.is_operator:
        return None
    if declared is None or declared.caller != "key" or declared.role == "operator":
        return "this endpoint is the operator's: team members' keys may not call it"
    if declared.scope == "manage" and access.scope != "manage":
        return "this API key is read-only; this change needs a key with scope manage"
    if not site or declared.role == "viewer":
        return None  # reading: the key's sites (Access.may_read) are checked before
    user = member()
    if user is None or not user.may(site, declared.role):
        return f"site: this needs {WHOSE_KEY[declared.role]} key for {site}"
    return None
