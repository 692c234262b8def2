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
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import logging
import os
import re
import socket
import sys
import uuid
import zlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import HTTP
from enum import IntEnum
from itertools import chain
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.from_thread
import anyio.to_thread
import backports.zstd
import lz4.frame
import uvicorn
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from storage.literals import quote_string
from tally.private_files import PRIVATE_UMASK, make_private_dir
from tally.settings import Settings

logger = logging.getLogger(__name__)

#: A request body above this many bytes, as sent or once decompressed, is refused with 413.
MAX_BODY_BYTES = 256 * 1024 * 1024
#: Statements running in the engine at once; further requests wait for a slot. Each query
#: already spreads over the machine's cores (max_threads) on its own.
MAX_CONCURRENT_QUERIES = 8
#: How far into a request to look for the end of an `INSERT … FORMAT` statement
#: (ClickHouse's max_query_size).
MAX_STATEMENT_BYTES = 256 * 1024
#: The most a compressed body yields per decompression step; what the size limit is checked against.
DECODED_PIECE_BYTES = 1024 * 1024


class ErrorCode(IntEnum):
    """ClickHouse error codes this endpoint raises itself or maps to an HTTP status."""

    CANNOT_PARSE_TEXT = 6
    THERE_IS_NO_COLUMN = 8
    DUPLICATE_COLUMN = 15
    CANNOT_PARSE_ESCAPE_SEQUENCE = 25
    CANNOT_PARSE_QUOTED_STRING = 26
    CANNOT_PARSE_INPUT_ASSERTION_FAILED = 27
    BAD_ARGUMENTS = 36
    UNKNOWN_ELEMENT_IN_AST = 37
    CANNOT_PARSE_DATE = 38
    CANNOT_PARSE_DATETIME = 41
    ILLEGAL_COLUMN = 44
    UNKNOWN_FUNCTION = 46
    UNKNOWN_IDENTIFIER = 47
    NOT_IMPLEMENTED = 48
    UNKNOWN_TYPE = 50
    TYPE_MISMATCH = 53
    UNKNOWN_STORAGE = 56
    UNKNOWN_TABLE = 60
    SYNTAX_ERROR = 62
    UNKNOWN_AGGREGATE_FUNCTION = 63
    CANNOT_PARSE_NUMBER = 72
    UNKNOWN_FORMAT = 73
    CANNOT_OPEN_FILE = 76
    UNKNOWN_TYPE_OF_QUERY = 78
    UNKNOWN_DATABASE = 81
    UNKNOWN_COMPRESSION_METHOD = 89
    UNKNOWN_SETTING = 115
    INCORRECT_DATA = 117
    UNKNOWN_TYPE_OF_AST_NODE = 123
    UNKNOWN_DIRECTION_OF_SORTING = 152
    TIMEOUT_EXCEEDED = 159
    TOO_DEEP_AST = 167
    TOO_BIG_AST = 168
    UNKNOWN_USER = 192
    WRONG_PASSWORD = 193
    REQUIRED_PASSWORD = 194
    SOCKET_TIMEOUT = 209
    UNEXPECTED_AST_STRUCTURE = 223
    QUERY_IS_TOO_LARGE = 229
    CANNOT_DECOMPRESS = 271
    VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE = 321
    UNKNOWN_DATABASE_ENGINE = 336
    CANNOT_PARSE_UUID = 376
    HTTP_LENGTH_REQUIRED = 381
    CANNOT_COMPILE_REGEXP = 427
    CANNOT_SCHEDULE_TASK = 439
    CANNOT_PARSE_DOMAIN_VALUE_FROM_STRING = 441
    ACCESS_DENIED = 497
    UNKNOWN_ROLE = 511
    SET_NON_GRANTED_ROLE = 512
    AUTHENTICATION_FAILED = 516
    CANNOT_PARSE_IPV4 = 675
    CANNOT_PARSE_IPV6 = 676
    UNSUPPORTED_MEDIA_TYPE = 779
    STD_EXCEPTION = 1001


# ClickHouse's own table (src/Server/HTTP/exceptionCodeToHTTPStatus.cpp); any other code is a 500.
_ERRORS_BY_STATUS = {
    401: "REQUIRED_PASSWORD",
    403: "UNKNOWN_USER WRONG_PASSWORD AUTHENTICATION_FAILED SET_NON_GRANTED_ROLE ACCESS_DENIED",
    400: (
        "BAD_ARGUMENTS CANNOT_COMPILE_REGEXP CANNOT_PARSE_TEXT CANNOT_PARSE_ESCAPE_SEQUENCE "
        "CANNOT_PARSE_QUOTED_STRING CANNOT_PARSE_DATE CANNOT_PARSE_DATETIME CANNOT_PARSE_NUMBER "
        "CANNOT_PARSE_DOMAIN_VALUE_FROM_STRING CANNOT_PARSE_IPV4 CANNOT_PARSE_IPV6 "
        "CANNOT_PARSE_INPUT_ASSERTION_FAILED CANNOT_PARSE_UUID DUPLICATE_COLUMN ILLEGAL_COLUMN "
        "UNKNOWN_ELEMENT_IN_AST UNKNOWN_TYPE_OF_AST_NODE THERE_IS_NO_COLUMN TOO_DEEP_AST TOO_BIG_AST "
        "UNEXPECTED_AST_STRUCTURE SYNTAX_ERROR INCORRECT_DATA TYPE_MISMATCH "
        "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE"
    ),
    404: (
        "UNKNOWN_TABLE UNKNOWN_FUNCTION UNKNOWN_IDENTIFIER UNKNOWN_TYPE UNKNOWN_STORAGE UNKNOWN_DATABASE "
        "UNKNOWN_SETTING UNKNOWN_DIRECTION_OF_SORTING UNKNOWN_AGGREGATE_FUNCTION UNKNOWN_FORMAT "
        "UNKNOWN_DATABASE_ENGINE UNKNOWN_TYPE_OF_QUERY UNKNOWN_ROLE"
    ),
    413: "QUERY_IS_TOO_LARGE",
    501: "NOT_IMPLEMENTED",
    503: "SOCKET_TIMEOUT CANNOT_OPEN_FILE CANNOT_SCHEDULE_TASK",
    411: "HTTP_LENGTH_REQUIRED",
    408: "TIMEOUT_EXCEEDED",
    415: "UNSUPPORTED_MEDIA_TYPE",
}
_HTTP_STATUS = {
    ErrorCode[name]: status for status, names in _ERRORS_BY_STATUS.items() for name in names.split()
}

_CODE_IN_MESSAGE = re.compile(r"Code: (\d+)\. ")


class ClickHouseError(Exception):
    """An error as ClickHouse reports it: a code and the `Code: N. DB::Exception: …` text."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text

    @classmethod
    def of(cls, code: ErrorCode, message: str) -> ClickHouseError:
        return cls(code, f"Code: {code.value}. DB::Exception: {message}. ({code.name})")

    @classmethod
    def from_engine(cls, exc: Exception) -> ClickHouseError:
        message = str(exc)
        found = _CODE_IN_MESSAGE.search(message)
        if found is None:
            return cls.of(ErrorCode.STD_EXCEPTION, message)
        # chDB's Python layer puts its own words in front ("Streaming insert append failed: …").
        return cls(int(found[1]), message[found.start() :].strip())

    @property
    def http_status(self) -> int:
        return _HTTP_STATUS.get(self.code, 500)


def _body_too_large(limit: int) -> ClickHouseError:
    return ClickHouseError.of(ErrorCode.QUERY_IS_TOO_LARGE, f"The request body is larger than {limit} bytes")


# --- who is asking ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Credentials:
    user: str
    password: str

    def matches(self, presented: Credentials) -> bool:
        # Both halves are always compared, in constant time: timing tells nothing about which was wrong.
        user_ok = hmac.compare_digest(self.user.encode(), presented.user.encode())
        password_ok = hmac.compare_digest(self.password.encode(), presented.password.encode())
        return user_ok & password_ok

    @classmethod
    def presented(cls, headers: Mapping[str, str], url_parameters: Mapping[str, str]) -> Credentials:
        """Who the request says it is, looked for where ClickHouse looks: basic auth, the
        X-ClickHouse-User / X-ClickHouse-Key headers, the user / password parameters."""
        authorization = headers.get("authorization", "")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "basic":
            try:
                user, _, password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                raise ClickHouseError.of(
                    ErrorCode.AUTHENTICATION_FAILED, "Malformed basic authentication"
                ) from None
            return cls(user, password)
        if authorization:
            raise ClickHouseError.of(
                ErrorCode.AUTHENTICATION_FAILED, f"Unsupported authorization scheme {scheme}"
            )
        if "x-clickhouse-user" in headers or "x-clickhouse-key" in headers:
            return cls(headers.get("x-clickhouse-user", "default"), headers.get("x-clickhouse-key", ""))
        return cls(url_parameters.get("user", "default"), url_parameters.get("password", ""))


# --- what is asked ---------------------------------------------------------------------------

# URL parameters the HTTP layer consumes itself; every other parameter is a ClickHouse setting.
_TRANSPORT_PARAMETERS = frozenset(
    {"query", "database", "default_format", "user", "password", "quota_key", "query_id", "role"}
    | {"session_id", "session_timeout", "session_check", "close_session", "compress", "decompress"}
    | {"buffer_size", "wait_end_of_query", "client_protocol_version", "stacktrace"}
)
# Settings about streaming a response while it is produced, which this endpoint never does.
_RESPONSE_STREAMING_SETTINGS = frozenset(
    {"send_progress_in_http_headers", "http_headers_progress_interval_ms", "http_wait_end_of_query"}
    | {"enable_http_compression", "http_zlib_compression_level", "http_response_buffer_size"}
    | {"cancel_http_readonly_queries_on_client_close"}
)
_PLACEHOLDER_PREFIX = "param_"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# chDB's Python wrapper turns these "formats" into DataFrames and Arrow tables in-process.
_WRAPPER_FORMATS = frozenset({"dataframe", "datastore", "arrowtable"})


@dataclass(frozen=True)
class HttpQuery:
    """What one HTTP request asks of the engine, with the transport taken off."""

    #: The `query` parameter: the statement, or its beginning when the body continues it.
    text: str
    database: str | None
    #: The output format of a statement that has no FORMAT clause.
    output_format: str
    #: ClickHouse settings for this statement only.
    settings: dict[str, str]
    #: Values for the statement's {name:Type} placeholders.
    placeholders: dict[str, str]
    #: A GET: ClickHouse runs those read-only whatever their settings say (see _enforce_read_only).
    read_only: bool = False

    @classmethod
    def from_request(
        cls, method: str, url_parameters: Mapping[str, str], headers: Mapping[str, str]
    ) -> HttpQuery:
        for unsupported in ("compress", "decompress"):
            if url_parameters.get(unsupported, "0") not in ("0", "false"):
                raise ClickHouseError.of(
                    ErrorCode.NOT_IMPLEMENTED,
                    f"{unsupported}=1 (ClickHouse's native block compression) is not supported here; "
                    "use Content-Encoding / Accept-Encoding",
                )
        output_format = (
            url_parameters.get("default_format") or headers.get("x-clickhouse-format") or "TabSeparated"
        )
        if not _NAME.fullmatch(output_format) or output_format.lower() in _WRAPPER_FORMATS:
            raise ClickHouseError.of(ErrorCode.UNKNOWN_FORMAT, f"Unknown format {output_format}")
        settings: dict[str, str] = {}
        placeholders: dict[str, str] = {}
        for name, value in url_parameters.items():
            if name.startswith(_PLACEHOLDER_PREFIX):
                placeholders[name.removeprefix(_PLACEHOLDER_PREFIX)] = value
            elif name not in _TRANSPORT_PARAMETERS and name not in _RESPONSE_STREAMING_SETTINGS:
                if not _NAME.fullmatch(name):
                    raise ClickHouseError.of(ErrorCode.UNKNOWN_SETTING, f"Unknown setting '{name}'")
                settings[name] = value
        return cls(
            text=url_parameters.get("query", ""),
            database=url_parameters.get("database") or headers.get("x-clickhouse-database") or None,
            output_format=output_format,
            settings=settings,
            placeholders=placeholders,
            read_only=method == "GET",
        )


# --- the request body ------------------------------------------------------------------------


class _Frame(Protocol):
    """One compressed frame being decoded, with the bz2-style API: at most `max_length` bytes
    out per call, input kept until asked for (`needs_input`). lz4.frame's and backports.zstd's
    decompressors have it; zlib's gets it from `_ZlibFrame`."""

    @property
    def eof(self) -> bool: ...

    @property
    def needs_input(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...

    def decompress(self, data: bytes, max_length: int = -1) -> bytes: ...


class _ZlibFrame:
    """A zlib (deflate or gzip) stream behind the `_Frame` API."""

    def __init__(self, wbits: int) -> None:
        self._inflate = zlib.decompressobj(wbits=wbits)
        self.needs_input = True

    @property
    def eof(self) -> bool:
        return self._inflate.eof

    @property
    def unused_data(self) -> bytes:
        return self._inflate.unused_data

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        # zlib hands back the input it did not get to instead of keeping it.
        decoded = self._inflate.decompress(self._inflate.unconsumed_tail + data, max(max_length, 0))
        self.needs_input = not self._inflate.unconsumed_tail and (max_length < 0 or len(decoded) < max_length)
        return decoded


def _frame_factory(encoding: str) -> Callable[[], _Frame] | None:
    match encoding:
        case "" | "identity":
            return None
        case "gzip" | "x-gzip":
            return lambda: _ZlibFrame(zlib.MAX_WBITS | 16)
        case "deflate":
            return lambda: _ZlibFrame(zlib.MAX_WBITS)
        case "lz4":
            return lz4.frame.LZ4FrameDecompressor
        case "zstd":
            return backports.zstd.ZstdDecompressor
    # br is not taken: brotli's decoder has no bound on what one call may produce.
    raise ClickHouseError.of(ErrorCode.UNKNOWN_COMPRESSION_METHOD, f"Unknown Content-Encoding '{encoding}'")


class BodyDecoder:
    """Undoes a Content-Encoding. A body may hold several frames one after the other:
    clickhouse-connect compresses each block of an insert as a frame of its own.

    Output comes in pieces of at most DECODED_PIECE_BYTES, each produced only when the one
    before was taken: a small body that expands enormously (a compression bomb) is stopped by
    RequestBody's limit after one piece too many, never decompressed whole into memory.
    """

    def __init__(self, encoding: str) -> None:
        self._encoding = encoding
        self._new_frame = _frame_factory(encoding)
        self._frame: _Frame | None = None

    def decode(self, data: bytes) -> Iterator[bytes]:
        if self._new_frame is None:
            if data:
                yield data
            return
        try:
            while True:
                if self._frame is None:
                    if not data:
                        return
                    self._frame = self._new_frame()
                piece = self._frame.decompress(data, DECODED_PIECE_BYTES)
                data = b""
                if piece:
                    yield piece
                if self._frame.eof:
                    data, self._frame = self._frame.unused_data, None
                elif self._frame.needs_input:
                    return
        except ClickHouseError:
            raise
        except Exception as exc:
            raise ClickHouseError.of(
                ErrorCode.CANNOT_DECOMPRESS, f"Cannot decode the {self._encoding} body: {exc}"
            ) from exc

    def finish(self) -> None:
        if self._frame is not None:
            raise ClickHouseError.of(
                ErrorCode.CANNOT_DECOMPRESS, f"The {self._encoding} body ends inside a frame"
            )


class RequestBody:
    """The body as the engine's thread reads it: decoded, and refused past the size limit,
    counted piece by piece while decoding (see BodyDecoder)."""

    def __init__(self, receive: Callable[[], bytes | None], decoder: BodyDecoder, limit: int) -> None:
        self._receive = receive
        self._decoder = decoder
        self._limit = limit

    def __iter__(self) -> Iterator[bytes]:
        received = decoded = 0
        while (chunk := self._receive()) is not None:
            received += len(chunk)
            if received > self._limit:
                raise _body_too_large(self._limit)
            for piece in self._decoder.decode(chunk):
                decoded += len(piece)
                if decoded > self._limit:
                    raise _body_too_large(self._limit)
                yield piece
        self._decoder.finish()


@dataclass(frozen=True)
class StreamedInsert:
    """`INSERT … FORMAT <name>` whose data follows in the request, streamed into the engine."""

    #: The statement without its FORMAT clause.
    head: str
    input_format: str
    data: Iterator[bytes]


# `INSERT … FORMAT <name>` and a line break: the rest of the request is data in that format (ClickHouse
# starts the data after the first newline). VALUES data is SQL, so such an INSERT goes to the parser whole.
_INSERT_WITH_DATA = re.compile(
    rb"\s*(INSERT\s(?:(?!\bVALUES\b).)*?)\s+FORMAT\s+(\w+)[ \t\r]*\n", re.IGNORECASE | re.DOTALL
)


def read_statement(text: str, body: Iterable[bytes]) -> str | StreamedInsert:
    """Split a request into its SQL and, for `INSERT … FORMAT`, the data after it.

    As in ClickHouse, the `query` parameter and the body together make the query, joined by
    a newline; either may be empty. Only the start of the body is read before deciding.
    """
    chunks = iter(body)
    start = bytearray(text.encode() + b"\n" if text else b"")
    while True:
        insert = _INSERT_WITH_DATA.match(start)
        if insert is not None:
            rest = bytes(start[insert.end() :])
            return StreamedInsert(
                head=_sql_text(insert[1]),
                input_format=bytes(insert[2]).decode(),
                data=chain([rest] if rest else [], chunks),
            )
        if len(start) > MAX_STATEMENT_BYTES:
            break
        chunk = next(chunks, None)
        if chunk is None:
            return _sql_text(start)
        start += chunk
    for chunk in chunks:
        start += chunk
    return _sql_text(start)


def _sql_text(sql: bytes | bytearray) -> str:
    try:
        return bytes(sql).decode()
    except UnicodeDecodeError:
        raise ClickHouseError.of(ErrorCode.BAD_ARGUMENTS, "The query is not valid UTF-8") from None


def form_fields(content_type: str, body: bytes) -> dict[str, str]:
    """The fields of a multipart/form-data body. clickhouse-connect sends the query and its
    param_* values this way when they are too long for the URL."""
    envelope = b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n"
    message = BytesParser(policy=HTTP).parsebytes(envelope + body)
    fields: dict[str, str] = {}
    for part in message.iter_parts():  # type: ignore[attr-defined]  # policy=HTTP parses to EmailMessage
        if part.get_filename() is not None:
            raise ClickHouseError.of(
                ErrorCode.NOT_IMPLEMENTED, "External data (tables sent as files) is not supported"
            )
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        fields[str(name)] = _sql_text(payload)
    return fields


# --- the engine ------------------------------------------------------------------------------


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


# --- HTTP ------------------------------------------------------------------------------------

_BINARY_FORMATS = frozenset({"native", "parquet", "arrow", "arrowstream", "orc", "avro", "msgpack", "npy"})


def _content_type(output_format: str | None) -> str:
    name = (output_format or "").lower()
    if name.startswith("json"):
        return "application/json; charset=UTF-8"
    if name.startswith(("tabseparated", "tsv")):
        return "text/tab-separated-values; charset=UTF-8"
    if name.startswith("csv"):
        return "text/csv; charset=UTF-8"
    if name in _BINARY_FORMATS or name.startswith("rowbinary"):
        return "application/octet-stream"
    return "text/plain; charset=UTF-8"


class HttpInterface:
    """ClickHouse's HTTP interface (`/` and `/ping`) in front of the engine."""

    def __init__(self, engine: Engine, account: Credentials, port: int, max_body_bytes: int) -> None:
        self._engine = engine
        self._account = account
        # The names this endpoint is reached by: its loopback address and port. A browser sends
        # any other (a DNS-rebinding attacker's domain resolving to 127.0.0.1, say).
        self._own_hosts = frozenset(f"{address}:{port}" for address in ("127.0.0.1", "localhost", "[::1]"))
        self._max_body_bytes = max_body_bytes
        self._limiter: anyio.CapacityLimiter | None = None
        self._display_name = socket.gethostname()

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        await anyio.to_thread.run_sync(self._engine.open)
        self._limiter = anyio.CapacityLimiter(MAX_CONCURRENT_QUERIES)
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(self._engine.close)

    async def ping(self, request: Request) -> Response:
        try:
            self._check_caller(request.headers)
        except ClickHouseError as error:
            return self._error_response(error, str(uuid.uuid4()))
        return PlainTextResponse("Ok.\n")

    async def query(self, request: Request) -> Response:
        query_id = request.query_params.get("query_id") or str(uuid.uuid4())
        try:
            self._check_caller(request.headers)
            if request.method == "GET" and not request.query_params:
                return PlainTextResponse("Ok.\n")  # ClickHouse's answer to a bare GET /
            url_parameters = dict(request.query_params)
            self._authenticate(request.headers, url_parameters)
            self._check_declared_length(request.headers)
            if request.headers.get("content-type", "").startswith("multipart/form-data"):
                url_parameters |= form_fields(request.headers["content-type"], await self._read_form(request))
                receive: Callable[[], bytes | None] = _nothing
            else:
                receive = self._body_receiver(request)
            query = HttpQuery.from_request(request.method, url_parameters, request.headers)
            body = RequestBody(
                receive,
                BodyDecoder(request.headers.get("content-encoding", "").strip().lower()),
                self._max_body_bytes,
            )
            outcome = await anyio.to_thread.run_sync(self._engine.execute, query, body, limiter=self._limiter)
        except ClickHouseError as error:
            self._log(error, query_id)
            return self._error_response(error, query_id)
        headers = self._headers(query_id, query.settings.get("session_timezone"))
        headers["X-ClickHouse-Summary"] = json.dumps(outcome.summary, separators=(",", ":"))
        if outcome.output_format is not None:
            headers["X-ClickHouse-Format"] = outcome.output_format
        return Response(outcome.body, headers=headers, media_type=_content_type(outcome.output_format))

    def _check_caller(self, headers: Headers) -> None:
        """Refuse what web pages can send: a page's no-cors POST needs no preflight, and once
        DNS rebinding points the page's own domain at 127.0.0.1 it is even same-origin."""
        if "origin" in headers:
            # clickhouse-connect and every other ClickHouse client never send one; browsers do.
            raise ClickHouseError.of(
                ErrorCode.ACCESS_DENIED,
                "Requests from web pages (with an Origin header) are refused: "
                "this endpoint serves Tally's own components only",
            )
        host = headers.get("host", "")
        if host.lower() not in self._own_hosts:
            raise ClickHouseError.of(
                ErrorCode.ACCESS_DENIED,
                f"Host '{host[:100]}' is not this endpoint's address "
                f"(one of {', '.join(sorted(self._own_hosts))})",
            )

    def _authenticate(self, headers: Headers, url_parameters: Mapping[str, str]) -> None:
        presented = Credentials.presented(headers, url_parameters)
        if not self._account.matches(presented):
            raise ClickHouseError.of(
                ErrorCode.AUTHENTICATION_FAILED,
                f"{presented.user}: Authentication failed: password is incorrect, "
                "or there is no user with such name",
            )

    def _check_declared_length(self, headers: Headers) -> None:
        # Refused before reading a byte; a chunked body is counted as it arrives (RequestBody).
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._max_body_bytes:
            raise _body_too_large(self._max_body_bytes)

    def _body_receiver(self, request: Request) -> Callable[[], bytes | None]:
        """Hands the engine's worker thread the next chunk of the body from the event loop."""
        chunks = request.stream()

        async def next_chunk() -> bytes | None:
            try:
                return await anext(chunks)
            except StopAsyncIteration:
                return None

        return lambda: anyio.from_thread.run(next_chunk)

    async def _read_form(self, request: Request) -> bytes:
        form = bytearray()
        async for chunk in request.stream():
            form += chunk
            if len(form) > self._max_body_bytes:
                raise _body_too_large(self._max_body_bytes)
        return bytes(form)

    def _headers(self, query_id: str, session_timezone: str | None = None) -> dict[str, str]:
        return {
            "X-ClickHouse-Query-Id": query_id,
            "X-ClickHouse-Server-Display-Name": self._display_name,
            "X-ClickHouse-Timezone": session_timezone or self._engine.timezone,
        }

    def _error_response(self, error: ClickHouseError, query_id: str) -> Response:
        text = error.text if "(version " in error.text else f"{error.text} (version {self._engine.version})"
        headers = self._headers(query_id) | {"X-ClickHouse-Exception-Code": str(error.code)}
        return PlainTextResponse(text + "\n", status_code=error.http_status, headers=headers)

    def _log(self, error: ClickHouseError, query_id: str) -> None:
        if error.code == ErrorCode.STD_EXCEPTION:
            # Not an answer from the engine but a failure of this endpoint (or of chDB's binding).
            logger.error("query %s failed", query_id, exc_info=error.__cause__ or error)
        else:
            # What the client was told, in one line: the statement's own errors are the client's to fix.
            logger.warning("query %s: %s", query_id, error.text.partition("\n")[0][:300])


def _nothing() -> None:
    return None


def build_app(
    data_dir: Path, user: str, password: str, *, port: int, max_body_bytes: int = MAX_BODY_BYTES
) -> Starlette:
    """The endpoint as an ASGI app, served on loopback at `port`; the engine on `data_dir` is
    open while the app runs."""
    if not password:
        # An empty password is what an anonymous request presents.
        raise ValueError("the ClickHouse endpoint needs a password")
    interface = HttpInterface(Engine(data_dir), Credentials(user, password), port, max_body_bytes)
    return Starlette(
        routes=[
            Route("/ping", interface.ping, methods=["GET"]),
            Route("/", interface.query, methods=["GET", "POST"]),
        ],
        lifespan=interface.lifespan,
    )


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
