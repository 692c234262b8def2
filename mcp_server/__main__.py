"""`python -m mcp_server [--transport stdio|http] [--host H] [--port P]`: what `tally mcp` runs."""

from __future__ import annotations

import argparse
import sys

from mcp_server.serve import serve
from mcp_server.settings import MissingKey
from tally.settings import Settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcp_server", description=__doc__)
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--host", default=None, help="HTTP: listen here (default TALLY_MCP_HOST)")
    parser.add_argument("--port", type=int, default=None, help="HTTP: listen here (default TALLY_MCP_PORT)")
    options = parser.parse_args(argv)
    try:
        serve(Settings(), options.transport, options.host, options.port)
    except MissingKey as missing:
        print(f"tally mcp: {missing}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
