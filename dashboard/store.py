"""How the dashboard's request threads reach the analytics store.

Everything the dashboard reads goes through storage.queries (or storage.readonly_sql for
Explore); this module only hands each server thread its own client.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError

from storage.client import connect
from tally.settings import Settings

ClientFactory = Callable[[], Client]

# What a store that is down, restarting or overloaded raises; the dashboard and the API
# answer it with "try again" rather than as a bug.
StoreUnavailable = ClickHouseError


def thread_local_clients(settings: Settings) -> ClientFactory:
    """One store client per server thread: clients are not thread-safe, and connecting per
    request would add a round trip to every callback. Nothing connects until first use, so
    the app builds (and serves its login page) while the store is still starting."""
    local = threading.local()

    def client() -> Client:
        if not hasattr(local, "client"):
            local.client = connect(settings)
        return local.client

    return client
