"""Issue 29, findings 1 and 12 (part): every callback and every route declares the site it acts on
and the role it needs (dashboard/access.py), and the real server holds each caller to it.

The callbacks are enumerated from the app's own callback map (built in-process from the same
settings), the routes from its URL map; every request goes over HTTP to the real dashboard
server under waitress (`tenants`). Attackers: a viewer of A, a shared link of A, the admin of B
(a member, and keys, of another site).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from dash import Dash

from dashboard.access import (
    CALLBACKS,
    ROUTES,
    callback_name,
    declaration,
    runs_in_browser,
    undeclared,
    undeclared_routes,
)
from dashboard.app import build_app
from dashboard.settings_view import settings_panels
from tally.settings import Settings
from tests.security.conftest import PASSWORD, Tenants, bearer, opened_share, signed_in

pytestmark = pytest.mark.integration

CALLBACK_PATH = "/_dash-update-component"
REFUSED = 403
RAN = (200, 204)  # an answer, or PreventUpdate (nothing to show for an empty site)


@pytest.fixture(scope="module")
def app(dashboard_settings: Settings) -> Dash:
    """The server's app, built here only to read its callback and URL maps."""
    return build_app(dashboard_settings)


def as_on_loopback(browser: httpx.Client) -> httpx.Client:
    """The session cookie is `Secure`; browsers send it over plain HTTP to loopback, httpx does
    not: send it as a browser would to this 127.0.0.1 server (every answer sets it again)."""

    def loopback(_: httpx.Response) -> None:
        for cookie in browser.cookies.jar:
            cookie.secure = False

    loopback(httpx.Response(200))
    browser.event_hooks["response"].append(loopback)
    return browser


@pytest.fixture(scope="module")
def viewer_a(tenants: Tenants) -> Iterator[httpx.Client]:
    browser = as_on_loopback(signed_in(tenants.server, tenants.viewer_a.email, PASSWORD))
    yield browser
    browser.close()


@pytest.fixture(scope="module")
def admin_b(tenants: Tenants) -> Iterator[httpx.Client]:
    browser = as_on_loopback(signed_in(tenants.server, tenants.admin_b.email, PASSWORD))
    yield browser
    browser.close()


@pytest.fixture(scope="module")
def shared_a(tenants: Tenants) -> Iterator[httpx.Client]:
    browser = as_on_loopback(opened_share(tenants.server, tenants.share_a))
    yield browser
    browser.close()


@pytest.fixture(scope="module")
def operator(tenants: Tenants) -> Iterator[httpx.Client]:
    browser = as_on_loopback(signed_in(tenants.server))
    yield browser
    browser.close()


def outputs_of(output: str) -> list[dict[str, str]] | dict[str, str]:
    """The `outputs` Dash sends for a callback's output key ("a.children" or "..a.x...b.y..")."""
    parts = output.removeprefix("..").removesuffix("..").split("...") if output.startswith("..") else [output]
    specs = [dict(zip(("id", "property"), part.rsplit(".", 1), strict=True)) for part in parts]
    return specs if output.startswith("..") else specs[0]


def callback_body(app: Dash, output: str, site: str | None, extra: dict[str, Any] | None = None) -> dict:
    """A callback request as the page sends it: every plain input and state, `site` wherever the
    callback declares its site, no component for pattern (ALL) inputs."""
    declared = app.callback_map[output]
    site_id = declaration(app, output).site or "site"

    def values(kind: str) -> list:
        return [
            []
            if spec["id"].startswith("{")
            else {
                "id": spec["id"],
                "property": spec["property"],
                "value": site if spec["id"] == site_id else (extra or {}).get(spec["id"]),
            }
            for spec in declared.get(kind) or []
        ]

    return {
        "output": output,
        "outputs": outputs_of(output),
        "inputs": values("inputs"),
        "state": values("state"),
        "changedPropIds": [],
    }


def one_output_per_callback(app: Dash) -> list[str]:
    """One output key per registered server callback function (the breakdown cards share one);
    the page's clientside callbacks never reach the server."""
    seen: dict[str, str] = {}
    for output in app.callback_map:
        if not runs_in_browser(app, output):
            seen.setdefault(name_of(app, output), output)
    return sorted(seen.values())


def the_output(app: Dash, name: str) -> str:
    return next(output for output in app.callback_map if name_of(app, output) == name)


def name_of(app: Dash, output: str) -> str:
    return callback_name(app, output)


def call(browser: httpx.Client, body: Any) -> httpx.Response:
    return browser.post(CALLBACK_PATH, json=body)


# -- the declarations themselves --------------------------------------------------------------


def test_every_registered_callback_and_route_declares_its_site_and_role(app: Dash) -> None:
    assert undeclared(app) == [], "declare these callbacks in dashboard/access.py CALLBACKS"
    assert undeclared_routes(app.server) == [], "declare these routes in dashboard/access.py ROUTES"
    registered = {name_of(app, output) for output in app.callback_map if not runs_in_browser(app, output)}
    assert set(CALLBACKS) <= registered, "declarations of callbacks that no longer exist"
    assert set(ROUTES) <= {rule.endpoint for rule in app.server.url_map.iter_rules()}
    for output, callback in app.callback_map.items():
        declared = declaration(app, output)
        if declared.site is not None:  # the component named as the site is one the callback reads
            read = [spec["id"] for kind in ("inputs", "state") for spec in callback.get(kind) or []]
            assert declared.site in read, output
        assert not (declared.shared and declared.role != "viewer"), output


# -- every callback, against the real server --------------------------------------------------


def test_viewer_of_a_runs_no_callback_on_site_b_and_none_above_viewer_on_a(
    app: Dash, tenants: Tenants, viewer_a: httpx.Client
) -> None:
    wrong: list[tuple[str, str, int]] = []
    for output in one_output_per_callback(app):
        declared = declaration(app, output)
        if declared.site is not None:
            answer = call(viewer_a, callback_body(app, output, tenants.site_b))
            if answer.status_code != REFUSED:
                wrong.append(("site B", output, answer.status_code))
        answer = call(viewer_a, callback_body(app, output, tenants.site_a))
        allowed = declared.role == "viewer"
        if (answer.status_code in RAN) != allowed or (not allowed and answer.status_code != REFUSED):
            wrong.append(("site A", output, answer.status_code))
    assert wrong == []


def test_member_of_b_runs_no_callback_on_site_a(app: Dash, tenants: Tenants, admin_b: httpx.Client) -> None:
    wrong, refused = [], []
    for output in one_output_per_callback(app):
        declared = declaration(app, output)
        if declared.site is not None or declared.role == "operator":
            answer = call(admin_b, callback_body(app, output, tenants.site_a))
            if answer.status_code != REFUSED:
                wrong.append((output, answer.status_code))
            refused.append(output)
    assert wrong == []
    # Each refusal is in the server's log, naming the callback's output: a button that "did
    # nothing" in a browser can be traced there.
    logged = [
        line for line in tenants.server.log_path.read_text(errors="replace").splitlines()
        if "dashboard_callback_refused" in line and "status=403" in line
    ]  # fmt: skip
    assert refused
    unlogged = [output for output in refused if not any(output[:200] in line for line in logged)]
    assert unlogged == [], logged[-5:]


def test_shared_link_of_a_runs_only_the_overview_of_a(
    app: Dash, tenants: Tenants, shared_a: httpx.Client
) -> None:
    wrong = []
    for output in one_output_per_callback(app):
        declared = declaration(app, output)
        own = call(shared_a, callback_body(app, output, tenants.site_a)).status_code
        if (own in RAN) != declared.shared or (not declared.shared and own != REFUSED):
            wrong.append(("site A", output, own))
        if declared.site is not None:
            other = call(shared_a, callback_body(app, output, tenants.site_b)).status_code
            if other != REFUSED:
                wrong.append(("site B", output, other))
    assert wrong == []


def test_operator_panels_are_refused_to_every_member_and_link(
    app: Dash, viewer_a: httpx.Client, admin_b: httpx.Client, shared_a: httpx.Client, tenants: Tenants
) -> None:
    operators = [
        output for output in one_output_per_callback(app) if declaration(app, output).role == "operator"
    ]
    assert any("rate-limits" in output for output in operators)
    assert any("whatif" in output for output in operators)
    assert any("explore" in output for output in operators)
    for browser in (viewer_a, admin_b, shared_a):
        for output in operators:
            for site in (tenants.site_a, tenants.site_b):
                assert call(browser, callback_body(app, output, site)).status_code == REFUSED, output


# -- finding 1: Explore ------------------------------------------------------------------------


def explore_run(app: Dash, sql: str) -> dict:
    output = the_output(app, "dashboard.explore.run_query")
    return callback_body(app, output, None, {"explore-run": 1, "explore-sql": sql})


def explore_download(app: Dash, sql: str) -> dict:
    output = the_output(app, "dashboard.explore.download_csv")
    return callback_body(app, output, None, {"explore-download-button": 1, "explore-sql": sql})


def test_viewer_of_a_cannot_read_site_b_or_the_site_list_through_explore(
    app: Dash, tenants: Tenants, viewer_a: httpx.Client, operator: httpx.Client
) -> None:
    steal_b = f"SELECT path, visitor_id, props FROM events WHERE site = '{tenants.site_b}'"
    for sql in (steal_b, "SELECT * FROM sites"):
        answer = call(viewer_a, explore_run(app, sql))
        assert answer.status_code == REFUSED, answer.text[:300]
        assert tenants.site_b not in answer.text
    # The same query is one the operator's Explore runs: the refusal is the member's, not the SQL's.
    listed = call(operator, explore_run(app, "SELECT * FROM sites"))
    assert listed.status_code == 200 and tenants.site_b in listed.text


def test_viewer_of_a_cannot_download_site_b_through_explores_csv(
    app: Dash, tenants: Tenants, viewer_a: httpx.Client, admin_b: httpx.Client, shared_a: httpx.Client
) -> None:
    for browser in (viewer_a, admin_b, shared_a):
        answer = call(browser, explore_download(app, "SELECT * FROM sites"))
        assert answer.status_code == REFUSED and tenants.site_b not in answer.text


def tab_values(layout: dict) -> list[str] | None:
    """The view tabs (id `tabs`) offered by a `/_dash-layout` answer."""
    found = re.search(r'"id":\s*"tabs"', json.dumps(layout))
    if found is None:
        return None

    def walk(node: Any) -> Iterator[dict]:
        if isinstance(node, dict):
            yield node
            for child in node.values():
                yield from walk(child)
        elif isinstance(node, list):
            for child in node:
                yield from walk(child)

    tabs = next(node for node in walk(layout) if node.get("id") == "tabs")
    return [option["value"] for option in tabs["options"]]


def test_members_pages_have_no_explore_tab_the_operators_has(
    tenants: Tenants, viewer_a: httpx.Client, admin_b: httpx.Client, operator: httpx.Client
) -> None:
    # The admin of B has the Settings tab (their page opens on B, their one site); the viewer has
    # none, and no settings panel in the layout at all (dashboard/settings_view.py).
    for member, tabs in (
        (viewer_a, ["overview", "funnel", "journeys", "retention", "realtime", "performance"]),
        (admin_b, ["overview", "funnel", "journeys", "retention", "realtime", "performance", "settings"]),
    ):
        layout = member.get("/_dash-layout")
        assert layout.status_code == 200
        assert tab_values(layout.json()) == tabs
        assert "explore-sql" not in layout.text
    viewer_layout = viewer_a.get("/_dash-layout").text
    assert [panel.id for panel in settings_panels() if f'"{panel.id}"' in viewer_layout] == []
    layout = operator.get("/_dash-layout").json()
    assert "explore" in (tab_values(layout) or [])


# -- routes and the API's roles ---------------------------------------------------------------


def sample_path(rule: str) -> str:
    return re.sub(r"<(?:[^:>]+:)?([^>]+)>", lambda match: f"x-{match.group(1)}", rule)


def test_every_session_and_key_route_refuses_a_stranger(app: Dash, tenants: Tenants) -> None:
    wrong = []
    with httpx.Client(base_url=tenants.server.url, timeout=30) as stranger:
        for rule in app.server.url_map.iter_rules():
            declared = ROUTES[rule.endpoint]
            if declared.caller == "anyone":
                continue
            for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
                answer = stranger.request(method, sample_path(rule.rule), params={"site": tenants.site_a})
                if answer.status_code not in (302, 401):
                    wrong.append((method, rule.rule, answer.status_code))
    assert wrong == []


def key_routes(app: Dash) -> Iterator[tuple[str, str, str]]:
    """(method, path, endpoint) of every API route whose site is a query parameter."""
    for rule in app.server.url_map.iter_rules():
        declared = ROUTES[rule.endpoint]
        if declared.caller == "key" and declared.site == "query":
            for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
                yield method, rule.rule, rule.endpoint


def test_no_key_of_a_member_of_a_reaches_site_b_through_any_api_route(app: Dash, tenants: Tenants) -> None:
    wrong = []
    for method, path, _ in key_routes(app):
        for token in (tenants.viewer_a.read_key, tenants.owner_a.manage_key):
            answer = httpx.request(
                method, f"{tenants.server.url}{path}", params={"site": tenants.site_b}, headers=bearer(token)
            )
            if answer.status_code != REFUSED:
                wrong.append((method, path, answer.status_code))
    assert wrong == []


def test_a_viewers_keys_reach_no_api_route_above_viewer(app: Dash, tenants: Tenants) -> None:
    wrong = []
    for method, path, endpoint in key_routes(app):
        if ROUTES[endpoint].role == "viewer":
            continue
        for token in (tenants.viewer_a.read_key, tenants.viewer_a.manage_key):
            answer = httpx.request(
                method, f"{tenants.server.url}{path}", params={"site": tenants.site_a}, headers=bearer(token)
            )
            if answer.status_code != REFUSED:
                wrong.append((method, path, answer.status_code))
    assert wrong == []


def test_viewers_read_key_cannot_read_alert_rules_or_imports_the_dashboard_shows_admins(
    tenants: Tenants,
) -> None:
    server, site = tenants.server.url, tenants.site_a
    viewer, owner = bearer(tenants.viewer_a.read_key), bearer(tenants.owner_a.read_key)
    for path in ("/api/v1/alerts", "/api/v1/imports"):
        refused = httpx.get(f"{server}{path}", params={"site": site}, headers=viewer)
        assert refused.status_code == REFUSED and refused.json()["error"].startswith("site:"), refused.text
        assert httpx.get(f"{server}{path}", params={"site": site}, headers=owner).status_code == 200
    rule = {"site": site, "kind": "pageviews_above", "threshold": 5, "days": 2}
    backtest = httpx.post(f"{server}/api/v1/alerts/backtest", json=rule, headers=viewer)
    assert backtest.status_code == REFUSED, backtest.text
    # What a viewer reads in the dashboard, their key reads too.
    stats = httpx.get(
        f"{server}/api/v1/stats/aggregate", params={"site": site, "period": "7d"}, headers=viewer
    )
    assert stats.status_code == 200, stats.text


def test_viewer_of_a_reads_the_overview_of_a(app: Dash, tenants: Tenants, viewer_a: httpx.Client) -> None:
    period = {"start": "2026-01-01T00:00:00+00:00", "end": "2026-01-02T00:00:00+00:00"}
    output = the_output(app, "dashboard.overview.top_metrics")
    answer = call(viewer_a, callback_body(app, output, tenants.site_a, {"period": period, "filters": {}}))
    assert answer.status_code in RAN, answer.text[:300]


# -- finding 12 (part): malformed callback bodies ------------------------------------------------


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def malformed_bodies(app: Dash, site: str) -> dict[str, Any]:
    good = callback_body(app, the_output(app, "dashboard.overview.top_metrics"), site)
    return {
        "not an object": [1, 2],
        "unknown output": {**good, "output": "nope.children"},
        "output not text": {**good, "output": 7},
        "inputs an object": {**good, "inputs": {"a": 1}},
        "inputs as text": {**good, "inputs": ["x", "y", "z"]},
        "inputs missing one": {**good, "inputs": good["inputs"][:-1]},
        "an input of another component": {**good, "inputs": [{"id": "x", "property": "value"}] * 3},
        "state not a list": {**good, "state": 7},
        "outputs a list of numbers": {**good, "outputs": [1]},
        "changedPropIds a number": {**good, "changedPropIds": 5},
        "site an object": {**good, "inputs": [{**good["inputs"][0], "value": {"a": 1}}, *good["inputs"][1:]]},
        "a value nested 40 deep": {
            **good,
            "inputs": [good["inputs"][0], {**good["inputs"][1], "value": nested(40)}],
        },
    }


def test_malformed_callback_bodies_answer_400_never_500(
    app: Dash,
    tenants: Tenants,
    operator: httpx.Client,
    viewer_a: httpx.Client,
    shared_a: httpx.Client,
) -> None:
    wrong = []
    for who, browser in (("operator", operator), ("viewer", viewer_a), ("shared", shared_a)):
        for name, body in malformed_bodies(app, tenants.site_a).items():
            answer = call(browser, body)
            if answer.status_code != 400 or "error" not in answer.json():
                wrong.append((who, name, answer.status_code))
        nested = "[" * 100_000 + "]" * 100_000  # past the JSON parser's own recursion limit
        answer = browser.post(CALLBACK_PATH, content=nested, headers={"Content-Type": "application/json"})
        if answer.status_code != 400:
            wrong.append((who, "nested past the parser", answer.status_code))
    assert wrong == []
