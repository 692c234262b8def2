"""The local ClickHouse endpoint: chDB's engine served on ClickHouse's HTTP interface.

chDB runs the ClickHouse engine in-process and lets one process own a data directory, so
this process owns it and answers on :8123 the way clickhouse-server does. Every Tally
component talks to it with clickhouse-connect at TALLY_CLICKHOUSE_URL; pointing that URL at
a real server changes no code.

How requests meet the engine (measured with chdb 4.4 / chdb-core 26.9):

* One chDB session on the data directory lives as long as the app. It keeps the engine,
  its MergeTree storage and background merges, up between requests.
* That one session is no good for concurrent requests: plain queries from several threads
  queue behind a mutex inside it, and while a streaming INSERT is open on it every other
  call *fails* ("Another streaming query or insert is already active on this connection").
* Further connections to the same directory inside this process attach to the same engine,
  run in parallel (chDB releases the GIL), and each has its own settings, current database
  and temporary tables, which is what clickhouse-server calls a query context. So each
  request gets a connection of its own: settings such as readonly=1 are SET on it and go
  away with it, and concurrent reads and writes proceed side by side as on a server, with
  MergeTree doing the isolation. A capacity limiter bounds how many run at once.

Everything is answered once the statement has finished (as with wait_end_of_query=1) and
uncompressed, which clickhouse-connect accepts whatever Accept-Encoding it sent.

One module per part of a request's way: `credentials` (who is asking), `request` (what is
asked: query, settings, parameters), `body` (decompressed in bounded pieces; a statement or
an INSERT's data), `engine` (chDB runs it), `http` (routes, the door, responses), `errors`
(ClickHouse's codes and statuses); `python -m ops.clickhouse_endpoint` serves it.
"""

from __future__ import annotations

from ops.clickhouse_endpoint.http import build_app

__all__ = ["build_app"]
