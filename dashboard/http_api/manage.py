"""The settings and accounts endpoints of the API (`/api/v1/exclusions`, `/members`, `/invites`,
`/keys`, `/audit`, `/reports`, `/timezone`, `/identity`): what the CLI and the dashboard's panels
do, over HTTP.

Who may call them: the same Bearer keys as the stats API (dashboard/http_api/authorisation.py), never the
dashboard's session cookie. The sign-in guard lets /api/v1 through without looking at the
cookie, and a web page on another origin cannot add an Authorization header without a CORS
preflight this server never grants, so a page the operator opens cannot make these calls for
them (the dashboard's own writes, Dash callbacks, are guarded by their JSON content type and
the Lax cookie instead). Bodies must be JSON (`Content-Type: application/json`).

What a caller may do on a site is what the dashboard lets the same person do there
(dashboard/accounts.py): the operator's key is the first owner of every site; a member's key
acts with its user's role on the sites in its scope. Reading needs the role; changing anything
also needs a key made with scope `manage` (a read key, the default, changes nothing). Exclusions
and email reports: admin. The site's time zone and visitor identity (how long its visitor ids
live: storage/site_identity.py): any member reads them, an admin changes them.
Members, invitations (listed, made, revoked; an owner's never carry a link for an address that has
no account: dashboard/invitations.py), the audit log (the rows of that site; the operator's key
also reads the account-level ones, sign-ins): owner. API keys: a member's own (the operator's key:
anyone's).

Answers: 400 naming the parameter or body field, 403 for a role or key scope that does not
allow it, 404 for an unknown site, member, exclusion, subscription or key.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from flask import Blueprint, Response, g, jsonify, request

from dashboard import invitations
from dashboard.http_api.authorisation import Access
from dashboard.http_api.parameters import MAX_LIMIT, MAX_SITE_LENGTH, BadParameter
from dashboard.http_api.plausible.report import SiteNotFound
from dashboard.store import ClientFactory
from storage import exclusions, report_subscriptions, site_identity, sites, users
from storage.calendar import InvalidTimezone
from storage.sites import InvalidDomain, normalise
from storage.users import RANK, AccountError, Role
from tally.refusal import Refused
from tally.settings import Settings

DEFAULT_AUDIT_LIMIT = 100
MAX_FIELD_CHARS = 1000


def register_management(api: Blueprint, settings: Settings, clients: ClientFactory) -> None:
    """Adds the endpoints to the stats API's blueprint: its key check, scope check, error
    handlers and no-store header apply to them as they do to the numbers."""

    def site_with_role(args: Mapping[str, str], needed: Role, change: bool) -> str:
        return site_with_role_of(clients, args, needed, change)

    def actor() -> users.Actor:
        return actor_of(settings)

    def audited(action: str, detail: str, site: str, key_id: str = "") -> None:
        audit(settings, clients, action, detail, site, key_id)

    # -- exclusions (admin) -------------------------------------------------------------------

    @api.get("/exclusions")
    def list_exclusions() -> Response:
        site = site_with_role(query(("site",)), "admin", change=False)
        rows = exclusions.list_exclusions(clients(), site)
        return jsonify({"site": site, "exclusions": [exclusion_json(row) for row in rows]})

    @api.post("/exclusions")
    def add_exclusion() -> tuple[Response, int]:
        site = site_with_role(query(("site",)), "admin", change=True)
        fields = body(("kind", "value"))
        exclusion = wanted_exclusion(site, text(fields, "kind"), text(fields, "value"))
        existing = exclusion in exclusions.list_exclusions(clients(), site)
        if not existing:  # the store's refusal (the site's cap) names the site: a 400 as it is
            exclusions.add_exclusions(clients(), [exclusion])
            audited("exclusion_added", f"{site} {exclusion.kind} {exclusion.value}", site)
        return jsonify(exclusion_json(exclusion) | {"site": site}), 200 if existing else 201

    @api.delete("/exclusions")
    def remove_exclusion() -> Response:
        args = query(("site", "kind", "value"))
        site = site_with_role(args, "admin", change=True)
        exclusion = wanted_exclusion(site, required(args, "kind"), required(args, "value"))
        if exclusions.remove_exclusions(clients(), [exclusion]):
            raise Refused(
                f"value: {exclusion.kind} {exclusion.value} is not excluded from {site}", kind="not_found"
            )
        audited("exclusion_removed", f"{site} {exclusion.kind} {exclusion.value}", site)
        return jsonify({"removed": exclusion_json(exclusion) | {"site": site}})

    # -- members, invitations, the audit log (owner) ------------------------------------------

    @api.get("/members")
    def list_members() -> Response:
        site = site_with_role(query(("site",)), "owner", change=False)
        operator = {"email": settings.owner_email.lower(), "role": "owner", "operator": True}
        members = [
            {"email": email, "role": role, "operator": False}
            for email, _site, role in users.list_users(clients(), site)
        ]
        return jsonify({"site": site, "members": [operator, *members]})

    @api.put("/members")
    def change_role() -> Response:
        site = site_with_role(query(("site",)), "owner", change=True)
        fields = body(("email", "role"))
        email, role = account_field(users.clean_email, text(fields, "email")), text(fields, "role")
        role = account_field(users.clean_role, role)
        member(site, email)
        users.change_role(clients(), actor(), email, site, role)
        return jsonify({"email": email, "site": site, "role": role})

    @api.delete("/members")
    def remove_member() -> Response:
        args = query(("site", "email"))
        site = site_with_role(args, "owner", change=True)
        email = account_field(users.clean_email, required(args, "email"))
        role = member(site, email)
        users.remove_member(clients(), actor(), email, site)
        return jsonify({"removed": {"email": email, "site": site, "role": role}})

    def member(site: str, email: str) -> Role:
        """`email`'s role on `site`, or 404: the API changes members, it does not add them (an
        invitation does, once accepted)."""
        user = users.get_user(clients(), email)
        role = user.role_on(site) if user else None
        if role is None:
            raise Refused(
                f"email: {email} is not a member of {site}; invite them (POST /api/v1/invites)",
                kind="not_found",
            )
        return role

    @api.post("/invites")
    def invite() -> tuple[Response, int]:
        site = site_with_role(query(("site",)), "owner", change=True)
        fields = body(("email", "role"))
        email = account_field(users.clean_email, text(fields, "email"))
        role = account_field(users.clean_role, text(fields, "role"))
        try:
            made = invitations.invite(settings, clients(), actor(), email, site, role, request.host_url)
        except AccountError as refused:
            raise as_bad_field(refused) from None
        # The link only when the caller may hold it: the operator's own, or shown for an existing
        # account; a mailed or pending invitation's link never reaches the inviting owner.
        answer = invite_json(made.invite) | {"delivery": made.delivery}
        return jsonify(answer | ({"link": made.link} if made.link else {})), 201

    @api.get("/invites")
    def list_invites() -> Response:
        site = site_with_role(query(("site",)), "owner", change=False)
        waiting = users.list_invites(clients(), site)
        return jsonify({"site": site, "invites": [invite_json(row) for row in waiting]})

    @api.delete("/invites")
    def revoke_invite() -> Response:
        args = query(("site", "id"))
        site = site_with_role(args, "owner", change=True)
        invite_id = required(args, "id")
        try:
            revoked = users.revoke(clients(), actor(), invite_id, site)
        except AccountError:
            raise Refused(f"id: no waiting invitation {invite_id!r} on {site}", kind="not_found") from None
        return jsonify({"revoked": invite_json(revoked) | {"status": "revoked"}})

    @api.get("/audit")
    def audit_log() -> Response:
        args = query(("site", "limit"))
        site = site_with_role(args, "owner", change=False)
        limit = whole_number(args, "limit", DEFAULT_AUDIT_LIMIT)
        # The rows about this site; the account-level ones (sign-ins: from where a member signed
        # in, whatever site they then read) are the operator's alone.
        sites = [site, ""] if caller().is_operator else [site]
        entries = users.audit(clients(), sites, limit=limit)
        return jsonify({"site": site, "entries": [audit_json(entry) for entry in entries]})

    # -- API keys (a member's own; the operator's key: anyone's) ------------------------------

    def key_owner(email: str | None) -> str:
        access = caller()
        if access.is_operator:
            if email is None:
                raise BadParameter("email", "required with the operator's key: whose keys")
            return account_field(users.clean_email, email)
        if email is not None and account_field(users.clean_email, email) != access.email:
            raise Refused("email: a member's key manages only its own user's keys", kind="forbidden")
        return access.email

    @api.get("/keys")
    def list_keys() -> Response:
        email = key_owner(query(("email",)).get("email"))
        return jsonify({"email": email, "keys": [key_json(key) for key in users.list_keys(clients(), email)]})

    @api.post("/keys")
    def create_key() -> tuple[Response, int]:
        query(())
        access = caller()
        if access.scope != "manage":
            raise Refused("this API key is read-only; changes need a key with scope manage", kind="forbidden")
        fields = body(("email", "sites", "scope", "label"))
        email = key_owner(optional_text(fields, "email"))
        sites = site_list(fields)
        outside = sorted(site for site in sites if not access.may_read(site))
        if outside:
            raise Refused(f"sites: this API key may not act on {outside[0]}", kind="forbidden")
        try:
            key, token = users.create_key(
                clients(),
                email,
                sites,
                optional_text(fields, "label") or "",
                optional_text(fields, "scope") or "read",
            )
        except AccountError as refused:
            raise as_bad_field(refused, {"site": "sites"}) from None
        audited("key_created", ", ".join(key.sites), users.key_site(key), key_id=key.id)
        return jsonify(key_json(key) | {"key": token}), 201

    @api.delete("/keys")
    def revoke_key() -> Response:
        args = query(("id",))
        access = caller()
        if access.scope != "manage":
            raise Refused("this API key is read-only; changes need a key with scope manage", kind="forbidden")
        key_id = required(args, "id")
        try:
            key = users.revoke_key(clients(), key_id, email=None if access.is_operator else access.email)
        except AccountError:
            raise Refused(f"id: no API key {key_id!r}", kind="not_found") from None
        audited("key_revoked", key.email, users.key_site(key), key_id=key.id)
        return jsonify({"revoked": key_json(key) | {"revoked": True}})

    # -- the site's time zone (reading: any member; changing: admin) ---------------------------

    @api.get("/timezone")
    def timezone() -> Response:
        site = site_with_role(query(("site",)), "viewer", change=False)
        return jsonify({"site": site, "timezone": sites.site_timezone(clients(), site)})

    @api.put("/timezone")
    def set_timezone() -> Response:
        site = site_with_role(query(("site",)), "admin", change=True)
        zone = text(body(("timezone",)), "timezone")
        try:
            sites.set_timezone(clients(), site, zone)
        except InvalidTimezone:
            raise BadParameter(
                "timezone", f"{zone!r} is not an IANA time zone (e.g. Europe/Berlin)"
            ) from None
        audited("timezone_changed", f"{site} {zone}", site)
        return jsonify({"site": site, "timezone": zone})

    # -- the site's visitor identity (reading: any member; changing: admin) ---------------------

    @api.get("/identity")
    def identity() -> Response:
        site = site_with_role(query(("site",)), "viewer", change=False)
        return jsonify(identity_json(site, site_identity.identity_history(clients(), site)))

    @api.put("/identity")
    def set_identity() -> Response:
        site = site_with_role(query(("site",)), "admin", change=True)
        rotation = site_identity.checked_rotation(text(body(("rotation",)), "rotation"))
        site_identity.set_rotation(clients(), site, rotation, actor=actor().email)
        audited("identity_changed", f"{site} {rotation}", site)
        return jsonify(identity_json(site, site_identity.identity_history(clients(), site)))

    # -- email report subscriptions (admin) ---------------------------------------------------

    @api.get("/reports")
    def list_subscriptions() -> Response:
        site = site_with_role(query(("site",)), "admin", change=False)
        rows = report_subscriptions.list_subscriptions(clients(), site)
        return jsonify({"site": site, "subscriptions": [subscription_json(row) for row in rows]})

    @api.post("/reports")
    def subscribe() -> tuple[Response, int]:
        site = site_with_role(query(("site",)), "admin", change=True)
        fields = body(("email", "frequency"))
        email = subscriber(text(fields, "email"))
        frequency = report_frequency(text(fields, "frequency"))
        wanted = report_subscriptions.Subscription(site, email, frequency)
        existing = wanted in report_subscriptions.list_subscriptions(clients(), site)
        report_subscriptions.subscribe(clients(), site, email, frequency)  # the cap: "site: at most …"
        if not existing:
            audited("report_subscribed", f"{site} {email} {frequency}", site)
        return jsonify(subscription_json(wanted) | {"site": site}), 200 if existing else 201

    @api.delete("/reports")
    def unsubscribe() -> Response:
        args = query(("site", "email", "frequency"))
        site = site_with_role(args, "admin", change=True)
        email = subscriber(required(args, "email"))
        frequency = report_frequency(args["frequency"]) if "frequency" in args else None
        try:
            ended = report_subscriptions.unsubscribe(clients(), site, email, frequency)
        except report_subscriptions.InvalidSubscription:
            which = f"{frequency} report" if frequency else "report"
            raise Refused(f"email: {email} receives no {which} of {site}", kind="not_found") from None
        audited("report_unsubscribed", f"{site} {email} {frequency or 'all'}", site)
        return jsonify({"removed": [subscription_json(row) | {"site": site} for row in ended]})


# -- who is calling, and the audit row of a change (shared with dashboard/http_api/annotations.py) --


def site_with_role_of(clients: ClientFactory, args: Mapping[str, str], needed: Role, change: bool) -> str:
    """The request's registered site, once the caller's role there (and, for a change, the
    key's scope) allows it: 400, then 404, then 403."""
    site = sites.registered(clients(), checked_site(args), SiteNotFound)
    access = caller()
    if change and access.scope != "manage":
        raise Refused("this API key is read-only; changes need a key with scope manage", kind="forbidden")
    role = role_of(clients, access, site)
    if role is None or RANK[role] < RANK[needed]:
        held = f"the key's user is {role}" if role else "the key's user has no role there"
        raise Refused(f"site: needs the {needed} role on {site}; {held}", kind="forbidden")
    return site


def identity_json(site: str, history: list[site_identity.IdentityChange]) -> dict[str, object]:
    """The identity in force and every change before it (`since` null: from the start)."""
    changes = [{"rotation": c.rotation, "since": c.since.isoformat() if c.since else None} for c in history]
    return {"site": site, **changes[-1], "history": changes}


def role_of(clients: ClientFactory, access: Access, site: str) -> Role | None:
    if access.is_operator:
        return "owner"  # the operator's password and key: the first owner of every site
    if not access.may_read(site):
        return None
    user = users.get_user(clients(), access.email)
    return user.role_on(site) if user else None


def actor_of(settings: Settings) -> users.Actor:
    access = caller()
    email = settings.owner_email if access.is_operator else access.email
    return users.Actor(email, access.is_operator, request.remote_addr or "", access.key_id)


def audit(
    settings: Settings, clients: ClientFactory, action: str, detail: str, site: str, key_id: str = ""
) -> None:
    """The change's audit row, naming the site it concerns ('' for an account's keys)."""
    who = actor_of(settings)
    users.record(
        clients(),
        action,
        who.email,
        "ok",
        address=who.address,
        key_id=key_id or who.key_id,
        detail=detail,
        site=site,
    )


# -- reading a request ------------------------------------------------------------------------


def caller() -> Access:
    return g.api_access  # set by the stats API's key check before any endpoint runs


def query(allowed: tuple[str, ...]) -> dict[str, str]:
    """The query string, each parameter known and given once (else a 400 naming it)."""
    for name in request.args:
        if name not in allowed:
            known = ", ".join(allowed) or "none"
            raise BadParameter(name, f"unknown parameter; known: {known}")
        if len(request.args.getlist(name)) > 1:
            raise BadParameter(name, "given more than once")
    return {name: request.args[name] for name in request.args}


def required(args: Mapping[str, str], name: str) -> str:
    value = args.get(name, "").strip()
    if not value:
        raise BadParameter(name, "required")
    if len(value) > MAX_FIELD_CHARS:
        raise BadParameter(name, f"at most {MAX_FIELD_CHARS} characters")
    return value


def checked_site(args: Mapping[str, str]) -> str:
    value = required(args, "site")
    try:
        if len(value) > MAX_SITE_LENGTH:
            raise InvalidDomain(value)
        return normalise(value)
    except InvalidDomain:
        raise BadParameter("site", "not a site name") from None


def whole_number(args: Mapping[str, str], name: str, default: int) -> int:
    text_value = args.get(name)
    if text_value is None:
        return default
    if not (text_value.isascii() and text_value.isdigit() and len(text_value) <= 5):
        raise BadParameter(name, f"must be a whole number from 1 to {MAX_LIMIT}")
    if not 1 <= int(text_value) <= MAX_LIMIT:
        raise BadParameter(name, f"must be a whole number from 1 to {MAX_LIMIT}")
    return int(text_value)


def body(allowed: tuple[str, ...]) -> dict[str, Any]:
    """The JSON object sent, with known fields only (else a 400 naming the field)."""
    fields = request.get_json(silent=True)
    if not isinstance(fields, dict):
        raise BadParameter("body", "a JSON object, sent with Content-Type: application/json")
    for name in fields:
        if name not in allowed:
            raise BadParameter(str(name)[:100], f"unknown field; known: {', '.join(allowed)}")
    return fields


def optional_text(fields: Mapping[str, Any], name: str) -> str | None:
    value = fields.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_FIELD_CHARS:
        raise BadParameter(name, f"a string of at most {MAX_FIELD_CHARS} characters")
    return value


def text(fields: Mapping[str, Any], name: str) -> str:
    value = optional_text(fields, name)
    if value is None or not value.strip():
        raise BadParameter(name, "required")
    return value.strip()


def site_list(fields: Mapping[str, Any]) -> list[str]:
    sites = fields.get("sites")
    if not isinstance(sites, list) or not sites or not all(isinstance(site, str) for site in sites):
        raise BadParameter("sites", "a non-empty list of site names")
    try:
        return [normalise(site[: MAX_SITE_LENGTH + 1]) for site in sites]
    except InvalidDomain:
        raise BadParameter("sites", "not a list of site names") from None


def account_field(clean: Any, value: str) -> Any:
    """`value` through storage.users' check (clean_email, clean_role), its refusal a 400."""
    try:
        return clean(value)
    except AccountError as refused:
        raise as_bad_field(refused) from None


def as_bad_field(refused: AccountError, renamed: Mapping[str, str] | None = None) -> BadParameter:
    """storage.users' messages start with the field ("email: …"); the API's name for it."""
    field, _, problem = str(refused).partition(": ")
    return BadParameter((renamed or {}).get(field, field), problem or str(refused))


def wanted_exclusion(site: str, kind: str, value: str) -> exclusions.Exclusion:
    if kind not in exclusions.KINDS:
        raise BadParameter("kind", f"one of {', '.join(exclusions.KINDS)}")
    try:
        return exclusions.Exclusion(site, kind, exclusions.clean_value(kind, value))  # type: ignore[arg-type]
    except exclusions.InvalidExclusion as refused:
        # The store's messages name the CLI's option (--ip: …); here the field is `value`.
        raise BadParameter("value", str(refused).partition(": ")[2]) from None


def subscriber(email: str) -> str:
    try:
        return report_subscriptions.checked_email(email)
    except report_subscriptions.InvalidSubscription as refused:
        raise BadParameter("email", str(refused)) from None


def report_frequency(value: str) -> report_subscriptions.Frequency:
    if value not in report_subscriptions.FREQUENCIES:
        raise BadParameter("frequency", f"one of {', '.join(report_subscriptions.FREQUENCIES)}")
    return value  # type: ignore[return-value]


# -- answers ----------------------------------------------------------------------------------


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z") if moment.tzinfo else moment.isoformat() + "Z"


def exclusion_json(exclusion: exclusions.Exclusion) -> dict[str, object]:
    return {"kind": exclusion.kind, "value": exclusion.value}


def key_json(key: users.ApiKey) -> dict[str, object]:
    return {
        "id": key.id,
        "email": key.email,
        "sites": list(key.sites),
        "scope": key.scope,
        "label": key.label,
        "created_at": iso(key.created_at),
        "revoked": key.revoked,
    }


def invite_json(invite: users.Invite) -> dict[str, object]:
    return {
        "id": invite.id,
        "email": invite.email,
        "site": invite.site,
        "role": invite.role,
        "status": invite.status,
        "invited_by": "operator" if invite.inviter == users.OPERATOR else invite.inviter,
        "created_at": iso(invite.created_at) if invite.created_at else None,
        "expires_at": iso(invite.expires_at),
    }


def audit_json(entry: users.AuditEntry) -> dict[str, object]:
    return {
        "ts": iso(entry.ts),
        "site": entry.site,
        "action": entry.action,
        "email": entry.email,
        "key_id": entry.key_id,
        "outcome": entry.outcome,
        "address": entry.address,
        "detail": entry.detail,
    }


def subscription_json(subscription: report_subscriptions.Subscription) -> dict[str, object]:
    return {"email": subscription.email, "frequency": subscription.frequency}
