"""The one way components reach the analytics store: clickhouse-connect at TALLY_CLICKHOUSE_URL.

Locally that URL is the chDB-backed endpoint (ops/clickhouse_endpoint/); in production
it is clickhouse-server. Nothing else in Tally knows the difference.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlparse

import clickhouse_connect
from clickhouse_connect.driver.client import Client

from tally.settings import Settings


def connect(
    settings: Settings,
    *,
    with_database: bool = True,
    query_settings: Mapping[str, object] | None = None,
    **options: object,
) -> Client:
    """A clickhouse-connect client; `with_database=False` for work before the database exists;
    `query_settings` ClickHouse settings sent with every query of the client (query_limits.py)."""
    url = urlparse(settings.clickhouse_url)
    return clickhouse_connect.get_client(
        host=url.hostname or "127.0.0.1",
        port=url.port or 8123,
        secure=url.scheme == "https",
        username=url.username or settings.clickhouse_user,
        # Credentials in the URL (production) win; locally the password generated into $TALLY_HOME.
        password=url.password or settings.resolved_clickhouse_password(),
        database=settings.clickhouse_database if with_database else "",
        settings=dict(query_settings or {}),
        **options,
    )
