"""uvicorn's httptools protocol with the bounds on a request it lacks: its headers' size,
and the time its headers and its body may take to arrive.

uvicorn bounds a request's headers only with its h11 parser (`h11_max_incomplete_event_size`);
with httptools — several times cheaper per request here, so the one the collector runs — a
client may send megabytes of headers, or send them a byte at a time and hold a connection
slot (`limit_concurrency`) for as long as it likes: the keep-alive timeout stops at its
first byte. uvicorn has no body timeout either. Both deadlines are timers of the event loop,
armed and disarmed by the parser's callbacks: cheaper than a timeout around every read of
the body in the app (asyncio.timeout cost ~4 µs a request, a quarter of the bare app's).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

TOO_SLOW = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
TOO_LARGE = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


def slow_body_answer(body_timeout_s: float) -> bytes:
    body = orjson.dumps({"error": f"body: not received within {body_timeout_s:g} s"})
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


def bounded_httptools(
    header_timeout_s: float,
    max_header_bytes: int,
    body_timeout_s: float,
    on_refused: Callable[[str], None] = lambda reason: None,
) -> type[HttpToolsProtocol]:
    """The protocol class to pass to uvicorn as `http=`. A body not in within body_timeout_s
    of its headers gets a 408 naming the field and the connection closed (the app reading it
    sees the client gone). `on_refused` counts each connection cut off, by reason:
    `slow_headers`, `large_headers`, `slow_body` (a client that sees its connection reset can
    then be told apart from one the server never answered)."""
    too_slow_body = slow_body_answer(body_timeout_s)

    class BoundedHttpToolsProtocol(HttpToolsProtocol):
        _deadline: asyncio.TimerHandle | None = None
        _awaiting_headers = False
        _header_bytes = 0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._await_headers()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            # The next request on a kept-alive connection: its headers are due in time too.
            if self._deadline is None:
                self._await_headers()

        def data_received(self, data: bytes) -> None:
            awaiting_headers = self._awaiting_headers
            super().data_received(data)
            if awaiting_headers and self._awaiting_headers:
                # Still no end of headers: all of it was header bytes (asyncio hands over at
                # most 256 KiB at a time, so this overshoots the bound by at most that).
                self._header_bytes += len(data)
                if self._header_bytes > max_header_bytes:
                    on_refused("large_headers")
                    self._refuse(TOO_LARGE)

        def on_headers_complete(self) -> None:
            self._stop_waiting()
            super().on_headers_complete()
            self._deadline = self.loop.call_later(body_timeout_s, self._body_too_slow)

        def on_message_complete(self) -> None:
            self._stop_waiting()
            super().on_message_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_waiting()
            super().connection_lost(exc)

        def _await_headers(self) -> None:
            self._header_bytes = 0
            self._awaiting_headers = True
            self._deadline = self.loop.call_later(header_timeout_s, self._headers_too_slow)

        def _stop_waiting(self) -> None:
            self._awaiting_headers = False
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _headers_too_slow(self) -> None:
            on_refused("slow_headers")
            self._refuse(TOO_SLOW)

        def _body_too_slow(self) -> None:
            on_refused("slow_body")
            # An app that answered early (a 413 on the declared length) has said its piece.
            answered = self.cycle is not None and self.cycle.response_started
            self._refuse(b"" if answered else too_slow_body)

        def _refuse(self, answer: bytes) -> None:
            self._stop_waiting()
            if not self.transport.is_closing():
                if answer:
                    self.transport.write(answer)
                self.transport.close()

    return BoundedHttpToolsProtocol
