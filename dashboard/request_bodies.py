"""How large a request body the dashboard reads, per route, decided before anything reads it.

Three bounds, outermost first:
- the proxy (deploy/Caddyfile `request_body { max_size }`) and the server (waitress
  `max_request_body_size`, TALLY_DASHBOARD_MAX_BODY_BYTES, dashboard/app.py) refuse anything
  larger than the largest body any route takes: the base64 of a 20 MiB import;
- this middleware refuses, by Content-Length and before the guards parse a callback's JSON (at
  several times its size in memory), anything larger than its route takes: 1 MiB for every Dash
  callback and JSON API, the import limit only for the two routes that take files
  (`/api/v1/imports`, and the Settings panel's upload callback);
- Flask's MAX_CONTENT_LENGTH, for a body without a Content-Length.
Refusals are 413 `{"error": "body: …"}`.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask, Response, jsonify

from dashboard.http_api.imports import MAX_UPLOAD_BYTES
from tally.settings import Settings

MAX_BODY_BYTES = 2**20  # a callback's or an API's JSON: filters, a period, a goal, a rule
CALLBACK_PATH = "/_dash-update-component"
IMPORTS_PATH = "/api/v1/imports"
# The upload callback's body is JSON holding the file as a base64 data URL (4/3 of its size)
# and the callback's other inputs.
UPLOAD_CALLBACK_BYTES = MAX_UPLOAD_BYTES * 4 // 3 + MAX_BODY_BYTES
# The Settings panel's upload (dashboard/site_settings_panel.py): its callback is the one whose
# outputs include the upload's own `contents` (emptied after each file).
UPLOAD_OUTPUT = "import-upload.contents"
# Dash's renderer sends {"output": …} first; the prefix read to recognise the upload callback.
PREFIX_BYTES = 4096

Environ = dict[str, Any]
WsgiApp = Callable[[Environ, Callable[..., Any]], Iterable[bytes]]


class BodyLimitMiddleware:
    def __init__(self, app: WsgiApp, upload_output: str | None, server_limit: int) -> None:
        self.app = app
        self.server_limit = server_limit
        # What the upload callback's body starts with, exactly as the renderer writes it.
        self.upload_prefix = (
            None
            if upload_output is None
            else json.dumps({"output": upload_output}, separators=(",", ":"))[:-1].encode() + b","
        )

    def __call__(self, environ: Environ, start_response: Callable[..., Any]) -> Iterable[bytes]:
        length = content_length(environ)
        if length is None or length <= MAX_BODY_BYTES:
            return self.app(environ, start_response)
        path = environ.get("PATH_INFO", "")
        if path == IMPORTS_PATH:
            allowed, hint = MAX_UPLOAD_BYTES, "; larger exports: tally import"
        elif path == CALLBACK_PATH and self.is_upload(environ, length):
            allowed, hint = UPLOAD_CALLBACK_BYTES, "; larger exports: tally import"
        else:
            allowed, hint = MAX_BODY_BYTES, ""
        allowed = min(allowed, self.server_limit)
        if length > allowed:
            return too_large(f"body: larger than {mebibytes(allowed)} for this route{hint}")(
                environ, start_response
            )
        return self.app(environ, start_response)

    def is_upload(self, environ: Environ, length: int) -> bool:
        """Whether this callback request is the upload's: its first bytes say so. The prefix
        read is put back in front of the rest, so the callback sees the body whole."""
        if self.upload_prefix is None:
            return False
        stream = environ["wsgi.input"]
        prefix = stream.read(min(PREFIX_BYTES, length))
        environ["wsgi.input"] = io.BufferedReader(Replayed(prefix, stream))  # type: ignore[arg-type]
        return prefix.startswith(self.upload_prefix)


class Replayed(io.RawIOBase):
    """`prefix`, then what is left of `stream`."""

    def __init__(self, prefix: bytes, stream: Any) -> None:
        self.prefix = prefix
        self.stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.prefix:
            count = min(len(buffer), len(self.prefix))
            buffer[:count] = self.prefix[:count]
            self.prefix = self.prefix[count:]
            return count
        data = self.stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def content_length(environ: Environ) -> int | None:
    try:
        return int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None  # the server refuses such a request before this runs


def too_large(message: str) -> WsgiApp:
    body = json.dumps({"error": message}).encode()

    def answer(environ: Environ, start_response: Callable[..., Any]) -> Iterable[bytes]:
        # The unread body stays unread: the server discards it (waitress has it buffered already).
        start_response(
            "413 Request Entity Too Large",
            [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
        )
        return [body]

    return answer


def mebibytes(size: int) -> str:
    return f"{size / 2**20:g} MiB"


def install_body_limits(server: Flask, settings: Settings, callback_outputs: Iterable[str]) -> None:
    """`callback_outputs`: the app's callback outputs, to find the upload's."""
    upload = next((output for output in callback_outputs if UPLOAD_OUTPUT in output), None)
    server.config["MAX_CONTENT_LENGTH"] = settings.dashboard_max_body_bytes
    server.wsgi_app = BodyLimitMiddleware(server.wsgi_app, upload, settings.dashboard_max_body_bytes)

    @server.errorhandler(413)
    def body_too_large(_error: Exception) -> Response:
        return refusal(settings.dashboard_max_body_bytes)


def refusal(limit: int) -> Response:
    """The 413 a Flask route or guard answers for a body over `limit`."""
    response = jsonify({"error": f"body: larger than {mebibytes(limit)}"})
    response.status_code = 413
    return response
