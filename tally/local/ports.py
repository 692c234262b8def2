"""Loopback ports: is one taken, find a free one, wait for one to open."""

from __future__ import annotations

import socket
import time


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not port_open(port):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not open 127.0.0.1:{port} within {timeout_s:.0f}s")
        time.sleep(0.2)
