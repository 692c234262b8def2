"""Imported history over the stats API (`/api/v1/imports`), beside `tally import` and the
dashboard's Import history panel, through the same storage/imports.py functions.

- `POST /api/v1/imports?site=SITE&origin=plausible|ga4[&name=FILE]` (`origin` is the CLI's
  `--from`; `from` is a range's start everywhere else in this API): the body is the export's
  bytes as they are (Plausible's zip or one of its CSVs, GA4's CSV or a zip of them), up to
  MAX_UPLOAD_BYTES like the dashboard's upload (bigger ones: `tally import`). `name` is the
  file's name: Plausible's CSVs are told apart by it (`imported_pages_…csv`), so a single CSV
  needs it; a zip's members carry their own. 201 with what was written, 200 when every file
  was imported before (the same file twice changes nothing).
- `GET /api/v1/imports?site=SITE`: the files the site's history holds (each with its `id`), and
  from which day the site's own events are counted instead.
- `DELETE /api/v1/imports?site=SITE&file=NAME_OR_ID`: takes one imported file out of the history
  (its id, or its name when one file of the site has it); 200 with the file removed.

Who may upload or remove: the operator's key, or a team member's key with scope `manage`, scoped to the
site, whose user is an admin or owner of it (an import changes what the site's reports show, as
the admin-only Import panel does); a read key or a viewer's key may list, not change (403).
Each upload and removal is written to the audit log.
"""

from __future__ import annotations

import zipfile
from io import BytesIO
from typing import Any

from flask import Blueprint, Response, jsonify, request

from dashboard.http_api.authorisation import caller, change_refusal
from dashboard.http_api.parameters import MAX_SITE_LENGTH, BadParameter
from dashboard.refusals import error
from dashboard.store import ClientFactory
from storage import imports, sites, users
from storage.calendar import zone
from storage.sites import InvalidDomain, normalise, site_timezone
from tally.refusal import Refused

MAX_UPLOAD_BYTES = 20 * 1024 * 1024  # as the dashboard's upload; bigger exports: `tally import`
MAX_NAME_LENGTH = 255
UPLOAD_PARAMETERS = ("site", "origin", "name")
LIST_PARAMETERS = ("site",)
REMOVE_PARAMETERS = ("site", "file")


def register_imports_api(api: Blueprint, clients: ClientFactory) -> None:
    """Add the imports endpoints to the stats API's blueprint (its key check and errors)."""

    @api.get("/imports")
    def list_imports() -> Response:
        site = site_name(arguments(LIST_PARAMETERS))  # like the stats: any site, empty if unknown
        client = clients()
        native_from = imports.native_first_day(client, site, zone(site_timezone(client, site)))
        return jsonify(
            {
                "site": site,
                "imports": [record_json(record) for record in imports.list_imports(client, site)],
                "native_from": native_from.isoformat() if native_from else None,
            }
        )

    @api.post("/imports")
    def upload() -> Response:
        given = arguments(UPLOAD_PARAMETERS)
        site = registered(clients, given)
        origin = given.get("origin", "")
        if origin not in imports.ORIGINS:
            raise BadParameter("origin", f"required, one of {', '.join(imports.ORIGINS)}")
        may_import(clients, site)
        data = request.stream.read(MAX_UPLOAD_BYTES + 1)  # bounded, with or without Content-Length
        if len(data) > MAX_UPLOAD_BYTES:
            return error(413, f"body: larger than {MAX_UPLOAD_BYTES // 2**20} MiB; use tally import")
        if not data:
            raise BadParameter("body", "empty; send the export file's bytes")
        try:
            files = imports.read_bytes(file_name(given, data), data, origin)  # type: ignore[arg-type]
            result = imports.import_files(clients(), site, files, origin)  # type: ignore[arg-type]
        except imports.InvalidImport as invalid:
            raise BadParameter("body", str(invalid)) from None
        audit(clients, site, result)
        answer = jsonify(result_json(result))
        answer.status_code = 201 if result.imported else 200
        return answer

    @api.delete("/imports")
    def remove() -> Response:
        given = arguments(REMOVE_PARAMETERS)
        site = registered(clients, given)
        which = given.get("file", "").strip()
        if not which:
            raise BadParameter("file", "required: the imported file's name or id (GET /api/v1/imports)")
        may_import(clients, site)
        try:
            record = imports.remove_import(clients(), site, which)
        except imports.InvalidImport as unknown:
            raise BadParameter("file", str(unknown)) from None
        record_change(clients, "import_removed", f"{site}: {record.file_name} ({record.import_id})", site)
        return jsonify({"site": site, "removed": record_json(record)})


def arguments(known: tuple[str, ...]) -> dict[str, str]:
    """The query string, each parameter at most once and known."""
    args = request.args.to_dict(flat=False)
    for name, values in args.items():
        if name not in known:
            raise BadParameter(name, f"unknown parameter; known: {', '.join(known)}")
        if len(values) > 1:
            raise BadParameter(name, "given more than once")
    return {name: values[0] for name, values in args.items()}


def registered(clients: ClientFactory, given: dict[str, str]) -> str:
    return sites.registered(clients(), site_name(given), _bad_site)


def _bad_site(message: str) -> BadParameter:
    return BadParameter("site", message.removeprefix("site: "))


def site_name(given: dict[str, str]) -> str:
    text = given.get("site", "").strip()
    if not text:
        raise BadParameter("site", "required, e.g. site=example.com")
    try:
        site = normalise(text) if len(text) <= MAX_SITE_LENGTH else ""
    except InvalidDomain:
        site = ""
    if not site:
        raise BadParameter("site", "not a site name")
    return site


def may_import(clients: ClientFactory, site: str) -> None:
    """Refused (403) for a team member's key that may not import into `site` (api_access.change_refusal)."""
    refusal = change_refusal(clients, site, "the imported history")
    if refusal is not None:
        raise Refused(refusal, kind="forbidden")


def file_name(given: dict[str, str], data: bytes) -> str:
    """The uploaded file's name: `name`, or a neutral one saying whether it is a zip."""
    name = given.get("name")
    if name is None:
        return "upload.zip" if zipfile.is_zipfile(BytesIO(data)) else "upload.csv"
    if not name or len(name) > MAX_NAME_LENGTH or not name.isprintable() or "/" in name or "\\" in name:
        raise BadParameter("name", "a file name without folders, e.g. imported_pages_20260101_20261031.csv")
    return name


def audit(clients: ClientFactory, site: str, result: imports.ImportResult) -> None:
    detail = f"{site}: {len(result.imported)} file(s) imported, {len(result.already)} already"
    record_change(clients, "import", detail, site)


def record_change(clients: ClientFactory, action: str, detail: str, site: str) -> None:
    """An audit-log line for a change to a site's imported history, naming who made it."""
    access = caller()
    users.record(
        clients(),
        action,
        access.email if access else "operator",
        "ok",
        address=request.remote_addr or "",
        key_id=access.key_id if access else "",
        detail=detail,
        site=site,
    )


def record_json(record: imports.ImportRecord) -> dict[str, Any]:
    return {
        "id": record.import_id,
        "file": record.file_name,
        "origin": record.origin,
        "first_day": record.first_day.isoformat(),
        "last_day": record.last_day.isoformat(),
        "rows": record.row_count,
    }


def result_json(result: imports.ImportResult) -> dict[str, Any]:
    overlap = result.overlap
    return {
        "site": result.site,
        "imported": [
            {
                "file": imported.name,
                "first_day": days[0].isoformat(),
                "last_day": days[1].isoformat(),
                "rows": len(imported.rows),
            }
            for imported in result.imported
            if (days := imported.days) is not None
        ],
        "already_imported": result.already,
        "not_used": {"first_day": overlap[0].isoformat(), "last_day": overlap[1].isoformat()}
        if overlap
        else None,
        "note": result.overlap_note(),
    }
