"""The engine: chDB on the data directory, a connection per request, statements run and inserts streamed."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ops.clickhouse_endpoint.body import StreamedInsert, read_statement
from ops.clickhouse_endpoint.errors import ClickHouseError, ErrorCode
from ops.clickhouse_endpoint.request import HttpQuery
from storage.literals import quote_string
from tally.private_files import make_private_dir


@dataclass(frozen=True)
class Outcome:
    """What the engine answered."""

    body: bytes
    #: The format of `body` when the statement returns a result set (SELECT, SHOW, …), else None.
    output_format: str | None
    #: The X-ClickHouse-Summary counters.
    summary: dict[str, str]


def _summary(
    *,
    read_rows: int = 0,
    read_bytes: int = 0,
    written_rows: int = 0,
    written_bytes: int = 0,
    elapsed_s: float = 0,
) -> dict[str, str]:
    # ClickHouse sends every counter as a string.
    return {
        "read_rows": str(read_rows),
        "read_bytes": str(read_bytes),
        "written_rows": str(written_rows),
        "written_bytes": str(written_bytes),
        "elapsed_ns": str(int(elapsed_s * 1e9)),
    }


_FORMAT_CLAUSE = re.compile(r"\bFORMAT\s+(\w+)\s*(?:SETTINGS\b[^;]*)?;?\s*\Z", re.IGNORECASE)


def _quote_identifier(name: str) -> str:
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


class Engine:
    """The ClickHouse engine of this process, on one data directory."""

    def __init__(self, data_dir: Path) -> None:
        self._data_dir = data_dir
        self._session: Any = None
        self.version = ""
        self.timezone = "UTC"

    def open(self) -> None:
        # Imported here, not at module import: importing chdb already boots an engine.
        from chdb.session import Session

        make_private_dir(self._data_dir)
        self._session = Session(str(self._data_dir))
        answer = self._session.query("SELECT version(), timezone()", "TabSeparated").bytes().decode()
        self.version, self.timezone = answer.rstrip("\n").split("\t")

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def execute(self, query: HttpQuery, body: Iterable[bytes]) -> Outcome:
        """Run one request's statement. Called in a worker thread; blocks until done."""
        try:
            statement = read_statement(query.text, body)
            with self._connection(query) as connection:
                if isinstance(statement, StreamedInsert):
                    return _insert(connection, statement)
                return _run(connection, statement, query)
        except ClickHouseError:
            raise
        except Exception as exc:
            raise ClickHouseError.from_engine(exc) from exc

    @contextmanager
    def _connection(self, query: HttpQuery) -> Iterator[Any]:
        """A connection of the request's own, with its database and settings (see the module doc)."""
        import chdb

        connection = chdb.connect(str(self._data_dir))
        try:
            if query.database:
                connection.query(f"USE {_quote_identifier(query.database)}", "TabSeparated")
            if query.settings:
                assignments = ", ".join(
                    f"{name} = {quote_string(value)}" for name, value in query.settings.items()
                )
                connection.query(f"SET {assignments}", "TabSeparated")
            if query.read_only:
                _enforce_read_only(connection)
            yield connection
        finally:
            connection.close()


def _enforce_read_only(connection: Any) -> None:
    """What ClickHouse's HTTP handler does for a GET: if readonly is 0 once the request's settings
    are applied, make it 2 (no writes, settings may still change).

    The engine itself says what the request's readonly came to, so it is parsed exactly as
    ClickHouse parses it: `00` is 0, `01`, `+1` and `1k` are not, and what it cannot parse
    (` 1`, `true`) already failed the SET above.
    """
    readonly = connection.query("SELECT getSetting('readonly')", "TabSeparated").bytes().strip()
    if readonly == b"0":
        connection.query("SET readonly = 2", "TabSeparated")


def _run(connection: Any, sql: str, query: HttpQuery) -> Outcome:
    analysis = _analyse(connection, sql)
    if analysis["statement_count"] > 1:
        raise ClickHouseError.of(ErrorCode.SYNTAX_ERROR, "Syntax error: Multi-statements are not allowed")
    if not sql.strip():
        raise ClickHouseError.of(ErrorCode.SYNTAX_ERROR, "Empty query")
    result = connection.query(sql, query.output_format, params=query.placeholders)
    returns_rows = analysis["query_class"].name == "READ_ONLY"
    clause = _FORMAT_CLAUSE.search(sql)
    return Outcome(
        body=result.bytes(),
        output_format=(clause[1] if clause else query.output_format) if returns_rows else None,
        summary=_summary(
            read_rows=result.rows_read(),
            read_bytes=result.bytes_read(),
            written_rows=result.rows_written(),
            written_bytes=result.bytes_written(),
            elapsed_s=result.elapsed(),
        ),
    )


def _analyse(connection: Any, sql: str) -> dict[str, Any]:
    """The engine's parser on what `sql` is: how many statements, and whether it only reads.

    classify_query is bound on the extension object under chDB's Python wrapper (chdb.durable
    reaches it the same way).
    """
    return dict(connection._conn.classify_query(sql))


def _insert(connection: Any, insert: StreamedInsert) -> Outcome:
    # Leaving the block without finish() cancels the insert: nothing half-written is committed.
    with connection.send_insert(insert.head, insert.input_format) as inserter:
        for chunk in insert.data:
            inserter.append(chunk)
        written = inserter.finish()
    return Outcome(
        body=b"",
        output_format=None,
        summary=_summary(
            written_rows=written.rows_written, written_bytes=written.bytes_written, elapsed_s=written.elapsed
        ),
    )
