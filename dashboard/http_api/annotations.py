"""`/api/v1/annotations`: notes on a site's timeline (storage/annotations.py) over HTTP — what the
Overview's chart draws, the Settings view's Annotations section and `tally annotations` do.

GET lists a range's annotations, the automatic ones included (any member of the site; a key
scoped to it). POST adds a note or a deploy (a CI pipeline's: `{"site", "datetime", "text",
"kind": "deploy"}`) and DELETE /annotations/<id> removes one: an admin's or the owner's key
with scope manage. Keys, scopes, refusals and audit rows as the other management endpoints
(dashboard/http_api/manage.py): 400 naming the field, 403, 404.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from flask import Blueprint, Response, jsonify

from dashboard.http_api import parameters
from dashboard.http_api.manage import actor_of, audit, body, query, site_with_role_of
from dashboard.http_api.parameters import Arguments, BadParameter
from dashboard.store import ClientFactory
from storage import annotations as store
from storage.sites import site_timezone
from tally.settings import Settings

RANGE_PARAMETERS = ("site", "period", "from", "to", "date")


def register_annotations_api(api: Blueprint, settings: Settings, clients: ClientFactory, clock: Any) -> None:
    @api.get("/annotations")
    def annotations_list() -> Response:
        args = query(RANGE_PARAMETERS)
        site = site_with_role_of(clients, args, "viewer", change=False)
        start, end = asked_range(args, site)
        found = store.list_annotations(clients(), site, start, end)
        return jsonify(
            {
                "site": site,
                "from": iso(start),
                "to": iso(end),
                "annotations": [annotation_json(a) for a in found],
            }
        )

    @api.post("/annotations")
    def annotations_add() -> tuple[Response, int]:
        args = query(("site",))
        fields = body(("site", "date", "datetime", "text", "kind"))
        if "site" in fields and "site" in args and fields["site"] != args["site"]:
            raise BadParameter("site", "given in the query and the body, differently")
        if "site" in fields:
            if not isinstance(fields["site"], str):
                raise BadParameter("site", "a site name")
            args = {"site": fields["site"]}
        site = site_with_role_of(clients, args, "admin", change=True)
        when = moment(fields)
        text = store.clean_text(fields.get("text"))
        kind = store.clean_kind(fields.get("kind", "note"))
        note = store.add(clients(), site, when, text, actor_of(settings).email, kind)
        audit(settings, clients, "annotation_added", f"{site} {note.id} {kind} {iso(note.at)}", site)
        return jsonify(annotation_json(note)), 201

    @api.delete("/annotations/<annotation_id>")
    def annotations_remove(annotation_id: str) -> Response:
        site = site_with_role_of(clients, query(("site",)), "admin", change=True)
        removed = store.remove(clients(), site, annotation_id)
        audit(settings, clients, "annotation_removed", f"{site} {removed.id} {removed.kind}", site)
        return jsonify({"removed": annotation_json(removed)})

    def asked_range(args: dict[str, str], site: str) -> tuple[datetime, datetime]:
        """`date` (that day in the site's zone), a `period` preset or `from`/`to` (default: the
        last 30 days), as the stats API reads them."""
        timezone = site_timezone(clients(), site)
        if "date" in args:
            if {"period", "from", "to"} & set(args):
                raise BadParameter("date", "give either date, period or from/to")
            return store.day_range(store.parse_day(args["date"]), timezone)
        given = Arguments({name: value for name, value in args.items() if name != "site"})
        window = parameters.window(given, clock(), timezone)
        return window.start, window.end


def moment(fields: dict[str, Any]) -> Any:
    """The body's `date` (YYYY-MM-DD) or `datetime` (ISO-8601, UTC), exactly one."""
    if ("date" in fields) == ("datetime" in fields):
        raise BadParameter("date", "give a date (YYYY-MM-DD) or a datetime (ISO-8601, UTC), one of them")
    if "date" in fields:
        return store.parse_day(fields["date"])
    return store.parse_instant(fields["datetime"])


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def annotation_json(note: store.Annotation) -> dict[str, object]:
    return {
        "id": note.id,
        "date": note.day.isoformat() if note.day else None,
        "datetime": iso(note.at),
        "text": note.text,
        "author": note.author,
        "kind": note.kind,
        "automatic": note.automatic,
    }
