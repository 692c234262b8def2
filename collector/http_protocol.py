"""uvicorn's httptools protocol with the two bounds on request headers it lacks.

uvicorn bounds a request's headers only with its h11 parser (`h11_max_incomplete_event_size`);
with httptools — several times cheaper per request here, so the one the collector runs — a
client may send megabytes of headers, or send them a byte at a time and hold a connection
slot (`limit_concurrency`) for as long as it likes: the keep-alive timeout stops at its
first byte and the body timeout (`read_json`) only starts once the headers are in.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

TOO_SLOW = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
TOO_LARGE = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


def bounded_httptools(header_timeout_s: float, max_header_bytes: int) -> type[HttpToolsProtocol]:
    """The protocol class to pass to uvicorn as `http=`."""

    class BoundedHttpToolsProtocol(HttpToolsProtocol):
        _header_deadline: asyncio.TimerHandle | None = None
        _header_bytes = 0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._await_headers()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            # The next request on a kept-alive connection: its headers are due in time too.
            if self._header_deadline is None:
                self._await_headers()

        def data_received(self, data: bytes) -> None:
            awaiting_headers = self._header_deadline is not None
            super().data_received(data)
            if awaiting_headers and self._header_deadline is not None:
                # Still no end of headers: all of it was header bytes (asyncio hands over at
                # most 256 KiB at a time, so this overshoots the bound by at most that).
                self._header_bytes += len(data)
                if self._header_bytes > max_header_bytes:
                    self._refuse(TOO_LARGE)

        def on_headers_complete(self) -> None:
            self._stop_waiting()
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_waiting()
            super().connection_lost(exc)

        def _await_headers(self) -> None:
            self._header_bytes = 0
            self._header_deadline = self.loop.call_later(header_timeout_s, self._refuse, TOO_SLOW)

        def _stop_waiting(self) -> None:
            if self._header_deadline is not None:
                self._header_deadline.cancel()
                self._header_deadline = None

        def _refuse(self, answer: bytes) -> None:
            self._stop_waiting()
            if not self.transport.is_closing():
                self.transport.write(answer)
                self.transport.close()

    return BoundedHttpToolsProtocol
