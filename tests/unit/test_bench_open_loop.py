"""The latency section's sender, against a small HTTP server on loopback (no stack)."""

from __future__ import annotations

import asyncio

from bench.open_loop import Sent, post_at_rate


async def _serve_every_third_refused(seen: list[bytes]) -> asyncio.Server:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:  # the sender closed its kept-alive connection
                return
            length = next(
                int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.startswith(b"Content-Length")
            )
            seen.append(await reader.readexactly(length))
            status = b"400 Bad Request" if len(seen) % 3 == 0 else b"202 Accepted"
            writer.write(b"HTTP/1.1 " + status + b"\r\ncontent-length: 2\r\n\r\n{}")
            await writer.drain()

    return await asyncio.start_server(answer, "127.0.0.1", 0)


def test_every_request_is_sent_on_kept_alive_connections_and_each_answer_counted() -> None:
    seen: list[bytes] = []
    sent = Sent()

    async def run() -> None:
        server = await _serve_every_third_refused(seen)
        port = server.sockets[0].getsockname()[1]
        async with server:
            await post_at_rate(
                "127.0.0.1", port, "/api/event", lambda i: {"X-Index": str(i)}, b'{"d":"x"}', 500, 30, sent, 4
            )

    asyncio.run(run())
    assert seen == [b'{"d":"x"}'] * 30
    assert (len(sent.acked), sent.failed) == (20, ["400"] * 10)
