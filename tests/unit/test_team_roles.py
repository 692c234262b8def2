"""What a team member's role lets them call (dashboard/accounts.py: callback_refusal, reading the
declarations of dashboard/access.py), on the dashboard's real callback map."""

from __future__ import annotations

from pathlib import Path

import pytest
from dash import Dash

from dashboard.access import declaration
from dashboard.accounts import callback_refusal
from dashboard.app import build_app
from storage.users import User
from tally.settings import Settings

SITE, OTHER = "team.example.com", "other.example.com"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Dash:
    home: Path = tmp_path_factory.mktemp("home")
    return build_app(Settings(home=home, dashboard_password="pw", api_key="key"))


def request_for(app: Dash, output: str, site: str) -> dict:
    """A callback request as Dash sends it, every input and state that names the callback's
    site (the picker, or the Settings view's site) set to `site`."""
    declared = app.callback_map[output]
    site_id = declaration(app, output).site

    def values(kind: str) -> list[dict | list]:
        # A pattern-matching (ALL) input is a list of the components it matches: none here.
        return [
            []
            if d["id"].startswith("{")
            else {"id": d["id"], "property": d["property"], "value": site if d.get("id") == site_id else None}
            for d in declared.get(kind, [])
        ]

    return {"output": output, "inputs": values("inputs"), "state": values("state")}


def goal_output(app: Dash) -> str:
    return next(o for o in app.callback_map if "goal-status" in o)


@pytest.mark.parametrize(("role", "refused"), [("viewer", True), ("admin", False), ("owner", False)])
def test_only_admins_and_owners_change_goals(app: Dash, role: str, refused: bool) -> None:
    member = User("m@example.com", {SITE: role})  # type: ignore[dict-item]
    refusal = callback_refusal(app, request_for(app, goal_output(app), SITE), member)
    assert (refusal is not None) == refused


@pytest.mark.parametrize(
    "status", ["exclusion-status", "goal-status", "annotation-status", "custom-prop-status"]
)
def test_viewers_can_neither_add_nor_remove_settings(app: Dash, status: str) -> None:
    outputs = [o for o in app.callback_map if status in o]
    assert len(outputs) >= 2  # at least the Add button's callback and the list's Remove buttons'
    viewer = User("m@example.com", {SITE: "viewer"})
    admin = User("m@example.com", {SITE: "admin"})
    for output in outputs:
        assert callback_refusal(app, request_for(app, output, SITE), viewer) is not None
        assert callback_refusal(app, request_for(app, output, SITE), admin) is None


def test_no_callback_reaches_a_site_without_a_role(app: Dash) -> None:
    owner = User("m@example.com", {SITE: "owner"})
    metrics = next(o for o in app.callback_map if "top-metrics" in o)
    assert callback_refusal(app, request_for(app, metrics, SITE), owner) is None
    for output in (metrics, goal_output(app)):
        refusal = callback_refusal(app, request_for(app, output, OTHER), owner)
        assert refusal == "you have no role on this site"


def test_the_rate_limiting_panel_is_the_operators_and_malformed_requests_are_refused(app: Dash) -> None:
    owner = User("m@example.com", {SITE: "owner"})
    rate_limits = next(o for o in app.callback_map if "rate-limits" in o)
    assert callback_refusal(app, request_for(app, rate_limits, SITE), owner) is not None
    assert callback_refusal(app, {"output": "nope"}, owner) == "malformed callback request"
    short = request_for(app, goal_output(app), SITE) | {"state": []}
    assert callback_refusal(app, short, owner) == "malformed callback request"
