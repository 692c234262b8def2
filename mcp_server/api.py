"""The client of Tally's HTTP APIs that every tool goes through: one GET or POST with the caller's
key, bounded in time, its JSON answer or a `ToolError` carrying the API's own message.

Only GET routes and the read-only POSTs (Plausible's `/api/v2/query`, `/api/v1/query`) are
called; which of them a key may call is the dashboard's to decide (dashboard/access.py), so a
refusal here is the API's refusal, word for word, with its status.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
from mcp.server.mcpserver.exceptions import ToolError

from mcp_server.settings import McpSettings

#: The paths a tool may POST to: the ones that only read.
READ_ONLY_POSTS = frozenset({"/api/v2/query", "/api/v1/query"})
#: How much of an unexpected (non-JSON) answer a message quotes.
QUOTED = 200


class TallyApi:
    """Tally's stats APIs at `settings.api_url`. A client per call: a tool call is one or two
    requests, and no connection outlives the key it was made for."""

    def __init__(self, settings: McpSettings, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.settings = settings
        self._transport = transport

    async def get(self, key: str, path: str, params: Mapping[str, str]) -> Any:
        return await self._request(key, "GET", path, params=dict(params))

    async def post(self, key: str, path: str, body: Mapping[str, Any]) -> Any:
        if path not in READ_ONLY_POSTS:
            raise ValueError(f"{path} is not a read-only route")  # a bug here, never a caller's doing
        return await self._request(key, "POST", path, json=dict(body))

    async def _request(self, key: str, method: str, path: str, **request: Any) -> Any:
        url = f"{self.settings.api_url}{path}"
        try:
            async with httpx.AsyncClient(
                timeout=self.settings.timeout_s, transport=self._transport, follow_redirects=False
            ) as client:
                response = await client.request(
                    method, url, headers={"Authorization": f"Bearer {key}"}, **request
                )
        except httpx.TimeoutException:
            raise ToolError(
                f"the dashboard at {self.settings.api_url} did not answer within "
                f"{self.settings.timeout_s:g} s; ask for a shorter period or try again"
            ) from None
        except httpx.InvalidURL:
            raise ToolError(f"TALLY_MCP_API_URL {self.settings.api_url!r} is not a URL") from None
        except httpx.TransportError:
            raise ToolError(
                f"the dashboard at {self.settings.api_url} is not reachable; is Tally running (tally up)?"
            ) from None
        return answer(response)


def answer(response: httpx.Response) -> Any:
    """The JSON of a 2xx answer; otherwise a ToolError with the status and the API's message."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.is_success:
        if body is None:
            raise ToolError(f"the dashboard answered {response.status_code} without JSON")
        return body
    message = body.get("error") if isinstance(body, dict) else None
    if not isinstance(message, str) or not message:
        message = response.text[:QUOTED].strip() or response.reason_phrase
    reason = {401: "key refused", 403: "not allowed", 404: "not found", 429: "too many requests"}.get(
        response.status_code, "refused" if response.status_code < 500 else "failed"
    )
    raise ToolError(f"{response.status_code} {reason}: {message}")
