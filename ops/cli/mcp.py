"""`tally mcp`: the read-only MCP server over the stats engine (mcp_server/, README "MCP")."""

from __future__ import annotations

import click

from ops.cli.context import Stack
from ops.cli_errors import UserError

TRANSPORTS = ("stdio", "http")


@click.command("mcp")
@click.option(
    "--transport",
    type=click.Choice(TRANSPORTS),
    default="stdio",
    show_default=True,
    help="stdio: an MCP client starts this command and talks over its stdin/stdout, with the key "
    "in TALLY_MCP_KEY. http: streamable HTTP at http://HOST:PORT/mcp, each request with its "
    "caller's Authorization: Bearer <API key>.",
)
@click.option(
    "--host", default=None, help="http: the address to listen on (default TALLY_MCP_HOST, 127.0.0.1)."
)
@click.option("--port", type=int, default=None, help="http: the port (default TALLY_MCP_PORT, 8060).")
@click.pass_obj
def mcp(stack: Stack, transport: str, host: str | None, port: int | None) -> None:
    """Serve Tally's numbers to AI assistants over the Model Context Protocol, read-only.

    Tools: list_sites, aggregate, timeseries, breakdown, goals, funnel, realtime, provenance,
    plausible_query (Plausible's Stats API v2) and sql (the operator's key only). Each asks the
    dashboard's APIs (TALLY_MCP_API_URL, default the local dashboard) with the caller's key, so a
    member's key reads only its sites; answers hold at most TALLY_MCP_MAX_ROWS rows.
    """
    from mcp_server.serve import serve
    from mcp_server.settings import MissingKey

    try:
        serve(stack.settings, "http" if transport == "http" else "stdio", host, port)
    except MissingKey as missing:
        raise UserError(str(missing)) from None
    except KeyboardInterrupt:
        pass


COMMANDS = [mcp]
