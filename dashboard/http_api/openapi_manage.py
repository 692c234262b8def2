"""The OpenAPI description of the settings and accounts endpoints (dashboard/http_api/manage.py),
joined into the stats API's document by dashboard/http_api/openapi.py. The vocabularies (roles, scopes,
exclusion kinds, report frequencies) come from the modules that enforce them.
"""

from __future__ import annotations

from typing import Any

from dashboard.http_api import sites_api
from dashboard.http_api.manage import DEFAULT_AUDIT_LIMIT
from dashboard.http_api.parameters import MAX_LIMIT
from storage import annotations, exclusions, report_subscriptions, site_identity, users
from storage.queries.contract import MAX_PROPERTY_KEY

JSON = dict[str, Any]

WHO = (
    " The operator's key may; a team member's key may with its user's {role} role on the site "
    "(reading) and, for a change, scope manage. Never the dashboard's cookie."
)


def _query(name: str, description: str, schema: JSON, required: bool = True) -> JSON:
    return {"name": name, "in": "query", "required": required, "description": description, "schema": schema}


def _string(**constraints: Any) -> JSON:
    return {"type": "string", **constraints}


SITE = _query("site", "The site (domain), registered with `tally sites add`.", _string(minLength=1))
TEXT = _string(minLength=1)


def _body(properties: JSON, required: list[str]) -> JSON:
    return {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": required,
                    "additionalProperties": False,
                    "properties": properties,
                }
            }
        },
    }


def _answer(description: str, schema: JSON) -> JSON:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


ERROR = {"$ref": "#/components/schemas/Error"}
ERRORS: JSON = {
    "400": {"$ref": "#/components/responses/BadParameter"},
    "401": {"$ref": "#/components/responses/Unauthorized"},
    "403": _answer("the key's role on the site, or its scope (read), does not allow this", ERROR),
    "404": _answer("no such site (or member, exclusion, subscription, key)", ERROR),
    "503": {"$ref": "#/components/responses/StoreUnavailable"},
}


def _operation(summary: str, parameters: list[JSON], answers: JSON, body: JSON | None = None) -> JSON:
    operation: JSON = {"summary": summary, "parameters": parameters, "responses": {**answers, **ERRORS}}
    if body is not None:
        operation["requestBody"] = body
    return operation


def _object(properties: JSON) -> JSON:
    return {"type": "object", "required": list(properties), "properties": properties}


EXCLUSION = _object({"kind": _string(enum=list(exclusions.KINDS)), "value": _string()})
SITE_EXCLUSION = _object({"site": _string(), **EXCLUSION["properties"]})
MEMBER = _object(
    {"email": _string(), "role": _string(enum=list(users.ROLES)), "operator": {"type": "boolean"}}
)
SITE_MEMBER = _object({"email": _string(), "site": _string(), "role": _string(enum=list(users.ROLES))})
KEY_PROPERTIES: JSON = {
    "id": _string(),
    "email": _string(),
    "sites": {"type": "array", "items": _string()},
    "scope": _string(enum=list(users.SCOPES)),
    "label": _string(),
    "created_at": _string(format="date-time"),
    "revoked": {"type": "boolean"},
}
KEY = _object(KEY_PROPERTIES)
SUBSCRIPTION = _object(
    {"email": _string(), "frequency": _string(enum=list(report_subscriptions.FREQUENCIES))}
)
AUDIT_ENTRY = _object(
    {
        "ts": _string(format="date-time"),
        "action": _string(),
        "email": _string(),
        "key_id": _string(),
        "outcome": _string(),
        "address": _string(),
        "detail": _string(),
        "site": _string(description="the site the row concerns; empty for account-level rows"),
    }
)
INVITE = _object(
    {
        "id": _string(),
        "email": _string(),
        "site": _string(),
        "role": _string(enum=list(users.ROLES)),
        "status": _string(enum=["pending", "open", "used", "revoked"]),
        "invited_by": _string(description="the inviting member's email, or `operator`"),
        "created_at": _string(format="date-time"),
        "expires_at": _string(format="date-time"),
    }
)
# The link is there only when the caller may hold it (the operator's key, or an existing account's).
INVITE_MADE = _object({**INVITE["properties"], "delivery": _string(enum=list(users.DELIVERIES))})
INVITE_MADE["properties"]["link"] = _string()
SITE_ZONE = _object({"site": _string(), "timezone": _string()})
IDENTITY_CHANGE = _object(
    {
        "rotation": _string(enum=list(site_identity.ROTATIONS)),
        "since": _string(format="date-time", nullable=True, description="null: from the site's start"),
    }
)
SITE_IDENTITY = _object(
    {
        **IDENTITY_CHANGE["properties"],
        "site": _string(),
        "history": {"type": "array", "items": IDENTITY_CHANGE},
    }
)
KIND = _string(enum=list(exclusions.KINDS))
ROLE = _string(enum=list(users.ROLES))
FREQUENCY = _string(enum=list(report_subscriptions.FREQUENCIES))


def management_paths() -> JSON:
    return {
        "/api/v1/exclusions": {
            "get": _operation(
                "The site's exclusions (traffic the collector does not count)." + WHO.format(role="admin"),
                [SITE],
                {
                    "200": _answer(
                        "the exclusions",
                        _object({"site": _string(), "exclusions": {"type": "array", "items": EXCLUSION}}),
                    )
                },
            ),
            "post": _operation(
                "Exclude an IP range (CIDR, v4 or v6), a path pattern (* any run of characters) or a "
                "country (ISO 3166 alpha-2) from the site's traffic, within the collector's refresh "
                "(2 s); not retroactive." + WHO.format(role="admin"),
                [SITE],
                {
                    "201": _answer("excluded", SITE_EXCLUSION),
                    "200": _answer("it was excluded already", SITE_EXCLUSION),
                },
                _body({"kind": KIND, "value": TEXT}, ["kind", "value"]),
            ),
            "delete": _operation(
                "Stop excluding it (traffic dropped meanwhile does not come back)."
                + WHO.format(role="admin"),
                [SITE, _query("kind", "ip, path or country", KIND), _query("value", "as listed", TEXT)],
                {"200": _answer("removed", _object({"removed": SITE_EXCLUSION}))},
            ),
        },
        "/api/v1/members": {
            "get": _operation(
                "The site's members and their roles; the operator first." + WHO.format(role="owner"),
                [SITE],
                {
                    "200": _answer(
                        "the members",
                        _object({"site": _string(), "members": {"type": "array", "items": MEMBER}}),
                    )
                },
            ),
            "put": _operation(
                "Change a member's role on the site (at once, for their open pages too)."
                + WHO.format(role="owner"),
                [SITE],
                {"200": _answer("the new role", SITE_MEMBER)},
                _body({"email": TEXT, "role": ROLE}, ["email", "role"]),
            ),
            "delete": _operation(
                "Take a member's role on the site away (their sessions there end at once)."
                + WHO.format(role="owner"),
                [SITE, _query("email", "the member's email", TEXT)],
                {"200": _answer("removed", _object({"removed": SITE_MEMBER}))},
            ),
        },
        "/api/v1/invites": {
            "get": _operation(
                "The site's waiting invitations (pending the operator's approval, or open), oldest "
                "first; never their links." + WHO.format(role="owner"),
                [SITE],
                {
                    "200": _answer(
                        "the invitations",
                        _object({"site": _string(), "invites": {"type": "array", "items": INVITE}}),
                    )
                },
            ),
            "post": _operation(
                "A one-time invitation (7 days) giving `email` the role on the site once accepted, "
                "bound to the inviter's role (it dies if they stop being an owner). The link is in "
                "the answer only for the operator's key and, with no SMTP server, for an address "
                "that already has an account (only its own password accepts it); otherwise it is "
                "mailed to the address (`delivery`: mail) or, for a new address with no SMTP "
                "server, waits for the operator's approval (`delivery`: pending, `tally users "
                "invites approve ID`)." + WHO.format(role="owner"),
                [SITE],
                {"201": _answer("the invitation", INVITE_MADE)},
                _body({"email": TEXT, "role": ROLE}, ["email", "role"]),
            ),
            "delete": _operation(
                "Revoke a waiting invitation of the site: its link stops working." + WHO.format(role="owner"),
                [SITE, _query("id", "the invitation's id (GET /api/v1/invites)", TEXT)],
                {"200": _answer("revoked", _object({"revoked": INVITE}))},
            ),
        },
        "/api/v1/audit": {
            "get": _operation(
                "The site's audit log, newest first: invitations, members' changes, settings "
                "changes, imports, the use of keys for this site alone (a row per key per minute at "
                "most). Sign-ins are account-level: the operator's key reads them here too, an "
                "owner's does not." + WHO.format(role="owner"),
                [
                    SITE,
                    _query(
                        "limit",
                        "entries",
                        {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_LIMIT,
                            "default": DEFAULT_AUDIT_LIMIT,
                        },
                        required=False,
                    ),
                ],
                {
                    "200": _answer(
                        "entries",
                        _object({"site": _string(), "entries": {"type": "array", "items": AUDIT_ENTRY}}),
                    )
                },
            ),
        },
        "/api/v1/keys": {
            "get": _operation(
                "A user's API keys (never their secrets): a member's key lists its own user's; the "
                "operator's key names the user with `email`.",
                [_query("email", "whose keys (the operator's key only)", TEXT, required=False)],
                {
                    "200": _answer(
                        "the keys", _object({"email": _string(), "keys": {"type": "array", "items": KEY}})
                    )
                },
            ),
            "post": _operation(
                "Create an API key for the sites given (each one its user has a role on), scope read "
                "(the stats API) or manage (also what the user's role allows there). The secret is "
                "in `key`, shown this once. Needs a key with scope manage; a member's key creates "
                "keys for its own user and its own sites.",
                [],
                {"201": _answer("the key and its secret", _object({**KEY_PROPERTIES, "key": _string()}))},
                _body(
                    {
                        "sites": {"type": "array", "minItems": 1, "items": TEXT},
                        "scope": _string(enum=list(users.SCOPES), default="read"),
                        "label": _string(),
                        "email": TEXT,
                    },
                    ["sites"],
                ),
            ),
            "delete": _operation(
                "Revoke a key: its next request gets a 401. A member's key revokes its own user's keys.",
                [_query("id", "the key's id", TEXT)],
                {"200": _answer("revoked", _object({"revoked": KEY}))},
            ),
        },
        "/api/v1/timezone": {
            "get": _operation(
                "The site's time zone (IANA; UTC unless set): where its days, weeks and months start."
                + WHO.format(role="viewer"),
                [SITE],
                {"200": _answer("the zone", SITE_ZONE)},
            ),
            "put": _operation(
                "Set the site's time zone; reports follow at once." + WHO.format(role="admin"),
                [SITE],
                {"200": _answer("the new zone", SITE_ZONE)},
                _body({"timezone": _string(minLength=1, example="Europe/Berlin")}, ["timezone"]),
            ),
        },
        "/api/v1/identity": {
            "get": _operation(
                "The site's visitor identity: how long a visitor id lives (daily unless set; weekly, "
                "monthly), since when, and the identities before it." + WHO.format(role="viewer"),
                [SITE],
                {"200": _answer("the identity", SITE_IDENTITY)},
            ),
            "put": _operation(
                "Set how long the site's visitor ids live from now on (docs/privacy.md)."
                + WHO.format(role="admin"),
                [SITE],
                {"200": _answer("the new identity", SITE_IDENTITY)},
                _body({"rotation": _string(enum=list(site_identity.ROTATIONS))}, ["rotation"]),
            ),
        },
        "/api/v1/reports": {
            "get": _operation(
                "The site's email report subscriptions." + WHO.format(role="admin"),
                [SITE],
                {
                    "200": _answer(
                        "subscriptions",
                        _object(
                            {"site": _string(), "subscriptions": {"type": "array", "items": SUBSCRIPTION}}
                        ),
                    )
                },
            ),
            "post": _operation(
                "Send the site's weekly or monthly report to `email`." + WHO.format(role="admin"),
                [SITE],
                {
                    "201": _answer("subscribed", _object({"site": _string(), **SUBSCRIPTION["properties"]})),
                    "200": _answer(
                        "subscribed already", _object({"site": _string(), **SUBSCRIPTION["properties"]})
                    ),
                },
                _body({"email": TEXT, "frequency": FREQUENCY}, ["email", "frequency"]),
            ),
            "delete": _operation(
                "Stop sending the site's reports (one frequency, or all) to `email`."
                + WHO.format(role="admin"),
                [
                    SITE,
                    _query("email", "the subscriber", TEXT),
                    _query("frequency", "only this one", FREQUENCY, required=False),
                ],
                {
                    "200": _answer(
                        "ended",
                        _object(
                            {
                                "removed": {
                                    "type": "array",
                                    "items": _object({"site": _string(), **SUBSCRIPTION["properties"]}),
                                }
                            }
                        ),
                    )
                },
            ),
        },
    }


# -- Plausible's Sites API (dashboard/http_api/sites_api.py) ------------------------------------

SITES_WHO = (
    " Plausible's Sites API (https://plausible.io/docs/sites-api): the same path, fields and answer. "
    "Fields also as a form (curl -F). The operator's key may; a team member's key may with its user's "
    "{role} role on the site and, for a change, scope manage."
)
NULLABLE_TEXT = _string(nullable=True)
PAGE_META = _object({"after": NULLABLE_TEXT, "before": NULLABLE_TEXT, "limit": {"type": "integer"}})
PAGINATION = [
    _query("after", "the cursor of the next page (meta.after)", _string(), required=False),
    _query("before", "the cursor of the previous page (meta.before)", _string(), required=False),
    _query(
        "limit",
        "sites per page (default 100)",
        {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
        False,
    ),
]
SITE_ID_QUERY = _query("site_id", "the site's domain", TEXT)
SITE_ID_PATH = {
    "name": "site_id",
    "in": "path",
    "required": True,
    "description": "the site's domain",
    "schema": TEXT,
}
PLAUSIBLE_SITE = _object({"domain": _string(), "timezone": _string()})
PLAUSIBLE_GOAL_PROPERTIES: JSON = {
    "id": _string(description="stable while the goal exists (derived from its site and name)"),
    "display_name": _string(),
    "goal_type": _string(enum=list(sites_api.GOAL_TYPES)),
    "event_name": NULLABLE_TEXT,
    "page_path": NULLABLE_TEXT,
}
GUEST_ROLE = _string(enum=list(sites_api.GUEST_ROLES))
GUEST = _object({"email": _string(), "role": GUEST_ROLE, "accepted": {"type": "boolean"}})
GUEST_MADE = {
    "type": "object",
    "required": ["email", "role", "accepted"],
    "properties": {
        **GUEST["properties"],
        "delivery": _string(enum=list(users.DELIVERIES), description="a new invitation's (Tally's)"),
        "link": _string(description="a new invitation's link, when the caller may hold it (Tally's)"),
    },
}
DELETED = _object({"deleted": {"type": "boolean"}})
SITE_DELETED = {
    "type": "object",
    "required": ["deleted", "events"],
    "properties": {
        "deleted": {"type": "boolean"},
        "events": _string(enum=["kept", "erased"]),
        "erasure": {"type": "integer", "description": "the erasure's version, when erased (Tally's)"},
    },
}
TEAM = _object({"id": _string(), "name": _string(), "api_available": {"type": "boolean"}})
PROPERTY_NAME = _string(
    minLength=1, maxLength=MAX_PROPERTY_KEY, description="a custom event property, without control characters"
)
CUSTOM_PROPERTIES = _object(
    {"custom_properties": {"type": "array", "items": _object({"property": _string()})}}
)
CONFLICT = {"409": _answer("a shared link of that name made elsewhere: its URL was shown once", ERROR)}


def _listed(name: str, item: JSON) -> JSON:
    return _object({name: {"type": "array", "items": item}, "meta": PAGE_META})


def sites_paths() -> JSON:
    return {
        "/api/v1/sites": {
            "get": _operation(
                "The sites, by domain; a member's key: the sites it may read."
                + SITES_WHO.format(role="viewer"),
                [*PAGINATION, _query("team_id", "accepted, ignored: Tally has no teams", _string(), False)],
                {"200": _answer("a page of sites", _listed("sites", PLAUSIBLE_SITE))},
            ),
            "post": _operation(
                "Register a site." + SITES_WHO.split(" The operator's")[0] + " The operator's key only.",
                [],
                {"200": _answer("registered", PLAUSIBLE_SITE)},
                _body(
                    {
                        "domain": TEXT,
                        "timezone": _string(nullable=True, description="IANA; default UTC"),
                        "team_id": NULLABLE_TEXT,
                    },
                    ["domain"],
                ),
            ),
        },
        "/api/v1/sites/teams": {
            "get": _operation(
                "Plausible's team list: Tally has no teams, so the installation is the one team every "
                "key belongs to (its id is fixed; team_id elsewhere is accepted and ignored).",
                PAGINATION,
                {"200": _answer("the one team", _listed("teams", TEAM))},
            ),
        },
        "/api/v1/sites/{site_id}": {
            "get": _operation(
                "A site; custom_properties: the names the dashboard's Properties report offers (empty: "
                "every property; GET /api/v1/sites/custom-props)." + SITES_WHO.format(role="viewer"),
                [SITE_ID_PATH],
                {
                    "200": _answer(
                        "the site",
                        _object(
                            {
                                **PLAUSIBLE_SITE["properties"],
                                "custom_properties": {"type": "array", "items": _string()},
                            }
                        ),
                    )
                },
            ),
            "put": _operation(
                "Change the domain: refused (400 naming `domain`), the archive is keyed by it; the same "
                "domain answers the site." + SITES_WHO.format(role="admin"),
                [SITE_ID_PATH],
                {"200": _answer("the site, unchanged", PLAUSIBLE_SITE)},
                _body({"domain": TEXT}, ["domain"]),
            ),
            "delete": _operation(
                "Remove the site and its settings (goals, shared links, custom properties, members, "
                "invitations, exclusions, reports, alert rules, segments, funnels, channel rules); "
                "its archived events are kept, or with erase_events=true erased from the archive and "
                "every derived table (the log drops them too; `meta.erasure` names the erasure)."
                + SITES_WHO.format(role="owner"),
                [
                    SITE_ID_PATH,
                    _query(
                        "erase_events",
                        "true: erase the site's events received until now (cannot be undone); default false",
                        _string(enum=["true", "false"]),
                        False,
                    ),
                ],
                {"200": _answer("deleted", SITE_DELETED)},
            ),
        },
        "/api/v1/sites/goals": {
            "get": _operation(
                "The site's goals." + SITES_WHO.format(role="viewer"),
                [SITE_ID_QUERY, *PAGINATION],
                {"200": _answer("a page of goals", _listed("goals", _object(PLAUSIBLE_GOAL_PROPERTIES)))},
            ),
            "put": _operation(
                "Find the goal of this event or page, or create it." + SITES_WHO.format(role="admin"),
                [],
                {"200": _answer("the goal", _object({"domain": _string(), **PLAUSIBLE_GOAL_PROPERTIES}))},
                _body(
                    {
                        "site_id": TEXT,
                        "goal_type": _string(enum=list(sites_api.GOAL_TYPES)),
                        "event_name": NULLABLE_TEXT,
                        "page_path": NULLABLE_TEXT,
                        "display_name": NULLABLE_TEXT,
                    },
                    ["site_id", "goal_type"],
                ),
            ),
        },
        "/api/v1/sites/goals/{goal_id}": {
            "delete": _operation(
                "Delete a goal." + SITES_WHO.format(role="admin"),
                [{"name": "goal_id", "in": "path", "required": True, "schema": TEXT}],
                {"200": _answer("deleted", DELETED)},
                _body({"site_id": TEXT}, ["site_id"]),
            ),
        },
        "/api/v1/sites/shared-links": {
            "put": _operation(
                "Find the shared link of this name, or create it: its read-only dashboard URL, the same "
                "each time." + SITES_WHO.format(role="admin"),
                [],
                {"200": _answer("the link", _object({"name": _string(), "url": _string()})), **CONFLICT},
                _body({"site_id": TEXT, "name": TEXT}, ["site_id", "name"]),
            ),
        },
        "/api/v1/sites/custom-props": {
            "get": _operation(
                "The site's custom properties: the dashboard's Properties report offers only these; "
                "empty, every property the events carry. The stats APIs answer any property."
                + SITES_WHO.format(role="viewer"),
                [SITE_ID_QUERY],
                {"200": _answer("the site's list", CUSTOM_PROPERTIES)},
            ),
            "put": _operation(
                "Add a property to the site's list (already there: the same answer)."
                + SITES_WHO.format(role="admin"),
                [],
                {"200": _answer("listed", _object({"created": {"type": "boolean"}}))},
                _body({"site_id": TEXT, "property": PROPERTY_NAME}, ["site_id", "property"]),
            ),
        },
        "/api/v1/sites/custom-props/{property}": {
            "delete": _operation(
                "Take a property off the site's list (not listed: the same answer)."
                + SITES_WHO.format(role="admin"),
                [{"name": "property", "in": "path", "required": True, "schema": PROPERTY_NAME}],
                {"200": _answer("deleted", DELETED)},
                _body({"site_id": TEXT}, ["site_id"]),
            ),
        },
        "/api/v1/sites/guests": {
            "get": _operation(
                "The site's viewers and editors (Tally's admins), accepted or invited."
                + SITES_WHO.format(role="owner"),
                [SITE_ID_QUERY, *PAGINATION],
                {"200": _answer("a page of guests", _listed("guests", GUEST))},
            ),
            "put": _operation(
                "Find the guest or the invitation of this address, or invite them (editor: Tally's admin)."
                + SITES_WHO.format(role="owner"),
                [],
                {"200": _answer("the guest", GUEST_MADE)},
                _body({"site_id": TEXT, "email": TEXT, "role": GUEST_ROLE}, ["site_id", "email", "role"]),
            ),
        },
        "/api/v1/sites/guests/{email}": {
            "delete": _operation(
                "Remove the guest's role on the site, or their invitation." + SITES_WHO.format(role="owner"),
                [{"name": "email", "in": "path", "required": True, "schema": TEXT}],
                {"200": _answer("deleted", DELETED)},
                _body({"site_id": TEXT}, ["site_id"]),
            ),
        },
    }


# -- annotations (dashboard/http_api/annotations.py) -------------------------------------------

ANNOTATION = _object(
    {
        "id": _string(),
        "date": _string(format="date", nullable=True, description="a note on a date; null for an instant"),
        "datetime": _string(format="date-time", description="UTC; a date's midnight in the site's zone"),
        "text": _string(description="plain text, never markup"),
        "author": _string(),
        "kind": _string(enum=[*annotations.KINDS, *annotations.AUTOMATIC_KINDS]),
        "automatic": {"type": "boolean", "description": "Tally's own record: definitions, import, alert"},
    }
)
ANNOTATION_RANGE = [
    SITE,
    _query("period", "a preset as the stats API takes it (7d, 30d, month, …)", _string(), required=False),
    _query("from", "ISO-8601 date or date-time (the site's zone without an offset)", _string(), False),
    _query("to", "ISO-8601 date or date-time; default now", _string(), False),
    _query("date", "one day, YYYY-MM-DD, in the site's zone", _string(format="date"), False),
]


def annotations_paths() -> JSON:
    return {
        "/api/v1/annotations": {
            "get": _operation(
                "The site's annotations in the range (default: the last 30 days), oldest first: "
                "notes and deploys, and Tally's own (a definitions version applied, an import, an "
                "alert fired)." + WHO.format(role="viewer"),
                ANNOTATION_RANGE,
                {
                    "200": _answer(
                        "the annotations",
                        _object(
                            {
                                "site": _string(),
                                "from": _string(format="date-time"),
                                "to": _string(format="date-time"),
                                "annotations": {"type": "array", "items": ANNOTATION},
                            }
                        ),
                    )
                },
            ),
            "post": _operation(
                "Add a note on a `date` or at a `datetime` (UTC), e.g. a deploy from a CI pipeline "
                '(`"kind": "deploy"`). The site in the body or the query.' + WHO.format(role="admin"),
                [_query("site", "the site, unless the body names it", _string(minLength=1), required=False)],
                {"201": _answer("added", ANNOTATION)},
                _body(
                    {
                        "site": TEXT,
                        "date": _string(format="date"),
                        "datetime": _string(format="date-time"),
                        "text": _string(minLength=1, maxLength=annotations.MAX_TEXT),
                        "kind": _string(enum=list(annotations.KINDS), default="note"),
                    },
                    ["text"],
                ),
            ),
        },
        "/api/v1/annotations/{id}": {
            "delete": _operation(
                "Remove a note (Tally's own annotations stay)." + WHO.format(role="admin"),
                [
                    SITE,
                    {
                        "name": "id",
                        "in": "path",
                        "required": True,
                        "description": "as listed",
                        "schema": TEXT,
                    },
                ],
                {"200": _answer("removed", _object({"removed": ANNOTATION}))},
            ),
        },
    }
