"""What `tally mcp` needs from the settings (tally/settings.py, `TALLY_MCP_*`): where the
dashboard's APIs are, how long to wait for them, how many rows an answer may hold, and, over
stdio, the caller's key."""

from __future__ import annotations

from dataclasses import dataclass

from tally.settings import Settings

#: The variable that holds the caller's key over stdio (an MCP client's `env`).
STDIO_KEY_VARIABLE = "TALLY_MCP_KEY"


class MissingKey(Exception):
    """No key to call the APIs with: a line for the one who started the server."""


@dataclass(frozen=True)
class McpSettings:
    api_url: str  # the dashboard server, without a trailing slash
    timeout_s: float  # one API request, connect to last byte
    max_rows: int  # rows of one answer a tool hands back
    host: str  # streamable HTTP: where to listen
    port: int

    @classmethod
    def from_settings(cls, settings: Settings) -> McpSettings:
        api_url = settings.mcp_api_url or f"http://{settings.dashboard_host}:{settings.dashboard_port}"
        return cls(
            api_url=api_url.rstrip("/"),
            timeout_s=settings.mcp_timeout_s,
            max_rows=settings.mcp_max_rows,
            host=settings.mcp_host,
            port=settings.mcp_port,
        )


def stdio_key(settings: Settings) -> str:
    """The caller's key over stdio: TALLY_MCP_KEY, never the operator's key read implicitly from
    $TALLY_HOME (an assistant gets exactly the key its user chose to give it)."""
    key = settings.mcp_key.strip()
    if not key:
        raise MissingKey(
            f"{STDIO_KEY_VARIABLE} is not set: give the MCP server an API key (a member's, from "
            "`tally users keys create`, or the operator's, $TALLY_HOME/api_key)"
        )
    return key
