"""The client of a dashboard request: one policy, applied once, before Flask sees the request.

Behind the TLS proxy (deploy/Caddyfile) every peer is the proxy. waitress could translate
X-Forwarded-For itself, but it trusts one exact peer address (or every peer, `*`) and takes a
fixed count of hops, while TALLY_TRUSTED_PROXIES is a list of networks read hop by hop from the
right (tally/client_ip.py, the collector's policy). So the server hands the header through
untouched (`clear_untrusted_proxy_headers=False`, dashboard/app.py) and this middleware decides:
REMOTE_ADDR becomes the client that tally/client_ip.client_ip finds, the proxy's own address is
kept under PEER_KEY, and forwarding headers from a peer that is not a trusted proxy are dropped,
as waitress would have dropped them. Every throttle, audit row and log line then reads the same
address: `client_address()`, or `request.remote_addr`, which is the same thing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask, request

from tally.client_ip import Networks, client_ip, parse_networks
from tally.settings import Settings

PEER_KEY = "tally.peer"  # the socket's peer (the proxy, behind one)
# What a proxy may say about the request; from anyone else these are the client's own claims.
FORWARDING_HEADERS = (
    "HTTP_X_FORWARDED_FOR",
    "HTTP_X_FORWARDED_HOST",
    "HTTP_X_FORWARDED_PROTO",
    "HTTP_X_FORWARDED_PORT",
    "HTTP_X_FORWARDED_BY",
    "HTTP_FORWARDED",
)

Environ = dict[str, Any]
WsgiApp = Callable[[Environ, Callable[..., Any]], Iterable[bytes]]


class ClientAddressMiddleware:
    """Sets REMOTE_ADDR to the request's client under the trusted-proxy policy."""

    def __init__(self, app: WsgiApp, proxies: Networks) -> None:
        self.app = app
        self.proxies = proxies

    def __call__(self, environ: Environ, start_response: Callable[..., Any]) -> Iterable[bytes]:
        peer = environ.get("REMOTE_ADDR") or "unknown"
        environ[PEER_KEY] = peer
        if self.proxies.holds(peer):
            forwarded = environ.get("HTTP_X_FORWARDED_FOR", "")
            environ["REMOTE_ADDR"] = client_ip(peer, [forwarded] if forwarded else [], self.proxies)
        else:
            for header in FORWARDING_HEADERS:
                environ.pop(header, None)
        return self.app(environ, start_response)


def install_client_address(server: Flask, settings: Settings) -> None:
    server.wsgi_app = ClientAddressMiddleware(server.wsgi_app, parse_networks(settings.trusted_proxies))


def client_address() -> str:
    """The client of the current request (its address, not the proxy's)."""
    return request.remote_addr or "unknown"
