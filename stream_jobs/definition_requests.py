"""The dashboard's swap and discard requests (migration 0055), carried out by the live stream
jobs between two micro-batches: they own the derived tables and their checkpoints, so nothing
else has to stop them. Checked every REQUEST_POLL_S seconds by the application's loop.

A swap stops the queries (letting a running batch finish), exchanges the tables and checkpoints
(stream_jobs/versions.py), records the switch and starts the queries again with the new
version's definitions, from the swapped-in checkpoints. A request that cannot be carried out
(already current, no side tables, built from the archive) is marked refused with the reason,
and the queries are not stopped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from clickhouse_connect.driver.client import Client
from pyspark.sql.streaming import StreamingQuery

from storage import definitions
from storage.client import connect
from storage.definitions import DefinitionsError, Request
from stream_jobs.versions import check_swap, discard_version, swap_version
from tally.settings import Settings

log = logging.getLogger(__name__)

REQUEST_POLL_S = 5.0

Starter = Callable[[Settings], list[StreamingQuery]]
Stopper = Callable[[StreamingQuery], None]


class DefinitionRequests:
    """Called with the running queries every loop; returns the queries to run from now on."""

    def __init__(self, settings: Settings, start: Starter, stop: Stopper) -> None:
        self.settings, self._start, self._stop = settings, start, stop
        self._checked_at: float | None = None

    def __call__(self, queries: list[StreamingQuery]) -> list[StreamingQuery]:
        if self._checked_at is not None and time.monotonic() - self._checked_at < REQUEST_POLL_S:
            return queries
        self._checked_at = time.monotonic()
        client = connect(self.settings)
        for request in definitions.pending_requests(client):
            queries = self.carry_out(client, request, queries)
        return queries

    def carry_out(
        self, client: Client, request: Request, queries: list[StreamingQuery]
    ) -> list[StreamingQuery]:
        try:
            if request.action == "swap":
                queries = self.swap(client, request.version, queries)
                outcome = f"version {request.version} is current"
            elif request.action == "discard":
                discard_version(self.settings, client, request.version)
                outcome = f"version {request.version}'s side tables dropped"
            else:
                raise DefinitionsError(f"unknown action {request.action!r}")
        except DefinitionsError as error:
            log.warning("definitions request %s refused: %s", request.id, error)
            definitions.finish(client, request, "refused", str(error))
            return queries
        log.info("definitions request %s: %s", request.id, outcome)
        definitions.finish(client, request, "done", outcome)
        return queries

    def swap(self, client: Client, number: int, queries: list[StreamingQuery]) -> list[StreamingQuery]:
        check_swap(self.settings, client, number)  # refused before anything stops
        for query in queries:
            self._stop(query)
        _, target = swap_version(self.settings, client, number, "dashboard")
        self.settings = definitions.applied(self.settings, target.definitions)
        return self._start(self.settings)
