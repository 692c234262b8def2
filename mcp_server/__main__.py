"""`python -m mcp_server [--transport stdio|http] [--host H] [--port P]`: what `tally mcp` runs."""

from __future__ import annotations

import argparse
import sys

from pydantic import ValidationError

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
        settings = Settings()
    except ValidationError as invalid:
        problem = invalid.errors()[0]
        name = "TALLY_" + str(problem["loc"][0]).upper() if problem["loc"] else "a TALLY_ setting"
        print(f"tally mcp: {name}: {problem['msg']}", file=sys.stderr)
        return 2
    try:
        serve(settings, options.transport, options.host, options.port)
    except MissingKey as missing:
        print(f"tally mcp: {missing}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
