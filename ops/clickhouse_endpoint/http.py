"""The HTTP interface: routes, authentication, limits and responses, as clickhouse-server answers them."""

from __future__ import annotations

import json
import logging
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.from_thread
import anyio.to_thread
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from ops.clickhouse_endpoint.body import BodyDecoder, RequestBody, form_fields
from ops.clickhouse_endpoint.credentials import Credentials
from ops.clickhouse_endpoint.engine import Engine
from ops.clickhouse_endpoint.errors import ClickHouseError, ErrorCode, body_too_large
from ops.clickhouse_endpoint.request import HttpQuery

logger = logging.getLogger(__name__)

#: A request body above this many bytes, as sent or once decompressed, is refused with 413.
MAX_BODY_BYTES = 256 * 1024 * 1024
#: Statements running in the engine at once; further requests wait for a slot. Each query
#: already spreads over the machine's cores (max_threads) on its own.
MAX_CONCURRENT_QUERIES = 8


_BINARY_FORMATS = frozenset({"native", "parquet", "arrow", "arrowstream", "orc", "avro", "msgpack", "npy"})


def _content_type(output_format: str | None) -> str:
    name = (output_format or "").lower()
    if name.startswith("json"):
        return "application/json; charset=UTF-8"
    if name.startswith(("tabseparated", "tsv")):
        return "text/tab-separated-values; charset=UTF-8"
    if name.startswith("csv"):
        return "text/csv; charset=UTF-8"
    if name in _BINARY_FORMATS or name.startswith("rowbinary"):
        return "application/octet-stream"
    return "text/plain; charset=UTF-8"


class HttpInterface:
    """ClickHouse's HTTP interface (`/` and `/ping`) in front of the engine."""

    def __init__(self, engine: Engine, account: Credentials, port: int, max_body_bytes: int) -> None:
        self._engine = engine
        self._account = account
        # The names this endpoint is reached by: its loopback address and port. A browser sends
        # any other (a DNS-rebinding attacker's domain resolving to 127.0.0.1, say).
        self._own_hosts = frozenset(f"{address}:{port}" for address in ("127.0.0.1", "localhost", "[::1]"))
        self._max_body_bytes = max_body_bytes
        self._limiter: anyio.CapacityLimiter | None = None
        self._display_name = socket.gethostname()

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        await anyio.to_thread.run_sync(self._engine.open)
        self._limiter = anyio.CapacityLimiter(MAX_CONCURRENT_QUERIES)
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(self._engine.close)

    async def ping(self, request: Request) -> Response:
        try:
            self._check_caller(request.headers)
        except ClickHouseError as error:
            return self._error_response(error, str(uuid.uuid4()))
        return PlainTextResponse("Ok.\n")

    async def query(self, request: Request) -> Response:
        query_id = request.query_params.get("query_id") or str(uuid.uuid4())
        try:
            self._check_caller(request.headers)
            if request.method == "GET" and not request.query_params:
                return PlainTextResponse("Ok.\n")  # ClickHouse's answer to a bare GET /
            url_parameters = dict(request.query_params)
            self._authenticate(request.headers, url_parameters)
            self._check_declared_length(request.headers)
            if request.headers.get("content-type", "").startswith("multipart/form-data"):
                url_parameters |= form_fields(request.headers["content-type"], await self._read_form(request))
                receive: Callable[[], bytes | None] = _nothing
            else:
                receive = self._body_receiver(request)
            query = HttpQuery.from_request(request.method, url_parameters, request.headers)
            body = RequestBody(
                receive,
                BodyDecoder(request.headers.get("content-encoding", "").strip().lower()),
                self._max_body_bytes,
            )
            outcome = await anyio.to_thread.run_sync(self._engine.execute, query, body, limiter=self._limiter)
        except ClickHouseError as error:
            self._log(error, query_id)
            return self._error_response(error, query_id)
        headers = self._headers(query_id, query.settings.get("session_timezone"))
        headers["X-ClickHouse-Summary"] = json.dumps(outcome.summary, separators=(",", ":"))
        if outcome.output_format is not None:
            headers["X-ClickHouse-Format"] = outcome.output_format
        return Response(outcome.body, headers=headers, media_type=_content_type(outcome.output_format))

    def _check_caller(self, headers: Headers) -> None:
        """Refuse what web pages can send: a page's no-cors POST needs no preflight, and once
        DNS rebinding points the page's own domain at 127.0.0.1 it is even same-origin."""
        if "origin" in headers:
            # clickhouse-connect and every other ClickHouse client never send one; browsers do.
            raise ClickHouseError.of(
                ErrorCode.ACCESS_DENIED,
                "Requests from web pages (with an Origin header) are refused: "
                "this endpoint serves Tally's own components only",
            )
        host = headers.get("host", "")
        if host.lower() not in self._own_hosts:
            raise ClickHouseError.of(
                ErrorCode.ACCESS_DENIED,
                f"Host '{host[:100]}' is not this endpoint's address "
                f"(one of {', '.join(sorted(self._own_hosts))})",
            )

    def _authenticate(self, headers: Headers, url_parameters: Mapping[str, str]) -> None:
        presented = Credentials.presented(headers, url_parameters)
        if not self._account.matches(presented):
            raise ClickHouseError.of(
                ErrorCode.AUTHENTICATION_FAILED,
                f"{presented.user}: Authentication failed: password is incorrect, "
                "or there is no user with such name",
            )

    def _check_declared_length(self, headers: Headers) -> None:
        # Refused before reading a byte; a chunked body is counted as it arrives (RequestBody).
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._max_body_bytes:
            raise body_too_large(self._max_body_bytes)

    def _body_receiver(self, request: Request) -> Callable[[], bytes | None]:
        """Hands the engine's worker thread the next chunk of the body from the event loop."""
        chunks = request.stream()

        async def next_chunk() -> bytes | None:
            try:
                return await anext(chunks)
            except StopAsyncIteration:
                return None

        return lambda: anyio.from_thread.run(next_chunk)

    async def _read_form(self, request: Request) -> bytes:
        form = bytearray()
        async for chunk in request.stream():
            form += chunk
            if len(form) > self._max_body_bytes:
                raise body_too_large(self._max_body_bytes)
        return bytes(form)

    def _headers(self, query_id: str, session_timezone: str | None = None) -> dict[str, str]:
        return {
            "X-ClickHouse-Query-Id": query_id,
            "X-ClickHouse-Server-Display-Name": self._display_name,
            "X-ClickHouse-Timezone": session_timezone or self._engine.timezone,
        }

    def _error_response(self, error: ClickHouseError, query_id: str) -> Response:
        text = error.text if "(version " in error.text else f"{error.text} (version {self._engine.version})"
        headers = self._headers(query_id) | {"X-ClickHouse-Exception-Code": str(error.code)}
        return PlainTextResponse(text + "\n", status_code=error.http_status, headers=headers)

    def _log(self, error: ClickHouseError, query_id: str) -> None:
        if error.code == ErrorCode.STD_EXCEPTION:
            # Not an answer from the engine but a failure of this endpoint (or of chDB's binding).
            logger.error("query %s failed", query_id, exc_info=error.__cause__ or error)
        else:
            # What the client was told, in one line: the statement's own errors are the client's to fix.
            logger.warning("query %s: %s", query_id, error.text.partition("\n")[0][:300])


def _nothing() -> None:
    return None


def build_app(
    data_dir: Path, user: str, password: str, *, port: int, max_body_bytes: int = MAX_BODY_BYTES
) -> Starlette:
    """The endpoint as an ASGI app, served on loopback at `port`; the engine on `data_dir` is
    open while the app runs."""
    if not password:
        # An empty password is what an anonymous request presents.
        raise ValueError("the ClickHouse endpoint needs a password")
    interface = HttpInterface(Engine(data_dir), Credentials(user, password), port, max_body_bytes)
    return Starlette(
        routes=[
            Route("/ping", interface.ping, methods=["GET"]),
            Route("/", interface.query, methods=["GET", "POST"]),
        ],
        lifespan=interface.lifespan,
    )
