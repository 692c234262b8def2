"""Finding 9 of issue 29: request bodies up to 1 GiB were accepted (waitress's default), and the
guards parsed a callback's body whole, at several times its size in memory, for anyone with a
shared link.

Through the real server: waitress refuses anything over TALLY_DASHBOARD_MAX_BODY_BYTES (32 MiB)
before reading it; the dashboard refuses a callback or JSON API body over 1 MiB before any guard
parses it; only the import routes (the API's and the Settings panel's upload callback) keep
their 20 MiB file limit, and a shared view may not pass a body off as the upload.
"""

from __future__ import annotations

import json
import select
import socket
from urllib.parse import urlsplit

import httpx
import pytest

from tests.fixtures.dashboard_server import DashboardServer
from tests.security.conftest import Tenants, bearer, opened_share, signed_in

pytestmark = pytest.mark.integration

MiB = 2**20
CALLBACK = "/_dash-update-component"
UPLOAD_OUTPUT = "import-upload.contents"


def over_plain_http(browser: httpx.Client) -> httpx.Client:
    """The same browser, sending its cookies back over the test server's plain HTTP (the session
    cookie is Secure, as behind the TLS proxy, so httpx would keep it to itself)."""
    cookies = "; ".join(f"{cookie.name}={cookie.value}" for cookie in browser.cookies.jar)
    browser.close()
    return httpx.Client(base_url=str(browser.base_url), timeout=60, headers={"Cookie": cookies})


def callback_body(output: str, size: int) -> bytes:
    """A callback request as Dash's renderer writes it (`output` first), padded to `size` bytes."""
    head = json.dumps({"output": output, "inputs": [], "state": []}, separators=(",", ":"))[:-1]
    padding = size - len(head) - len(',"pad":""}')
    return f'{head},"pad":"{"x" * padding}"}}'.encode()


def upload_output(server: DashboardServer) -> str:
    """The Settings panel's upload callback, as the dashboard declares it to the operator."""
    with over_plain_http(signed_in(server)) as operator:
        dependencies = operator.get("/_dash-dependencies").json()
    return next(d["output"] for d in dependencies if UPLOAD_OUTPUT in d["output"])


def refused_as_too_large(answer: httpx.Response) -> bool:
    return answer.status_code == 413 and answer.json()["error"].startswith("body: ")


def test_a_shared_link_visitor_cannot_send_a_2_mib_callback_body(tenants: Tenants) -> None:
    with over_plain_http(opened_share(tenants.server, tenants.share_a)) as visitor:
        answer = visitor.post(
            CALLBACK,
            content=callback_body("overview-chart.figure", 2 * MiB),
            headers={"Content-Type": "application/json"},
        )
    assert refused_as_too_large(answer), (answer.status_code, answer.text[:300])


def test_a_shared_link_visitor_cannot_pass_a_large_body_off_as_the_upload(tenants: Tenants) -> None:
    body = callback_body(upload_output(tenants.server), 2 * MiB)
    with over_plain_http(opened_share(tenants.server, tenants.share_a)) as visitor:
        answer = visitor.post(CALLBACK, content=body, headers={"Content-Type": "application/json"})
    assert refused_as_too_large(answer), (answer.status_code, answer.text[:300])


def test_a_viewers_key_cannot_send_a_2_mib_json_body_to_the_api(tenants: Tenants) -> None:
    with httpx.Client(base_url=tenants.server.url, timeout=30) as api:
        answer = api.post(
            "/api/v1/exclusions",
            params={"site": tenants.site_a},
            content=json.dumps({"kind": "path", "value": "/" + "x" * 2 * MiB}),
            headers={"Content-Type": "application/json"} | bearer(tenants.viewer_a.manage_key),
        )
    assert refused_as_too_large(answer), (answer.status_code, answer.text[:300])


def test_a_40_mib_body_is_refused_by_the_server_before_it_is_read(tenants: Tenants) -> None:
    status_line = post_raw(tenants.server.url, CALLBACK, 40 * MiB)
    assert status_line.split()[1] == "413", status_line


def test_the_operators_upload_and_the_imports_api_keep_their_20_mib_limit(tenants: Tenants) -> None:
    server = tenants.server
    body = callback_body(upload_output(server), 3 * MiB)
    with over_plain_http(signed_in(server)) as operator:
        upload = operator.post(CALLBACK, content=body, headers={"Content-Type": "application/json"})
    assert upload.status_code != 413, upload.text[:300]
    with httpx.Client(base_url=server.url, timeout=60) as api:
        imports = "/api/v1/imports"
        params = {"site": tenants.site_a, "origin": "plausible"}
        three = api.post(imports, params=params, content=b"x" * 3 * MiB, headers=bearer(tenants.operator_key))
        assert three.status_code == 400 and three.json()["error"].startswith("body: "), three.text[:300]
        big = api.post(imports, params=params, content=b"x" * 21 * MiB, headers=bearer(tenants.operator_key))
        assert refused_as_too_large(big) and "tally import" in big.json()["error"], big.text[:300]


def post_raw(url: str, path: str, length: int) -> str:
    """POST a body of `length` bytes as a client that keeps sending until the server answers:
    the answer's status line. A server that refuses by Content-Length answers at once."""
    address = urlsplit(url)
    request = (
        f"POST {path} HTTP/1.1\r\nHost: {address.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\nConnection: close\r\n\r\n"
    ).encode()
    chunk = b"x" * (256 * 1024)
    with socket.create_connection((address.hostname, address.port), timeout=60) as connection:
        connection.sendall(request)
        sent = 0
        try:
            while sent < length:
                readable = select_readable(connection)
                if readable:
                    break
                connection.sendall(chunk[: length - sent])
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed the connection after its answer
        answer = b""
        while b"\r\n" not in answer:
            data = connection.recv(4096)
            if not data:
                break
            answer += data
    return answer.split(b"\r\n", 1)[0].decode()


def select_readable(connection: socket.socket) -> bool:
    """Whether the server has answered (or closed) already."""
    readable, _, _ = select.select([connection], [], [], 0)
    return bool(readable)
