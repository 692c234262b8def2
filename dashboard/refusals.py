"""How the HTTP APIs answer a refusal (tally/refusal.py): the status its kind means, and the
message as `{"error": …}` — the shape both Tally's API (/api/v1) and the Plausible-compatible
ones (/api/v2, v1 with site_id) answer in; each refusal's message is already in its door's
wording. Each blueprint registers this once instead of a handler per exception class."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from tally.refusal import Kind, Refused

STATUS: dict[Kind, int] = {
    "invalid": 400,
    "forbidden": 403,
    "not_found": 404,
    "conflict": 409,
    "not_configured": 503,  # the operator has to set something up first: not the caller's mistake
}


def error(status: int, message: str) -> Response:
    """The APIs' answer to anything but success: `{"error": message}`."""
    response = jsonify({"error": message})
    response.status_code = status
    return response


def refused_answer(refused: Refused) -> Response:
    return error(STATUS[refused.kind], str(refused))


def answer_refusals(api: Blueprint) -> None:
    """Every Refused raised while `api` answers becomes its status and message."""
    api.register_error_handler(Refused, refused_answer)
