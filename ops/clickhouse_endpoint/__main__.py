"""`python -m ops.clickhouse_endpoint`: serve $TALLY_HOME/clickhouse on loopback."""

from __future__ import annotations

import logging
import os
import sys

import uvicorn

from ops.clickhouse_endpoint.http import build_app
from tally.private_files import PRIVATE_UMASK
from tally.settings import Settings


def main() -> None:
    """Serve $TALLY_HOME/clickhouse on 127.0.0.1 at the port of TALLY_CLICKHOUSE_URL until stopped."""
    # What the engine writes (data, metadata, logs) is the operator's alone (tally/private_files.py).
    os.umask(PRIVATE_UMASK)
    settings = Settings()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        app = build_app(
            settings.clickhouse_dir,
            settings.clickhouse_user,
            settings.resolved_clickhouse_password(),
            port=settings.clickhouse_port,
        )
    except ValueError as error:
        sys.exit(f"error: {error} (empty {settings.home_dir / 'clickhouse_password'}?)")
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=settings.clickhouse_port,
        lifespan="on",
        access_log=False,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
