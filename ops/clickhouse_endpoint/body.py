"""The request body: decompressed in bounded pieces, read as a statement or as an INSERT's data."""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import HTTP
from itertools import chain
from typing import Protocol

import backports.zstd
import lz4.frame

from ops.clickhouse_endpoint.errors import ClickHouseError, ErrorCode, body_too_large

#: How far into a request to look for the end of an `INSERT … FORMAT` statement
#: (ClickHouse's max_query_size).
MAX_STATEMENT_BYTES = 256 * 1024
#: The most a compressed body yields per decompression step; what the size limit is checked against.
DECODED_PIECE_BYTES = 1024 * 1024


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
                raise body_too_large(self._limit)
            for piece in self._decoder.decode(chunk):
                decoded += len(piece)
                if decoded > self._limit:
                    raise body_too_large(self._limit)
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
