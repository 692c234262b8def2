"""Plausible's Sites API (https://plausible.io/docs/sites-api) on Tally: the same paths, bodies and
answers, so a provisioning script written for Plausible works unchanged against the dashboard's
server. docs/sites-api.md says what differs and why.

- `GET /sites` (cursor pagination: `after`, `before`, `limit`), `POST /sites` {domain, timezone},
  `GET|PUT|DELETE /sites/:site_id` (the site's domain is its id; `DELETE …?erase_events=true`
  also erases its events, storage/erasures.py);
- `GET|PUT /sites/goals`, `DELETE /sites/goals/:goal_id` over storage/goals.py;
- `PUT /sites/shared-links` over storage/shared_links.py;
- `GET|PUT /sites/custom-props`, `DELETE /sites/custom-props/:property` over
  storage/custom_properties.py (the dashboard's Properties report offers only those listed);
- `GET|PUT /sites/guests`, `DELETE /sites/guests/:email` over the members and invitations.

Bodies: JSON, or form fields (`curl -F`, as Plausible's examples send them): the Bearer key is
the credential, which a page on another origin cannot send without a preflight this server never
grants. Who may call what: the operator's key everything; a member's key acts on the sites in its
scope with its user's role there (reading: viewer; goals, shared links, custom properties, the
site's domain: admin; guests and deleting the site: owner) and, for a change, scope `manage`.
Creating a site is the operator's alone; a member's key lists the sites it may read. Every refusal
is `{"error": "<field>: …"}` with 400, 403 or 404, and every change writes an audit row.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import threading
import uuid
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import wraps
from typing import Any, TypeVar

from flask import Blueprint, Response, jsonify, request
from werkzeug.exceptions import MethodNotAllowed
from werkzeug.routing import PathConverter

from dashboard import invitations
from dashboard.http_api.authorisation import Access
from dashboard.http_api.manage import MAX_FIELD_CHARS, actor_of, audit, caller, optional_text, text
from dashboard.http_api.parameters import MAX_LIMIT, MAX_SITE_LENGTH, BadParameter
from dashboard.store import ClientFactory
from storage import (
    alert_rules,
    annotations,
    channel_rules,
    custom_properties,
    erasures,
    exclusions,
    goals,
    report_subscriptions,
    saved_funnels,
    segments,
    shared_links,
    users,
)
from storage.calendar import UTC_NAME, InvalidTimezone
from storage.sites import (
    InvalidDomain,
    add_site,
    list_sites,
    list_timezones,
    normalise,
    remove_site,
    site_timezone,
)
from storage.users import RANK, AccountError, Role
from tally.refusal import Refused
from tally.settings import Settings

DEFAULT_PAGE = 100  # Plausible's default `limit`; its maximum is 1000, as MAX_LIMIT
GOAL_TYPES = ("event", "page")
# Plausible's guest roles and Tally's: an editor changes goals, shared links and settings, as a
# Tally admin does; a viewer reads. Tally's owners are the site's team, never guests.
GUEST_ROLES: dict[str, Role] = {"viewer": "viewer", "editor": "admin"}
PLAUSIBLE_ROLE = {tally: plausible for plausible, tally in GUEST_ROLES.items()}
SHARE_PATH = "/share/"
# The paths under /sites that are no site: GET|PUT|DELETE /sites/<site_id> answers 405 for them.
NOT_SITES = {
    "goals": ["GET", "PUT"],
    "guests": ["GET", "PUT"],
    "shared-links": ["PUT"],
    "custom-props": ["GET", "PUT"],
    "teams": ["GET"],
}
# Tally has no teams: the installation is the one team every key belongs to, so a script written
# for Plausible that lists the teams first (to pick a team_id) finds it. Its id never changes.
TEAM_ID = str(uuid.uuid5(uuid.NAMESPACE_URL, "tally:installation"))
TEAM = {"id": TEAM_ID, "name": "Tally", "api_available": True}

T = TypeVar("T")


class AnyText(PathConverter):
    """The rest of the path, whatever it holds: a custom property's name may hold a `/` (sent as
    %2F, decoded before routing) or, refused afterwards with a 400 naming `property`, a newline,
    which Werkzeug's `path` does not match (its `.` stops at one: a 404 page, not the API's)."""

    regex = "[^/](?s:.*?)"


def goal_id(goal: goals.Goal) -> str:
    """A goal's id: stable for as long as the goal exists, derived from what keys its stored row
    (the site and the goal's name), so no column is added and every door agrees on it."""
    return hashlib.sha256(f"{goal.site}\0{goal.name}".encode()).hexdigest()[:16]


def register_sites_api(api: Blueprint, settings: Settings, clients: ClientFactory) -> None:
    """Adds the endpoints to the stats API's blueprint (its key check, refusal handlers and
    no-store header apply to them)."""
    link_secret = settings.resolved_dashboard_session_secret().encode()
    api.record_once(lambda state: state.app.url_map.converters.setdefault("anytext", AnyText))
    # Find-or-create is a read then a write: two calls at once must not both create. One lock
    # per dashboard process (waitress answers on several threads); provisioning is rare. Across
    # processes, what is made is keyed by what was asked (a site's domain, a goal's name, a
    # guest's email, a shared link's derived id), so two processes write one row twice.
    provisioning = threading.Lock()

    def serialised(view: Callable[[], Response]) -> Callable[[], Response]:
        @wraps(view)
        def one_at_a_time() -> Response:
            with provisioning:
                return view()

        return one_at_a_time

    def link_id_for(site: str, name: str, made_before: int) -> str:
        """The id of the Sites API's link `name` of `site`, from what was asked and the server's
        secret: a second dashboard process finding no link at the same moment makes the same row
        (the lock above is one process's), kept once by the store. `made_before` (links of that
        name already made, revoked ones) makes a link asked for again after a revocation a new
        one, with a new URL: the revoked one never comes back."""
        what = f"sites-api shared link id\0{site}\0{name}\0{made_before}".encode()
        return hmac.new(link_secret, what, hashlib.sha256).hexdigest()[:16]

    def link_token(link_id: str) -> str:
        """A shared link's token, derived from its id with the server's secret: the Sites API's
        find-or-create gives the same URL every time (Plausible's does), while the store keeps
        only the token's hash, as for every other link."""
        digest = hmac.new(link_secret, f"sites-api shared link\0{link_id}".encode(), hashlib.sha256)
        return base64.urlsafe_b64encode(digest.digest()).decode().rstrip("=")

    # -- who is asking, and for which site --------------------------------------------------

    def role_of(access: Access, site: str) -> Role | None:
        if access.is_operator:
            return "owner"  # the operator's key: the first owner of every site
        if not access.may_read(site):
            return None
        user = users.get_user(clients(), access.email)
        return user.role_on(site) if user else None

    def site_for(value: object, field: str, needed: Role, change: bool) -> str:
        """The registered site `value` names, once the caller's role there (and for a change the
        key's scope) allows it: 400 naming `field`, then 404, then 403."""
        if "site_id" in (request.view_args or {}) and value in NOT_SITES:  # DELETE /sites/goals, …
            raise MethodNotAllowed(valid_methods=[*NOT_SITES[str(value)], "OPTIONS"])
        if value is None or (isinstance(value, str) and not value.strip()):
            raise BadParameter(field, "required: the site's domain")
        if not isinstance(value, str) or len(value) > MAX_SITE_LENGTH:
            raise BadParameter(field, "not a site's domain")
        try:
            site = normalise(value)
        except InvalidDomain:
            raise BadParameter(field, f"not a site's domain: {value[:100]!r}") from None
        if site not in list_sites(clients()):
            raise Refused(f"{field}: site {site} could not be found", field=field, kind="not_found")
        access = caller()
        if change and access.scope != "manage":
            raise Refused(
                f"{field}: this API key is read-only; changes need a key with scope manage",
                field=field,
                kind="forbidden",
            )
        role = role_of(access, site)
        if role is None or RANK[role] < RANK[needed]:
            held = f"the key's user is {role}" if role else "the key's user has no role there"
            raise Refused(
                f"{field}: needs the {needed} role on {site}; {held}", field=field, kind="forbidden"
            )
        return site

    def site_json(domain: str) -> dict[str, object]:
        return {"domain": domain, "timezone": site_timezone(clients(), domain)}

    # -- sites --------------------------------------------------------------------------------

    @api.get("/sites")
    def sites_list() -> Response:
        args = query(("after", "before", "limit", "team_id"))
        access = caller()  # a member's key: the sites it may read (its sites its user has a role on)
        zones = [(domain, zone) for domain, zone in list_timezones(clients()) if access.may_read(domain)]
        rows, meta = paginated(zones, lambda row: row[0], args)
        return jsonify({"sites": [{"domain": d, "timezone": z} for d, z in rows], "meta": meta})

    @api.get("/sites/teams")
    def sites_teams() -> Response:
        rows, meta = paginated([TEAM], lambda team: str(team["id"]), query(("after", "before", "limit")))
        return jsonify({"teams": rows, "meta": meta})

    @api.post("/sites")
    @serialised
    def sites_create() -> Response:
        query(())
        fields = body(("domain", "timezone", "team_id"))
        optional_text(fields, "team_id")  # Plausible's; Tally has no teams: checked, then ignored
        domain = domain_field(fields)
        if domain in list_sites(clients()):
            raise BadParameter("domain", f"{domain} is already registered")
        zone = optional_text(fields, "timezone") or UTC_NAME
        try:
            add_site(clients(), domain, zone.strip())
        except InvalidTimezone:
            raise BadParameter(
                "timezone", f"{zone[:100]!r} is not an IANA time zone (e.g. Europe/London)"
            ) from None
        audit(settings, clients, "site_added", f"{domain} {zone.strip()}", domain)
        return jsonify(site_json(domain))

    @api.get("/sites/<site_id>")
    def sites_get(site_id: str) -> Response:
        query(())
        site = site_for(site_id, "site_id", "viewer", change=False)
        # The names the dashboard's Properties report offers (every property sent is recorded,
        # whatever the list holds).
        return jsonify(
            site_json(site) | {"custom_properties": custom_properties.list_properties(clients(), site)}
        )

    @api.put("/sites/<site_id>")
    def sites_update(site_id: str) -> Response:
        query(())
        site = site_for(site_id, "site_id", "admin", change=True)
        fields = body(("domain", "timezone"))
        if "timezone" in fields:
            raise BadParameter(
                "timezone",
                "Plausible's PUT /api/v1/sites/:site_id changes the domain only; "
                f"change the time zone with PUT /api/v1/timezone?site={site}",
            )
        domain = domain_field(fields)
        if domain != site:
            raise BadParameter(
                "domain",
                "Tally cannot change a site's domain: its events in the log and the archive and its "
                "derived tables are keyed by it; register the new domain (POST /api/v1/sites) instead",
            )
        return jsonify(site_json(site))

    @api.delete("/sites/<site_id>")
    def sites_delete(site_id: str) -> Response:
        erase_events = flag(query(("erase_events",)), "erase_events")
        site = site_for(site_id, "site_id", "owner", change=True)
        body(())
        removed = remove_settings(site)
        remove_site(clients(), site)
        if not erase_events:
            audit(
                settings,
                clients,
                "site_removed",
                f"{site}: settings removed ({removed}); archived events kept",
                site,
            )
            return jsonify({"deleted": True, "events": "kept"})
        # Recorded once the registry no longer has the site: every event the collector took
        # for it was received before the cutoff.
        with provisioning:  # two erasures recorded at once would take the same version
            erased = erasures.erase_site(clients(), site, actor_of(settings).email)
        audit(
            settings,
            clients,
            "site_removed",
            f"{site}: settings removed ({removed}); events erased: {erasures.summary(erased)}",
            site,
        )
        return jsonify({"deleted": True, "events": "erased", "erasure": erased.erasure.version})

    def remove_settings(site: str) -> str:
        """Everything Tally keeps about `site` but its events: goals, shared links (revoked),
        custom properties, exclusions, email reports, alert rules, segments, saved funnels,
        channel rules, its members' roles and waiting invitations. Returns what was removed, for
        the audit row."""
        client, who = clients(), actor_of(settings)
        counts: dict[str, int] = {}
        site_goals = goals.list_goals(client, site)
        if site_goals:
            goals.apply_goals(client, site, added=[], removed=[goal.name for goal in site_goals])
        counts["goals"] = len(site_goals)
        live = [link for link in shared_links.list_links(client, site) if not link.revoked]
        for link in live:
            shared_links.revoke_link(client, site, link.id)
        counts["shared links"] = len(live)
        counts["custom properties"] = custom_properties.remove_all(client, site)
        counts["annotations"] = annotations.remove_all(client, site)
        excluded = exclusions.list_exclusions(client, site)
        if excluded:
            exclusions.remove_exclusions(client, excluded)
        counts["exclusions"] = len(excluded)
        subscribers = {row.email for row in report_subscriptions.list_subscriptions(client, site)}
        for email in subscribers:
            report_subscriptions.unsubscribe(client, site, email)
        counts["report subscribers"] = len(subscribers)
        rules = alert_rules.list_rules(client, site)
        for rule in rules:
            alert_rules.remove_rule(client, site, rule.rule_id)
        counts["alert rules"] = len(rules)
        site_segments = segments.list_segments(client, site)
        for segment in site_segments:
            segments.remove_segment(client, site, segment.name)
        counts["segments"] = len(site_segments)
        funnels = saved_funnels.list_funnels(client, site)
        for funnel in funnels:
            saved_funnels.remove_funnel(client, site, funnel.name)
        counts["funnels"] = len(funnels)
        channels = channel_rules.list_rules(client, site)
        for rule in channels:
            channel_rules.remove_rule(client, site, rule.source, rule.medium)
        counts["channel rules"] = len(channels)
        members = users.list_users(client, site)
        for email, _site, _role in members:
            users.remove_member(client, who, email, site)
        counts["members"] = len(members)
        waiting = users.list_invites(client, site)
        for invite in waiting:
            users.revoke(client, who, invite.id, site)
        counts["invitations"] = len(waiting)
        return ", ".join(f"{count} {what}" for what, count in counts.items() if count) or "none"

    # -- goals --------------------------------------------------------------------------------

    @api.get("/sites/goals")
    def sites_goals_list() -> Response:
        args = query(("site_id", "after", "before", "limit"))
        site = site_for(args.get("site_id"), "site_id", "viewer", change=False)
        found = sorted(goals.list_goals(clients(), site), key=goal_id)
        rows, meta = paginated(found, goal_id, args)
        return jsonify({"goals": [goal_json(goal) for goal in rows], "meta": meta})

    @api.put("/sites/goals")
    @serialised
    def sites_goal_put() -> Response:
        query(())
        fields = body(("site_id", "goal_type", "event_name", "page_path", "display_name"))
        site = site_for(fields.get("site_id"), "site_id", "admin", change=True)
        kind = optional_text(fields, "goal_type")
        if kind is None or not kind.strip():
            raise BadParameter("goal_type", "required: event or page")
        if kind not in GOAL_TYPES:
            raise BadParameter("goal_type", f"{kind[:100]!r} is not a goal type; one of event, page")
        field = "event_name" if kind == "event" else "page_path"
        value = text(fields, field)
        try:
            wanted = goals.make_goal(site, **{"event_name" if kind == "event" else "page_pattern": value})
        except goals.InvalidGoal as refused:
            raise BadParameter(field, str(refused)) from None
        for goal in goals.list_goals(clients(), site):  # find: the same event or page, as Plausible
            if (goal.kind, goal.event_name, goal.page_pattern) == (
                wanted.kind,
                wanted.event_name,
                wanted.page_pattern,
            ):
                return jsonify({"domain": site} | goal_json(goal))
        display = optional_text(fields, "display_name")
        if display is not None and display.strip() and display.strip() != wanted.name:
            display = display.strip()
            if len(display) > goals.MAX_GOAL_NAME or not display.isprintable():
                raise BadParameter("display_name", f"at most {goals.MAX_GOAL_NAME} printable characters")
            wanted = replace(wanted, name=display)
        try:
            goals.add_goal(clients(), wanted)
        except goals.InvalidGoal as refused:  # the cap ("site: at most …") or a name taken
            problem = str(refused)
            if problem.startswith("site: "):
                raise BadParameter("site_id", problem.removeprefix("site: ")) from None
            raise BadParameter("display_name", problem) from None
        audit(settings, clients, "goal_added", f"{site} {wanted.name}", site)
        return jsonify({"domain": site} | goal_json(wanted))

    @api.delete("/sites/goals/<goal_key>")
    def sites_goal_delete(goal_key: str) -> Response:
        args = query(("site_id",))
        fields = body(("site_id",))
        site = site_for(fields.get("site_id", args.get("site_id")), "site_id", "admin", change=True)
        found = [goal for goal in goals.list_goals(clients(), site) if goal_id(goal) == goal_key]
        if not found:
            raise Refused(f"goal_id: goal {goal_key[:100]!r} could not be found on {site}", kind="not_found")
        goals.remove_goal(clients(), site, found[0].name)
        audit(settings, clients, "goal_removed", f"{site} {found[0].name}", site)
        return jsonify({"deleted": True})

    # -- shared links -------------------------------------------------------------------------

    @api.put("/sites/shared-links")
    @serialised
    def sites_shared_link_put() -> Response:
        query(())
        fields = body(("site_id", "name"))
        site = site_for(fields.get("site_id"), "site_id", "admin", change=True)
        try:
            name = shared_links.clean_label(text(fields, "name"))
        except shared_links.SharedLinkError as refused:
            raise BadParameter("name", str(refused).removeprefix("label: ")) from None
        client = clients()
        named = [link for link in shared_links.list_links(client, site) if link.label == name]
        for link in named:
            if link.revoked:
                continue
            token = link_token(link.id)
            if not hmac.compare_digest(shared_links.token_hash(token), link.token_sha256):
                raise Refused(
                    f"name: {site}'s shared link {name!r} was made in the dashboard or with 'tally share'; "
                    "its URL was shown once, at creation; give this one another name",
                    kind="conflict",
                )
            return jsonify({"name": name, "url": share_url(token)})
        try:
            created = shared_links.create_link(
                client, site, label=name, token_of=link_token, link_id=link_id_for(site, name, len(named))
            )
        except shared_links.SharedLinkError as refused:  # the cap: "site: at most 50 shared links …"
            raise BadParameter("site_id", str(refused).removeprefix("site: ")) from None
        audit(settings, clients, "shared_link_created", f"{site} {name} {created.link.id}", site)
        return jsonify({"name": name, "url": share_url(created.token)})

    def share_url(token: str) -> str:
        base = settings.dashboard_url or request.host_url
        return base.rstrip("/") + SHARE_PATH + token

    # -- custom properties --------------------------------------------------------------------

    @api.get("/sites/custom-props")
    def sites_custom_props_list() -> Response:
        args = query(("site_id",))
        site = site_for(args.get("site_id"), "site_id", "viewer", change=False)
        names = custom_properties.list_properties(clients(), site)
        return jsonify({"custom_properties": [{"property": name} for name in names]})

    @api.put("/sites/custom-props")
    @serialised
    def sites_custom_prop_put() -> Response:
        query(())
        fields = body(("site_id", "property"))
        site = site_for(fields.get("site_id"), "site_id", "admin", change=True)
        name = custom_properties.clean_name(fields.get("property"))  # 400 naming `property`
        try:
            added = custom_properties.add_property(clients(), site, name)
        except custom_properties.InvalidProperty as refused:  # the cap: "site: at most …"
            raise BadParameter("site_id", str(refused).removeprefix("site: ")) from None
        if added:
            audit(settings, clients, "custom_property_added", f"{site} {name}", site)
        return jsonify({"created": True})  # as Plausible: the same answer when it was there

    @api.delete("/sites/custom-props/<anytext:property_name>")
    def sites_custom_prop_delete(property_name: str) -> Response:
        args = query(("site_id",))
        fields = body(("site_id",))
        site = site_for(fields.get("site_id", args.get("site_id")), "site_id", "admin", change=True)
        name = custom_properties.clean_name(property_name)
        if custom_properties.remove_property(clients(), site, name):
            audit(settings, clients, "custom_property_removed", f"{site} {name}", site)
        return jsonify({"deleted": True})  # as Plausible: a name not listed is not an error

    # -- guests (members and invitations) ------------------------------------------------------

    def guests(site: str) -> list[dict[str, object]]:
        """The site's viewers and admins (accepted) and waiting invitations (not accepted), by
        email; owners are its team, not guests."""
        client = clients()
        found: dict[str, dict[str, object]] = {}
        for invite in users.list_invites(client, site):
            if invite.role in PLAUSIBLE_ROLE:
                found[invite.email] = guest_json(invite.email, invite.role, accepted=False)
        for email, _site, role in users.list_users(client, site):
            found.pop(email, None)
            if role in PLAUSIBLE_ROLE:
                found[email] = guest_json(email, role, accepted=True)
        return [found[email] for email in sorted(found)]

    @api.get("/sites/guests")
    def sites_guests_list() -> Response:
        args = query(("site_id", "after", "before", "limit"))
        site = site_for(args.get("site_id"), "site_id", "owner", change=False)
        rows, meta = paginated(guests(site), lambda row: str(row["email"]), args)
        return jsonify({"guests": rows, "meta": meta})

    @api.put("/sites/guests")
    @serialised
    def sites_guest_put() -> Response:
        query(())
        fields = body(("site_id", "email", "role"))
        site = site_for(fields.get("site_id"), "site_id", "owner", change=True)
        email = account_field(users.clean_email, text(fields, "email"))
        role = optional_text(fields, "role")
        if role not in GUEST_ROLES:
            raise BadParameter("role", "required: viewer or editor")
        user = users.get_user(clients(), email)
        held = user.role_on(site) if user else None
        if held == "owner":
            raise BadParameter("email", f"{email} is an owner of {site}, not a guest")
        if held is not None:
            return jsonify(guest_json(email, held, accepted=True))
        for invite in users.list_invites(clients(), site):
            if invite.email == email:
                return jsonify(guest_json(email, invite.role, accepted=False))
        try:
            made = invitations.invite(
                settings, clients(), actor_of(settings), email, site, GUEST_ROLES[role], request.host_url
            )
        except AccountError as refused:
            raise as_bad_field(refused) from None
        # Beyond Plausible's answer: how the invitation travels, and its link when the caller may
        # hold it (the operator's key: nobody else receives it), as POST /api/v1/invites answers.
        extra: dict[str, object] = {"delivery": made.delivery}
        if made.link:
            extra["link"] = made.link
        return jsonify(guest_json(email, made.invite.role, accepted=False) | extra)

    @api.delete("/sites/guests/<email>")
    def sites_guest_delete(email: str) -> Response:
        args = query(("site_id",))
        fields = body(("site_id",))
        site = site_for(fields.get("site_id", args.get("site_id")), "site_id", "owner", change=True)
        email = account_field(users.clean_email, email[:MAX_FIELD_CHARS])
        client, who = clients(), actor_of(settings)
        user = users.get_user(client, email)
        held = user.role_on(site) if user else None
        if held == "owner":
            raise BadParameter("email", f"{email} is an owner of {site}, not a guest")
        if held is not None:
            users.remove_member(client, who, email, site)  # ends their invitations there too
        else:
            for invite in users.list_invites(client, site):
                if invite.email == email:
                    users.revoke(client, who, invite.id, site)
        # As Plausible: deleting someone who is neither (any more) is not an error.
        return jsonify({"deleted": True})


# -- reading a request ------------------------------------------------------------------------


def query(allowed: tuple[str, ...]) -> dict[str, str]:
    """The query string, each parameter known and given once (else a 400 naming it)."""
    for name in request.args:
        if name not in allowed:
            raise BadParameter(name[:100], f"unknown parameter; known: {', '.join(allowed) or 'none'}")
        if len(request.args.getlist(name)) > 1:
            raise BadParameter(name, "given more than once")
    return {name: request.args[name] for name in request.args}


def flag(args: Mapping[str, str], name: str) -> bool:
    """A boolean query parameter, false when absent (else a 400 naming it)."""
    value = args.get(name, "false").strip().lower()
    if value not in ("true", "false"):
        raise BadParameter(name, f"true or false, not {value[:100]!r}")
    return value == "true"


def body(allowed: tuple[str, ...]) -> dict[str, Any]:
    """The fields sent as a JSON object or as a form (urlencoded or multipart, as `curl -F`),
    known fields only; no body is no fields. The size is bounded before this reads it
    (dashboard/request_bodies.py)."""
    if request.is_json:
        fields = request.get_json(silent=True)
        if not isinstance(fields, dict):
            raise BadParameter("body", "a JSON object, or form fields")
    elif request.mimetype in ("application/x-www-form-urlencoded", "multipart/form-data"):
        if request.files:
            raise BadParameter(next(iter(request.files))[:100], "a text field, not a file")
        for name in request.form:
            if len(request.form.getlist(name)) > 1:
                raise BadParameter(name[:100], "given more than once")
        fields = request.form.to_dict()
    elif not request.get_data(cache=True):
        fields = {}
    else:
        raise BadParameter("body", "a JSON object (Content-Type: application/json) or form fields")
    for name in fields:
        if name not in allowed:
            raise BadParameter(str(name)[:100], f"unknown field; known: {', '.join(allowed) or 'none'}")
    return fields


def domain_field(fields: Mapping[str, Any]) -> str:
    value = text(fields, "domain")
    try:
        if len(value) > MAX_SITE_LENGTH:
            raise InvalidDomain(value)
        return normalise(value)
    except InvalidDomain:
        raise BadParameter("domain", f"not a domain name: {value[:100]!r} (e.g. example.com)") from None


def account_field(clean: Callable[[str], Any], value: str) -> Any:
    try:
        return clean(value)
    except AccountError as refused:
        raise as_bad_field(refused) from None


def as_bad_field(refused: AccountError) -> BadParameter:
    field, _, problem = str(refused).partition(": ")
    return BadParameter("site_id" if field == "site" else field, problem or str(refused))


# -- pagination, as Plausible's -----------------------------------------------------------------


def page_limit(args: Mapping[str, str]) -> int:
    value = args.get("limit")
    if value is None:
        return DEFAULT_PAGE
    if not (value.isascii() and value.isdigit() and len(value) <= 5 and 1 <= int(value) <= MAX_LIMIT):
        raise BadParameter("limit", f"a whole number from 1 to {MAX_LIMIT}")
    return int(value)


def encode_cursor(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def decode_cursor(args: Mapping[str, str], name: str) -> str | None:
    value = args.get(name)
    if value is None:
        return None
    try:
        key = base64.b64decode(value + "=" * (-len(value) % 4), altchars=b"-_", validate=True).decode()
        if not key or encode_cursor(key) != value:
            raise ValueError(value)
        return key
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadParameter(name, "not a cursor this API gave (meta.after or meta.before)") from None


def paginated(items: Sequence[T], key: Callable[[T], str], args: Mapping[str, str]) -> tuple[list[T], dict]:
    """One page of `items` (sorted by `key`) and Plausible's `meta`: `after` the cursor of the
    next page (null on the last), `before` of the previous one (null on the first), `limit`."""
    limit = page_limit(args)
    after, before = decode_cursor(args, "after"), decode_cursor(args, "before")
    if after is not None and before is not None:
        raise BadParameter("before", "give after or before, not both")
    keys = [key(item) for item in items]
    if after is not None:
        start = bisect_right(keys, after)
        end = min(start + limit, len(items))
    elif before is not None:
        end = bisect_left(keys, before)
        start = max(end - limit, 0)
    else:
        start, end = 0, min(limit, len(items))
    rows = list(items[start:end])
    meta = {
        "after": encode_cursor(keys[end - 1]) if rows and end < len(items) else None,
        "before": encode_cursor(keys[start]) if rows and start > 0 else None,
        "limit": limit,
    }
    return rows, meta


# -- answers ------------------------------------------------------------------------------------


def goal_json(goal: goals.Goal) -> dict[str, object]:
    return {
        "id": goal_id(goal),
        "display_name": goal.name,
        "goal_type": goal.kind,
        "event_name": goal.event_name or None,
        "page_path": goal.page_pattern or None,
    }


def guest_json(email: str, role: Role, accepted: bool) -> dict[str, object]:
    return {"email": email, "role": PLAUSIBLE_ROLE.get(role, role), "accepted": accepted}
