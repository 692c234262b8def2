"""The client's IP: the socket peer, or — behind a trusted proxy — the nearest untrusted
address in X-Forwarded-For, read right to left, so a client cannot spoof its way past
the rate limit by sending its own header."""

from __future__ import annotations

from ipaddress import IPv4Network, IPv6Network, ip_address, ip_network

Network = IPv4Network | IPv6Network


def parse_networks(spec: str) -> list[Network]:
    return [ip_network(part.strip(), strict=False) for part in spec.split(",") if part.strip()]


def _trusted(address: str, proxies: list[Network]) -> bool:
    try:
        ip = ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in proxies)


def client_ip(peer: str, forwarded_for: str | None, proxies: list[Network]) -> str:
    if not forwarded_for or not _trusted(peer, proxies):
        return peer
    hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, proxies):
            return hop if _valid(hop) else peer
    # Every hop is a trusted proxy: the left-most is the origin.
    return hops[0] if hops and _valid(hops[0]) else peer


def _valid(address: str) -> bool:
    try:
        ip_address(address)
    except ValueError:
        return False
    return True
