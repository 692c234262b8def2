"""The two ways `tally mcp` serves its tools.

- stdio (the default; an MCP client starts `tally mcp` itself): one caller, whose key is
  TALLY_MCP_KEY (mcp_server/settings.py).
- streamable HTTP (`--transport http`, TALLY_MCP_HOST:TALLY_MCP_PORT, path `/mcp`): many callers,
  each request carrying its own `Authorization: Bearer <key>`; a request without one is answered
  401 before it reaches the protocol. The server holds no key of its own.
"""

from __future__ import annotations

import json
from typing import Literal

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_server.api import TallyApi
from mcp_server.settings import McpSettings, stdio_key
from mcp_server.tools import build_server
from tally.settings import Settings

Transport = Literal["stdio", "http"]
PATH = "/mcp"
BEARER = "bearer "
#: The largest request body taken: a JSON-RPC message with a tool's arguments is a few KiB.
MAX_BODY_BYTES = 1 << 20
#: Connections served at once; past it uvicorn answers 503 (each tool call may wait on the
#: dashboard for TALLY_MCP_TIMEOUT_S).
MAX_CONNECTIONS = 64
#: Idle connections are kept longer than the proxy keeps them (deploy/Caddyfile: 15 s), so the
#: proxy never sends a request on a connection this server is just closing (uvicorn's default: 5 s).
KEEP_ALIVE_S = 20


def http_key(ctx: Context) -> str:
    """The key of the HTTP request this tool call came in (never another request's)."""
    headers = ctx.headers or {}
    authorization = headers.get("authorization", "")
    if not authorization.lower().startswith(BEARER) or not authorization[len(BEARER) :].strip():
        raise ToolError("send Authorization: Bearer <Tally API key> with every request")
    return authorization[len(BEARER) :].strip()


def stdio_server(settings: Settings) -> MCPServer:
    key = stdio_key(settings)  # MissingKey before anything starts
    return build_server(TallyApi(McpSettings.from_settings(settings)), lambda _ctx: key)


def http_server(settings: Settings) -> MCPServer:
    return build_server(TallyApi(McpSettings.from_settings(settings)), http_key)


class BearerRequired:
    """ASGI middleware: a request without `Authorization: Bearer …` gets 401 and a line saying
    what to send; the key itself is checked by the dashboard's APIs on every tool call."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not has_bearer(scope):
            body = json.dumps({"error": "send Authorization: Bearer <Tally API key>"}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="tally"'),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


class BodyLimit:
    """ASGI middleware: a request body past MAX_BODY_BYTES (declared, or as it arrives) gets 413.
    The body is read here, at most the limit, and handed on whole: the SDK would otherwise read
    any body into memory."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if declared_length(scope) > self.limit:
            await answer_413(send, self.limit)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left before its body was in
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                await answer_413(send, self.limit)
                return
            if not message.get("more_body", False):
                break
        first: Message | None = {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        async def replay() -> Message:
            nonlocal first
            if first is not None:
                message, first = first, None
                return message
            return await receive()  # after the body: the disconnect, when it comes

        await self.app(scope, replay, send)


def declared_length(scope: Scope) -> int:
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            return int(value) if value.isdigit() else 0
    return 0


async def answer_413(send: Send, limit: int) -> None:
    body = json.dumps({"error": f"body: over {limit} bytes"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def has_bearer(scope: Scope) -> bool:
    for name, value in scope.get("headers", []):
        if name.lower() == b"authorization":
            text = value.decode("latin-1")
            return text.lower().startswith(BEARER) and bool(text[len(BEARER) :].strip())
    return False


def serve(settings: Settings, transport: Transport, host: str | None = None, port: int | None = None) -> None:
    """Run until stopped (stdin closed, or Ctrl-C / SIGTERM over HTTP)."""
    if transport == "stdio":
        stdio_server(settings).run("stdio")
        return
    config = McpSettings.from_settings(settings)
    app = http_server(settings).streamable_http_app(streamable_http_path=PATH, host=host or config.host)
    server = uvicorn.Server(
        uvicorn.Config(
            BodyLimit(BearerRequired(app)),
            host=host or config.host,
            port=port or config.port,
            log_level="warning",
            limit_concurrency=MAX_CONNECTIONS,
            timeout_keep_alive=KEEP_ALIVE_S,
        )
    )
    anyio.run(server.serve)
