"""A lean HTTP/1.1 client for the sender: persistent keep-alive connections, a request
written as one buffer, an answer read by Content-Length. httpx spent most of the sender's
CPU per event (headers objects, pool bookkeeping, a rescan of its pool queue per answer);
this does only what the collector's two endpoints need."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from urllib.parse import urlparse

import orjson

# Below the collector's keep-alive timeout (uvicorn's default: 5 s).
IDLE_LIMIT_S = 3.0


class SendError(Exception):
    """The request got no answer: a refused or dropped connection, or a timeout."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind  # counted in the summary's statuses, like a status code


@dataclass(frozen=True)
class Answer:
    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> object:
        return json.loads(self.content)


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.idle_since = time.monotonic()

    async def exchange(self, request: bytes) -> tuple[Answer, bool]:
        """One request and its answer; also whether the connection may carry the next."""
        self.writer.write(request)
        status_line = await self.reader.readline()
        if not status_line:
            raise SendError("the collector closed the connection", "RemoteProtocolError")
        status = int(status_line.split(b" ", 2)[1])
        length, keep_alive = 0, True
        while (line := await self.reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection" and value.strip().lower() == b"close":
                keep_alive = False
        body = await self.reader.readexactly(length) if length else b""
        return Answer(status, body), keep_alive

    def close(self) -> None:
        self.writer.close()


class Pool:
    """Up to `size` connections to one collector, reused; a broken one is replaced."""

    def __init__(self, target: str, size: int, timeout_s: float) -> None:
        url = urlparse(target)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 80
        self.host_header = url.netloc.encode()
        self.timeout_s = timeout_s
        self._idle: list[Connection] = []
        self._slots = asyncio.Semaphore(size)

    def request(self, path: str, body: object, headers: dict[str, str]) -> bytes:
        payload = orjson.dumps(body)  # json.dumps built an encoder per request
        lines = [f"POST {path} HTTP/1.1", f"Host: {self.host_header.decode()}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        lines.append(f"Content-Length: {len(payload)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload

    async def post(self, path: str, body: object, headers: dict[str, str]) -> Answer:
        request = self.request(path, body, headers)
        async with self._slots:
            connection = self._fresh_idle()
            try:
                # One deadline per request: asyncio.wait_for wrapped each await in a task of its own.
                async with asyncio.timeout(self.timeout_s):
                    if connection is None:
                        connection = Connection(*await asyncio.open_connection(self.host, self.port))
                    answer, keep_alive = await connection.exchange(request)
            except SendError:
                if connection is not None:
                    connection.close()
                raise
            except (OSError, ValueError, IndexError, asyncio.IncompleteReadError, TimeoutError) as error:
                if connection is not None:
                    connection.close()
                raise SendError(f"{type(error).__name__}: {error}", error_kind(error)) from error
            self._release(connection, keep_alive)
            return answer

    def _fresh_idle(self) -> Connection | None:
        """The most recently used idle connection. One idle for longer than the collector keeps
        it open (uvicorn: 5 s) is closed instead: sending on it could lose the request in a race
        with the server's close, and resending could deliver an event twice."""
        while self._idle:
            connection = self._idle.pop()
            if time.monotonic() - connection.idle_since < IDLE_LIMIT_S:
                return connection
            connection.close()
        return None

    def _release(self, connection: Connection, keep_alive: bool) -> None:
        if keep_alive:
            connection.idle_since = time.monotonic()
            self._idle.append(connection)
        else:
            connection.close()

    def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()


def error_kind(error: Exception) -> str:
    """The names the summary has always counted failures under (httpx's, before this client)."""
    if isinstance(error, TimeoutError):
        return "ReadTimeout"
    if isinstance(error, ConnectionRefusedError):
        return "ConnectError"
    if isinstance(error, OSError):
        return "ReadError"
    return "RemoteProtocolError"
