"""Loopback ports: is one taken, find free ones.

A free port is picked below Linux's ephemeral range: a port the kernel hands out for `bind(0)`
lies inside that range, so between the moment it is picked and the moment a server binds it,
any outgoing connection (a Kafka client, a JDBC pool) can take it as its source port and the
server then fails to start. Ports handed out once are not handed out again by this process.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST = 10000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_handed_out: set[int] = set()


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def free_port(share: tuple[int, int] = (0, 1)) -> int:
    """One free loopback port outside the ephemeral range (`share`: free_port_block's)."""
    return free_port_block(1, share)


def free_port_block(size: int, share: tuple[int, int] = (0, 1)) -> int:
    """The first of `size` consecutive free loopback ports outside the ephemeral range; with
    `share` (k, n), from the k-th of n equal slices of that range only, so that n processes
    picking at once (the test workers) never pick the same port before one binds it."""
    lowest, below = _slice(share, LOWEST, _ephemeral_start())
    for _ in range(500):
        base = random.randrange(lowest, below - size)
        block = range(base, base + size)
        if not _handed_out.intersection(block) and all(map(_bindable, block)):
            _handed_out.update(block)
            return base
    raise RuntimeError(f"no {size} consecutive free loopback ports between {lowest} and {below}")


def _slice(share: tuple[int, int], lowest: int, below: int) -> tuple[int, int]:
    index, count = share
    if not 0 <= index < count:
        raise ValueError(f"not a share of the port range: {share}")
    width = (below - lowest) // count
    return lowest + index * width, lowest + (index + 1) * width


def _ephemeral_start() -> int:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
