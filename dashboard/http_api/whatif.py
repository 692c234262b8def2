"""`GET /api/v1/whatif/goals`: a site's goals' numbers now and with a proposed change
(`add`, `add_page`, `remove`, each repeatable; `currency` for the added goals), side by side, as
`tally whatif goals` prints them. Goals apply at read time, so this is two reads of the same
tables (agg), nothing replayed and nothing written; applying a proposal is the goals endpoints'
and the CLI's job.

Who may call it: the operator's key, or a member's key whose user is an admin or owner of the
site (proposing goals is managing the site, as the exclusions endpoints are): 403 otherwise.
Answers 400 naming the parameter (an unknown goal to remove, a name taken twice, a bad page
pattern or currency, a bad range), 404 for an unknown site.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from flask import Blueprint, Response, g, jsonify, request

from dashboard.http_api.manage import checked_site
from dashboard.http_api.parameters import Arguments, BadParameter, stats_query
from dashboard.http_api.plausible.report import SiteNotFound
from dashboard.store import ClientFactory
from storage import goals, users
from storage.goals import Goal, InvalidGoal
from storage.queries.contract import GoalRow
from storage.queries.whatif import compare_goals
from storage.sites import registered, site_timezone
from storage.users import RANK
from tally.refusal import Refused
from tally.settings import Settings

SINGLE = ("site", "from", "to", "period", "currency")
REPEATED = ("add", "add_page", "remove")
MAX_PROPOSED = 50


def register_whatif_api(
    api: Blueprint,
    settings: Settings,
    clients: ClientFactory,
    clock: Callable[[], datetime],
    goal_json: Callable[[GoalRow], dict[str, object]],
) -> None:
    """Adds the endpoint to the stats API's blueprint (its key check and error handlers apply);
    `goal_json`: the stats API's shape of a goal's numbers (GET /stats/goals)."""

    @api.get("/whatif/goals")
    def whatif_goals() -> Response:
        arguments, proposed = parsed()
        client = clients()
        site = registered(client, checked_site(arguments.values), SiteNotFound)
        may_manage(site)
        arguments = Arguments(arguments.values | {"site": site})
        q = stats_query(arguments, clock(), settings, site_timezone(client, site))
        added = proposed_goals(site, proposed["add"], proposed["add_page"], arguments.get("currency") or "")
        try:
            comparison = compare_goals(client, q, added, proposed["remove"])
        except InvalidGoal as refused:
            raise BadParameter(refused_parameter(str(refused), proposed["add"]), str(refused)) from None
        return jsonify(
            {
                "site": site,
                "from": q.start.isoformat(),
                "to": q.end.isoformat(),
                "current": [goal_json(row) for row in comparison.current],
                "proposed": [goal_json(row) for row in comparison.proposed],
            }
        )

    def may_manage(site: str) -> None:
        access = g.api_access
        if access.is_operator:
            return
        user = users.get_user(clients(), access.email) if access.may_read(site) else None
        role = user.role_on(site) if user else None
        if role is None or RANK[role] < RANK["admin"]:
            raise Refused(f"site: a what-if on goals needs the admin role on {site}", kind="forbidden")


def parsed() -> tuple[Arguments, dict[str, list[str]]]:
    """The single parameters (each at most once) and the repeatable proposal lists."""
    for name in request.args:
        if name not in SINGLE + REPEATED:
            raise BadParameter(name, f"unknown parameter; known: {', '.join(SINGLE + REPEATED)}")
        if name in SINGLE and len(request.args.getlist(name)) > 1:
            raise BadParameter(name, "given more than once")
    proposed = {name: [value.strip() for value in request.args.getlist(name)] for name in REPEATED}
    if not any(proposed.values()):
        raise BadParameter("add", "name the goals proposed: add, add_page or remove")
    if sum(len(values) for values in proposed.values()) > MAX_PROPOSED:
        raise BadParameter("add", f"at most {MAX_PROPOSED} goals added and removed")
    return Arguments({name: request.args[name] for name in SINGLE if name in request.args}), proposed


def proposed_goals(site: str, events: list[str], pages: list[str], currency: str) -> list[Goal]:
    """The added goals, checked (400 naming add, add_page or currency)."""
    found = []
    wanted = [("add", value, "") for value in events] + [("add_page", "", value) for value in pages]
    for parameter, event_name, page_pattern in wanted:
        try:
            found.append(goals.make_goal(site, event_name, page_pattern, currency))
        except InvalidGoal as refused:
            named = "currency" if "currency" in str(refused) else parameter
            raise BadParameter(named, str(refused)) from None
    return found


def refused_parameter(problem: str, events: list[str]) -> str:
    """Which parameter a refused proposal names: a goal to remove that does not exist, or an
    added goal whose name is taken (an event goal's name is its event's)."""
    if "has no goal" in problem:
        return "remove"
    return "add" if any(repr(name) in problem for name in events) else "add_page"
