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
from storage.query_limits import stats_limits
from tally.settings import Settings

ClientFactory = Callable[[], Client]

# What a store that is down, restarting or overloaded raises; the dashboard and the API
# answer it with "try again" rather than as a bug.
StoreUnavailable = ClickHouseError


def thread_local_clients(settings: Settings) -> ClientFactory:
    """One store client per server thread: clients are not thread-safe, and connecting per
    request would add a round trip to every callback. Nothing connects until first use, so
    the app builds (and serves its login page) while the store is still starting. Each client
    carries the stats path's limits (storage/query_limits.py) on every query it sends."""
    local = threading.local()

    def client() -> Client:
        if not hasattr(local, "client"):
            # Every query the dashboard server sends is a request's: bounded in time, memory and size.
            local.client = connect(settings, query_settings=stats_limits(settings))
        return local.client

    return client
