"""The client's IP: the socket peer, or — behind a trusted proxy — the nearest untrusted
address in X-Forwarded-For, read right to left, so a client cannot spoof its way past
the rate limit by sending its own header.

And the network a client answers for: rate limits, blocks and sign-in throttling apply to
it, not to one address. Used by the collector and by the dashboard's sign-in.
"""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

Network = IPv4Network | IPv6Network

# An IPv6 subscriber is routed a whole /64 (often a /56 or /48) and picks any address in it
# at will, so one client is one /64, as one IPv4 client is one address.
IPV6_CLIENT_PREFIX = 64


def parse_networks(spec: str) -> list[Network]:
    return [ip_network(part.strip(), strict=False) for part in spec.split(",") if part.strip()]


def _trusted(address: str, proxies: list[Network]) -> bool:
    try:
        ip = ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in proxies)


def client_ip(peer: str, forwarded_for: Sequence[str], proxies: list[Network]) -> str:
    """`forwarded_for`: every X-Forwarded-For line of the request, in order. A proxy may
    append its own line (HAProxy's `option forwardfor`) instead of extending the client's,
    so the lines are one list: the client's own line comes first and is read last."""
    if not forwarded_for or not _trusted(peer, proxies):
        return peer
    hops = [hop.strip() for line in forwarded_for for hop in line.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, proxies):
            return hop if _valid(hop) else peer
    # Every hop is a trusted proxy: the left-most is the origin.
    return hops[0] if hops and _valid(hops[0]) else peer


def network_key(address: str) -> str:
    """What a client is keyed on for rate limits and blocks: an IPv4 address as it is, an
    IPv6 address as its /64 (an IPv4-mapped IPv6 address as the IPv4 address)."""
    try:
        ip = ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ip_network(f"{ip}/{IPV6_CLIENT_PREFIX}", strict=False))
    return str(ip)


def _valid(address: str) -> bool:
    try:
        ip_address(address)
    except ValueError:
        return False
    return True
