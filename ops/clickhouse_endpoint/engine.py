"""The engine: chDB on the data directory, a connection per request, statements run and inserts spooled."""

from __future__ import annotations

import re
import tempfile
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


#: Where inserts' data waits for its statement (_insert): in the data directory, on the store's disk.
SPOOL_DIR = "insert_spool"
SPOOL_PREFIX = "insert-"

#: `input('structure')`: the data sent with an `INSERT … SELECT … FROM input(…)`.
_INPUT_FUNCTION = re.compile(r"\binput\s*\(\s*('(?:[^'\\]|\\.)*')\s*\)", re.IGNORECASE)

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

    @property
    def _spool_dir(self) -> Path:
        return self._data_dir / SPOOL_DIR

    def open(self) -> None:
        # Imported here, not at module import: importing chdb already boots an engine.
        from chdb.session import Session

        make_private_dir(self._data_dir)
        make_private_dir(self._spool_dir)
        for left in self._spool_dir.glob(f"{SPOOL_PREFIX}*"):  # a process killed mid-insert
            left.unlink(missing_ok=True)
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
                    return _insert(connection, statement, query, self._spool_dir)
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


def _insert(connection: Any, insert: StreamedInsert, query: HttpQuery, spool_dir: Path) -> Outcome:
    """`INSERT … FORMAT f` with its data: the data spooled to a file on the store's own disk, then
    one `INSERT … SELECT * FROM file(…)` (the file read with the insertion table's structure).

    Not chDB's streaming insert (`send_insert`): in chdb 4.4.0 it reports success for a block
    its table failed to write — a full disk (NOT_ENOUGH_SPACE), a violated constraint — and the
    rows are gone, so the archiver moved past events that were never archived and the stream
    jobs' rows vanished (tests/fault/test_full_disk.py found it). A statement raises those
    errors. Memory stays bounded by a chunk, as streaming kept it; a full disk now fails the
    spooling itself, loudly.
    """
    with tempfile.NamedTemporaryFile(dir=spool_dir, prefix=SPOOL_PREFIX) as spool:
        for chunk in insert.data:
            spool.write(chunk)
        spool.flush()
        # The file is the request's data verbatim: its blocks are deduplicated (a table's
        # non_replicated_deduplication_window, insert_deduplication_token) as `INSERT … FORMAT`'s
        # are, which the engine does for an INSERT … SELECT only when told the SELECT is stable.
        connection.query("SET deduplicate_insert_select = 'enable_even_for_bad_queries'", "TabSeparated")
        return _run(connection, _reading_spool(insert, spool.name), query)


def _reading_spool(insert: StreamedInsert, path: str) -> str:
    """The insert as one statement reading its data from `path`: `input(structure)` (an
    `INSERT … SELECT … FROM input(…)`) becomes `file(path, format, structure)`; a plain
    `INSERT INTO t [(columns)]` takes `SELECT * FROM file(path, format)`, read with the table's
    structure as `input` would be."""
    spooled = f"file({quote_string(path)}, {quote_string(insert.input_format)}"
    if _INPUT_FUNCTION.search(insert.head):
        return _INPUT_FUNCTION.sub(lambda call: f"{spooled}, {call[1]})", insert.head, count=1)
    # On a line of its own: a `--` comment ending the head must not swallow it.
    return f"{insert.head}\nSELECT * FROM {spooled})"
