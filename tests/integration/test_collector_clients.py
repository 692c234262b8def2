"""Who the client is, and how long it may take to say something — against the real collector
process (`python -m collector.app` on the session's Kafka and ClickHouse endpoint): a proxy
that adds its own X-Forwarded-For line, IPv6 clients keyed on their /64, and clients that
send their headers or body slowly, or never, or far too much of them."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import httpx
import orjson
import pytest

from collector.enrichment import keyed_hash
from collector.salts import Salts
from storage.client import connect
from tally.settings import Settings
from tests.fixtures.collector_server import register_site, running_collector
from tests.fixtures.ports import free_port
from tests.integration.test_collector import BROWSER_UA, events_on_log_for, publish_block, wait_for

pytestmark = pytest.mark.integration

PROXIED_SITE = "proxied.example.com"
IPV6_SITE = "ipv6.example.com"
SLOW_SITE = "slow.example.com"
# The collector process under test gives up on headers, and on a body, after this long.
CLIENT_TIMEOUT_S = 1
# How long a test waits for an answer before calling the connection held: a bound on a hang,
# far beyond the body timeout, not a measurement.
HANG_S = 30
PROXY_ADDRESS = "127.0.0.2"


@pytest.fixture(scope="module")
def collector(settings: Settings) -> Iterator[str]:
    overrides = {
        "TALLY_COLLECTOR_HEADER_TIMEOUT_S": str(CLIENT_TIMEOUT_S),
        "TALLY_COLLECTOR_BODY_TIMEOUT_S": str(CLIENT_TIMEOUT_S),
    }
    with running_collector(settings, free_port(), overrides) as url:
        for site in (PROXIED_SITE, IPV6_SITE, SLOW_SITE):
            register_site(settings, url, site)
        yield url


def post_pageview(collector: str, site: str, path: str, forwarded_for: list[str]) -> int:
    """A beacon as it reaches the collector through a trusted proxy, with one header line per
    entry of `forwarded_for`. The proxy is 127.0.0.2 (trusted through 127.0.0.0/8), not
    127.0.0.1, which uvicorn itself would trust if the collector let it rewrite the peer."""
    headers = [("User-Agent", BROWSER_UA), ("Content-Type", "text/plain")]
    headers += [("X-Forwarded-For", line) for line in forwarded_for]
    body = orjson.dumps({"d": site, "u": f"https://{site}{path}"})
    with httpx.Client(transport=httpx.HTTPTransport(local_address=PROXY_ADDRESS), timeout=HANG_S) as proxy:
        return proxy.post(f"{collector}/api/event", content=body, headers=headers).status_code


def todays_salt(settings: Settings) -> bytes:
    salts = Salts(connect(settings))
    salts.refresh()
    return salts.for_time(datetime.now(UTC))


def test_proxy_appended_forwarded_for_line_wins_over_the_clients_forged_line(
    collector: str, settings: Settings
) -> None:
    # The client sent its own X-Forwarded-For (a GB address); HAProxy's `option forwardfor`
    # added a second line with the address it saw (a DE address).
    assert post_pageview(collector, PROXIED_SITE, "/two-lines", ["81.2.69.142", "5.9.1.1"]) == 202

    [event] = [e for e in events_on_log_for(settings, PROXIED_SITE) if e.path == "/two-lines"]
    assert event.country == "DE"
    assert event.ip_hash == keyed_hash(todays_salt(settings), "5.9.1.1")


def test_ipv6_clients_of_one_64_share_a_rate_limit_key_and_a_block(
    collector: str, settings: Settings
) -> None:
    sent = {
        "/a": "2001:db8:1:2::a",
        "/b": "2001:db8:1:2:ffff:ffff:ffff:b",  # same /64 as /a
        "/c": "2001:db8:1:3::a",  # the next /64
        "/v4": "198.51.100.9",
    }
    for path, address in sent.items():
        assert post_pageview(collector, IPV6_SITE, path, [address]) == 202
    events = {e.path: e for e in events_on_log_for(settings, IPV6_SITE) if e.path in sent}

    assert events["/a"].ip_hash == events["/b"].ip_hash != events["/c"].ip_hash
    assert events["/a"].visitor_id != events["/b"].visitor_id, "visitors stay per address"
    assert events["/v4"].ip_hash == keyed_hash(todays_salt(settings), "198.51.100.9"), "IPv4 unchanged"

    # A block published for the /64 (as the rate-limit job publishes it) stops every address
    # in it, and no other network.
    until = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    publish_block(settings, events["/a"].ip_hash, orjson.dumps({"until": until, "count": 101}))
    try:
        elsewhere_in_64 = ["2001:db8:1:2:1234::99"]
        assert wait_for(lambda: post_pageview(collector, IPV6_SITE, "/blocked", elsewhere_in_64) == 429)
        assert post_pageview(collector, IPV6_SITE, "/other-64", ["2001:db8:1:3::99"]) == 202
    finally:
        publish_block(settings, events["/a"].ip_hash, None)


def start_request(collector: str, first_bytes: bytes) -> socket.socket:
    """A raw connection to the collector that has sent `first_bytes` of a request so far."""
    address = urlsplit(collector)
    connection = socket.create_connection((address.hostname, address.port), timeout=HANG_S)
    # The server may hang up before it has read everything; its answer tells why.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        connection.sendall(first_bytes)
    return connection


def request_head(collector: str, body_length: int) -> bytes:
    return (
        f"POST /api/event HTTP/1.1\r\nHost: {urlsplit(collector).netloc}\r\nUser-Agent: {BROWSER_UA}\r\n"
        f"Content-Type: text/plain\r\nContent-Length: {body_length}\r\n\r\n"
    ).encode()


def dribble(connection: socket.socket, stop: threading.Event, bytes_to_send: int) -> None:
    """One byte every 0.2 s, never the whole request, until the server hangs up or the test ends."""
    for _ in range(bytes_to_send):
        if stop.wait(0.2):
            return
        try:
            connection.sendall(b" ")
        except OSError:
            return


def answer_then_close(connection: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a hang fails the test)."""
    received = b""
    try:
        while chunk := connection.recv(4096):
            received += chunk
    except ConnectionResetError:
        pass  # closed with our unread bytes still in its buffer: the kernel answers with a reset
    finally:
        connection.close()
    return received


def test_slow_body_is_cut_off_while_other_clients_are_served(collector: str, settings: Settings) -> None:
    body_length = 200
    stalled = start_request(collector, request_head(collector, body_length) + b'{"d": "')
    dribbling = start_request(collector, request_head(collector, body_length) + b"{")
    stop = threading.Event()
    dribbler = threading.Thread(target=dribble, args=(dribbling, stop, body_length - 2), daemon=True)
    dribbler.start()
    try:
        assert post_pageview(collector, SLOW_SITE, "/meanwhile", ["198.51.100.10"]) == 202
        for connection in (stalled, dribbling):
            answer = answer_then_close(connection)
            # A 408 with the JSON error, or at least the connection closed: never held open.
            assert answer == b"" or answer.startswith(b"HTTP/1.1 408"), answer[:200]
            assert answer == b"" or b'"error":"body: not received within' in answer
    finally:
        stop.set()
        dribbler.join()

    assert 'tally_events_rejected_total{reason="slow_body"} 2.0' in httpx.get(f"{collector}/metrics").text
    archived = {e.path for e in events_on_log_for(settings, SLOW_SITE)}
    assert "/meanwhile" in archived and archived <= {"/meanwhile", "/meanwhile-headers"}


def test_slow_silent_or_huge_headers_are_cut_off_while_other_clients_are_served(collector: str) -> None:
    request_line = f"POST /api/event HTTP/1.1\r\nHost: {urlsplit(collector).netloc}\r\n".encode()
    silent = start_request(collector, b"")
    dribbling = start_request(collector, request_line + b"X-Padding: ")
    huge = start_request(collector, request_line + b"X-Padding: " + b"a" * 1024 * 1024 + b"\r\n\r\n")
    stop = threading.Event()
    dribbler = threading.Thread(target=dribble, args=(dribbling, stop, 1000), daemon=True)
    dribbler.start()
    try:
        assert post_pageview(collector, SLOW_SITE, "/meanwhile-headers", ["198.51.100.11"]) == 202
        for connection, status in ((silent, b"408"), (dribbling, b"408"), (huge, b"431")):
            answer = answer_then_close(connection)
            assert answer == b"" or answer.startswith(b"HTTP/1.1 " + status), answer[:200]
    finally:
        stop.set()
        dribbler.join()

    # Each cut-off is counted by its reason (a reset seen by a client can then be explained).
    counted = httpx.get(f"{collector}/metrics").text
    assert 'tally_events_rejected_total{reason="slow_headers"} 2.0' in counted
    assert 'tally_events_rejected_total{reason="large_headers"} 1.0' in counted
