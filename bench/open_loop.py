"""Open-loop POSTs at a fixed rate over kept-alive HTTP/1.1 connections, for the latency section.

Not httpx: its connection pool rescans every connection for every waiting request, which on
this machine capped a 64-connection sender at about 100-330 requests/s with a whole core busy
(measured against the collector, which takes ~3,000/s from wrk) — a latency run "at 1,000/s"
would have offered a tenth of that. A request here is a few bytes written and a status line
and Content-Length body read on a connection the worker owns.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Sent:
    acked: list[float] = field(default_factory=list)  # monotonic time of each 202
    failed: list[str] = field(default_factory=list)  # status or error of each other answer


async def post_at_rate(
    host: str,
    port: int,
    path: str,
    request_headers: Callable[[int], dict[str, str]],
    body: bytes,
    rate: float,
    count: int,
    sent: Sent,
    connections: int = 64,
) -> None:
    """POST `body` `count` times, the i-th due at start + i / rate, over `connections`
    connections; a request waits for a free connection, never for the one before it. `sent`
    fills as answers arrive, so a caller can watch it during the run."""
    due: asyncio.Queue[int | None] = asyncio.Queue()

    async def worker() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while (index := await due.get()) is not None:
                headers = {
                    "Host": f"{host}:{port}",
                    "Content-Length": str(len(body)),
                    **request_headers(index),
                }
                head = f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                writer.write(head.encode("latin-1") + b"\r\n" + body)
                try:
                    status = await _read_response(reader)
                except (OSError, asyncio.IncompleteReadError, ValueError) as error:
                    sent.failed.append(type(error).__name__)
                    writer.close()
                    reader, writer = await asyncio.open_connection(host, port)
                    continue
                if status == 202:
                    sent.acked.append(time.monotonic())
                else:
                    sent.failed.append(str(status))
        finally:
            writer.close()

    workers = [asyncio.create_task(worker()) for _ in range(connections)]
    start = time.monotonic()
    for index in range(count):
        if (delay := start + index / rate - time.monotonic()) > 0:
            await asyncio.sleep(delay)
        due.put_nowait(index)
    for _ in workers:
        due.put_nowait(None)
    await asyncio.gather(*workers)


async def _read_response(reader: asyncio.StreamReader) -> int:
    """The status of one response, its body read (Content-Length) so the connection is reusable."""
    head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)).decode("latin-1")
    status_line, *header_lines = head.split("\r\n")
    headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in header_lines if line)
    }
    if "content-length" not in headers:  # the collector always sends one; anything else is a bug here
        raise ValueError(f"response without Content-Length: {status_line}")
    await reader.readexactly(int(headers["content-length"]))
    return int(status_line.split(" ", 2)[1])
