"""The client's IP: the socket peer, or — behind a trusted proxy — the nearest untrusted
address in X-Forwarded-For, read right to left, so a client cannot spoof its way past
the rate limit by sending its own header.

And the network a client answers for: rate limits, blocks and sign-in throttling apply to
it, not to one address. Used by the collector and by the dashboard's sign-in.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from functools import lru_cache
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

Network = IPv4Network | IPv6Network
Address = IPv4Address | IPv6Address

# An IPv6 subscriber is routed a whole /64 (often a /56 or /48) and picks any address in it
# at will, so one client is one /64, as one IPv4 client is one address.
IPV6_CLIENT_PREFIX = 64


class Networks:
    """A set of networks, asked on every request whether it holds an address: the answers
    for the few addresses asked about again and again (the proxies themselves) are cached."""

    def __init__(self, networks: Sequence[Network]) -> None:
        self.networks = tuple(networks)
        self.holds = lru_cache(maxsize=4096)(self._holds)

    def _holds(self, address: str) -> bool | None:
        """Whether an address is in one of the networks; None if it is no IP address."""
        ip = parse_ip(address)
        return None if ip is None else any(ip in network for network in self.networks)


def parse_ip(address: str) -> Address | None:
    """The address, or None if it is none. The C parser first (the collector parses every
    client's address: ~0.5 µs, where `ip_address` takes ~2 µs); what it refuses (an IPv6
    zone such as `fe80::1%eth0`) gets the standard library's word."""
    try:
        return IPv4Address(int.from_bytes(socket.inet_pton(socket.AF_INET, address), "big"))
    except (OSError, ValueError):
        pass
    try:
        return IPv6Address(socket.inet_pton(socket.AF_INET6, address))
    except (OSError, ValueError):
        pass
    try:
        return ip_address(address)
    except ValueError:
        return None


def parse_networks(spec: str) -> Networks:
    return Networks([ip_network(part.strip(), strict=False) for part in spec.split(",") if part.strip()])


def client_ip(peer: str, forwarded_for: Sequence[str], proxies: Networks) -> str:
    """`forwarded_for`: every X-Forwarded-For line of the request, in order. A proxy may
    append its own line (HAProxy's `option forwardfor`) instead of extending the client's,
    so the lines are one list: the client's own line comes first and is read last."""
    if not forwarded_for or not proxies.holds(peer):
        return peer
    hops = [hop.strip() for line in forwarded_for for hop in line.split(",") if hop.strip()]
    for hop in reversed(hops):
        trusted = proxies.holds(hop)
        if not trusted:
            return peer if trusted is None else hop
    # Every hop is a trusted proxy: the left-most is the origin.
    return hops[0] if hops else peer


def network_key(address: str) -> str:
    """What a client is keyed on for rate limits and blocks: an IPv4 address as it is, an
    IPv6 address as its /64 (an IPv4-mapped IPv6 address as the IPv4 address)."""
    ip = parse_ip(address)
    if ip is None:
        return address
    if isinstance(ip, IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        # The /64 written by the C library (RFC 5952, as `ipaddress` writes it: a unit test
        # holds them equal), ~0.5 µs where building an IPv6Network takes ~8.
        host_bits = 128 - IPV6_CLIENT_PREFIX
        network = (int(ip) >> host_bits << host_bits).to_bytes(16, "big")
        return f"{socket.inet_ntop(socket.AF_INET6, network)}/{IPV6_CLIENT_PREFIX}"
    return str(ip)
