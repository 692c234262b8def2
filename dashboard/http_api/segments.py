"""Saved segments over HTTP (`/api/v1/segments`), on the stats API's blueprint and its Bearer keys.

Listing is reading: any key that may read the site. Creating, changing and deleting a segment
is a site setting, as in the dashboard's Segments panel: the operator's key, or a team member's
key with scope `manage` whose user is admin or owner of the site now (looked up on every request,
so a role taken away applies at once); a read key or a viewer's key gets 403.
Bad input is a 400 naming the field.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify, request

from dashboard.http_api.authorisation import change_refusal
from dashboard.http_api.parameters import Arguments, BadParameter
from dashboard.http_api.parameters import site as site_parameter
from dashboard.segments import checked
from dashboard.store import ClientFactory
from storage import segments as store
from storage import sites
from storage.sites import InvalidDomain, normalise
from tally.refusal import Refused

EXAMPLE = '[["is", "visit:country", ["DE"]]]'


class SegmentRefused(Refused):
    """A request about segments refused for more than its input: an unknown site or segment,
    a key that may not change them, a name taken (its `kind` says which)."""


def segment_json(segment: store.Segment) -> dict[str, Any]:
    return {"id": segment.id, "name": segment.name, "filters": segment.filters}


def register_segments_api(api: Blueprint, clients: ClientFactory) -> None:
    def asked_site(registered: bool = True) -> str:
        """The site asked about; for a change, one of the registry (404 otherwise)."""
        arguments = Arguments.parse(request.args.to_dict(flat=False))
        try:
            site = normalise(site_parameter(arguments))
        except InvalidDomain:
            raise BadParameter("site", "not a site name") from None
        if registered:
            sites.registered(clients(), site, lambda message: SegmentRefused(message, kind="not_found"))
        return site

    def may_change(site: str) -> None:
        refusal = change_refusal(clients, site, "the segments")
        if refusal is not None:
            raise SegmentRefused(refusal, kind="forbidden")

    def body() -> dict[str, Any]:
        document = request.get_json(silent=True)
        if not isinstance(document, dict):
            raise BadParameter("body", 'a JSON object, e.g. {"name": "Germany", "filters": [...]}')
        unknown = sorted(set(document) - {"name", "filters"})
        if unknown:
            raise BadParameter(unknown[0], "unknown field; fields: name, filters")
        return document

    def name_of(document: dict[str, Any]) -> str:
        name = document.get("name")
        if not isinstance(name, str):
            raise BadParameter("name", "required, a string")
        try:
            return store.checked_name(name)
        except store.InvalidSegment as refused:
            raise BadParameter("name", str(refused)) from None

    def filters_of(document: dict[str, Any]) -> list[Any]:
        filters = document.get("filters")
        if not isinstance(filters, list) or not filters:
            raise BadParameter(
                "filters", 'required, a list of filters, e.g. [["is", "visit:country", ["DE"]]]'
            )
        try:
            checked(filters)
        except store.InvalidSegment as refused:
            raise BadParameter("filters", str(refused).removeprefix("filters: ")) from None
        return filters

    def asked_id() -> int:
        text = request.args.get("id") or ""
        if not (text.isascii() and text.isdigit() and len(text) <= 9):
            raise BadParameter("id", "required, a segment's id (a whole number, see GET /api/v1/segments)")
        return int(text)

    def found(site: str, segment_id: int) -> store.Segment:
        try:
            return store.find_segment(clients(), site, segment_id)
        except store.InvalidSegment as refused:
            raise SegmentRefused(f"id: {refused}", kind="not_found") from None

    @api.get("/segments")
    def segments_list() -> Response:
        site = asked_site(registered=False)  # a site without segments, registered or not: []
        return jsonify([segment_json(segment) for segment in store.list_segments(clients(), site)])

    @api.post("/segments")
    def segments_add() -> Response:
        site = asked_site()
        may_change(site)
        document = body()
        name, filters = name_of(document), filters_of(document)
        try:
            added = store.add_segment(clients(), site, name, filters)
        except store.TooManySegments as refused:
            raise BadParameter("site", str(refused).removeprefix("site: ")) from None
        except store.InvalidSegment as refused:  # the name is taken
            raise SegmentRefused(f"name: {refused}", kind="conflict") from None
        return jsonify(segment_json(added)), 201  # type: ignore[return-value]

    @api.patch("/segments")
    def segments_change() -> Response:
        site = asked_site()
        may_change(site)
        segment_id, document = asked_id(), body()
        segment = found(site, segment_id)
        # Everything checked before anything is written: a refused change changes nothing.
        filters = filters_of(document) if "filters" in document else None
        if "name" in document:
            try:
                segment = store.rename_segment(clients(), site, segment.id, name_of(document))
            except store.InvalidSegment as refused:
                raise SegmentRefused(f"name: {refused}", kind="conflict") from None
        if filters is not None:
            segment = store.replace_filters(clients(), site, segment.id, filters)
        return jsonify(segment_json(segment))

    @api.delete("/segments")
    def segments_remove() -> Response:
        site = asked_site()
        may_change(site)
        removed = store.remove_segment(clients(), site, str(found(site, asked_id()).id))
        return jsonify(segment_json(removed))
