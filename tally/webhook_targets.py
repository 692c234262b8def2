"""Where an alert's webhook may make Tally send requests: an allow-list of addresses (SSRF).

A webhook URL makes the server POST to wherever it points, so whoever may set one must not reach
what only the server can reach: its loopback services (the ClickHouse endpoint), the LAN, the
cloud's metadata service (169.254.169.254, Alibaba's 100.100.100.200, AWS's fd00:ec2::254). A
deny-list of bad ranges missed some (carrier-grade NAT, 192.0.0.0/24, site-local IPv6, 6to4 of
loopback), so an address is allowed only if it is known to be good:

* globally routable: `ipaddress`'s `is_global`, minus the special-purpose ranges that Python
  3.11's `is_global` still calls global (checked on 3.11.7): multicast, 192.0.0.0/24,
  192.88.99.0/24, fec0::/10, 3fff::/20, 5f00::/16 … — for IPv6 only global unicast (2000::/3);
* an address that carries an IPv4 address is judged by that IPv4 address: IPv4-mapped
  (::ffff:a.b.c.d, the same host), 6to4 (2002::/16) and NAT64 (64:ff9b::/96) only when the IPv4
  address is globally routable; Teredo (2001::/32) never (its far end cannot be checked);
* loopback and private networks (127/8, 10/8, 172.16/12, 192.168/16, ::1, fc00::/7) only with
  TALLY_ALERT_WEBHOOK_PRIVATE (a receiver on the same host or LAN), and never a metadata address.

Every address a host resolves to must pass, at a rule's creation (storage/alert_rules.py) and
again before each alert's delivery (alerts/delivery.py), which then connects to the address it
checked, not to the name (DNS rebinding).
"""

from __future__ import annotations

import socket
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network
from urllib.parse import urlsplit

from tally.refusal import Refused

Address = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network

PRIVATE_SETTING = "TALLY_ALERT_WEBHOOK_PRIVATE"


def _networks(*specs: str) -> tuple[Network, ...]:
    return tuple(ip_network(spec) for spec in specs)


# Cloud metadata services: never a webhook, whatever the setting says.
# (Azure's 168.63.129.16 is a public address that only reaches the virtual machine's host.)
METADATA = _networks(
    "169.254.169.254/32", "100.100.100.200/32", "192.0.0.192/32", "168.63.129.16/32", "fd00:ec2::254/128"
)
# Special-purpose IPv4 ranges (IANA's registry) that `is_global` may let through.
NOT_GLOBAL_V4 = _networks(
    "0.0.0.0/8",  # "this network"
    "100.64.0.0/10",  # carrier-grade NAT (and 100.100.100.200, a metadata service)
    "192.0.0.0/24",  # IETF protocol assignments (Python 3.11 calls 192.0.0.8/29 and above global)
    "192.88.99.0/24",  # 6to4 relay anycast, deprecated
    "198.18.0.0/15",  # benchmarking
    "224.0.0.0/4",  # multicast (global to Python 3.11)
    "240.0.0.0/4",  # reserved, and the broadcast address
)
# IPv6: global unicast only, minus its special-purpose ranges.
GLOBAL_UNICAST_V6 = ip_network("2000::/3")
NOT_GLOBAL_V6 = _networks(
    "2001::/23",  # IETF protocol assignments, Teredo (2001::/32) among them
    "2001:db8::/32",  # documentation
    "2002::/16",  # 6to4: judged by the IPv4 address it carries, never as itself
    "3fff::/20",  # documentation (2024; global to Python 3.11)
)
# Inside fec0::/10 (site-local), 5f00::/16 (SRv6), ff00::/8 (multicast): outside 2000::/3 anyway.
TEREDO = ip_network("2001::/32")
NAT64 = ip_network("64:ff9b::/96")
# What TALLY_ALERT_WEBHOOK_PRIVATE opens: the host itself and the private networks, nothing else
# (link-local, carrier-grade NAT, benchmarking and the like stay closed).
PRIVATE_BY_CHOICE = _networks(
    "127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "::1/128", "fc00::/7"
)
LOOPBACK = IPv4Address("127.0.0.1")  # what `localhost` names, whatever a resolver says


class RefusedDestination(Refused):
    """A webhook destination alerts may not be sent to; the message says which address and why."""


class UnresolvedHost(RefusedDestination):
    """A webhook's host that resolves to no address (now)."""


def globally_routable(address: Address) -> bool:
    """Whether the internet routes `address` to one host: the allow-list's core."""
    if not address.is_global or address.is_multicast:
        return False
    if isinstance(address, IPv4Address):
        return not any(address in network for network in NOT_GLOBAL_V4)
    return address in GLOBAL_UNICAST_V6 and not any(address in network for network in NOT_GLOBAL_V6)


def carried_ipv4(address: IPv6Address) -> IPv4Address | None:
    """The IPv4 address a 6to4 or NAT64 address leads to (the packets end up there)."""
    if address.sixtofour is not None:
        return address.sixtofour
    if address in NAT64:
        return IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def refusal(address: Address, allow_private: bool) -> str | None:
    """Why alerts may not go to `address`, or None when they may."""
    if any(address in network for network in METADATA):
        return "a cloud metadata service, never a webhook"
    if isinstance(address, IPv6Address):
        if address.ipv4_mapped is not None:  # the same host as its IPv4 address
            return refusal(address.ipv4_mapped, allow_private)
        if address in TEREDO:
            return "a Teredo tunnel, whose far end cannot be checked"
        if (inner := carried_ipv4(address)) is not None:
            return None if globally_routable(inner) else f"a tunnel to {inner}, not globally routable"
    if globally_routable(address):
        return None
    if any(address in network for network in PRIVATE_BY_CHOICE):
        return None if allow_private else f"loopback or private (set {PRIVATE_SETTING} to allow)"
    return "not a globally routable address"


def resolved_addresses(host: str, port: int) -> list[Address]:
    """Every address `host` resolves to, as the connection would resolve it: getaddrinfo also
    reads the numeric forms (2130706433, 0x7f.1, 0177.0.0.1, 127.1) as the address they are.
    `localhost` and the names under it are loopback by definition (RFC 6761), whatever this
    machine's resolver answers for a spelling such as `localhost.`."""
    if host.rstrip(".") == "localhost" or host.rstrip(".").endswith(".localhost"):
        return [LOOPBACK]
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as error:
        reason = error.strerror if isinstance(error, socket.gaierror) else "not a valid name"
        raise UnresolvedHost(f"cannot resolve {host}: {reason}") from None
    if not infos:
        raise UnresolvedHost(f"cannot resolve {host}: no address")
    return list(dict.fromkeys(ip_address(str(info[4][0]).partition("%")[0]) for info in infos))


def checked_addresses(url: str, allow_private: bool) -> list[Address]:
    """The addresses the webhook's host resolves to, once every one of them passed the policy;
    RefusedDestination (naming the first address refused) otherwise."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # a rule stored before ports were checked
        raise RefusedDestination(f"{url}: the port is not a number from 1 to 65535") from None
    addresses = resolved_addresses(host, port)
    for address in addresses:
        if (reason := refusal(address, allow_private)) is not None:
            shown = "" if host == str(address) else f"{host} resolves to "
            raise RefusedDestination(f"{shown}{address}: {reason}")
    return addresses
