"""The local ClickHouse endpoint's door: who may ask (a password, no web pages, no foreign Host
names), GET stays read-only however readonly is spelled, and a compressed body cannot expand
past the limit. Against the real endpoint process on the real chDB engine."""

from __future__ import annotations

import gzip
import stat
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import backports.zstd
import httpx
import pytest
from clickhouse_connect.driver.client import Client

from ops.clickhouse_endpoint.http import MAX_BODY_BYTES
from tests.fixtures.clickhouse import Endpoint, running_endpoint
from tests.fixtures.ports import free_port

pytestmark = pytest.mark.integration


@pytest.fixture
def visits(clickhouse: Client) -> Iterator[str]:
    """A database holding an empty table `visits (n UInt32)`; yields the database's name."""
    database = f"door_test_{uuid.uuid4().hex[:12]}"
    clickhouse.command(f"CREATE DATABASE {database}")
    clickhouse.command(f"CREATE TABLE {database}.visits (n UInt32) ENGINE = MergeTree ORDER BY n")
    yield database
    clickhouse.command(f"DROP DATABASE IF EXISTS {database}")


def database_exists(clickhouse: Client, database: str) -> bool:
    return bool(clickhouse.command(f"EXISTS DATABASE {database}"))


def refusal(answer: httpx.Response) -> tuple[int, str]:
    return answer.status_code, answer.headers.get("X-ClickHouse-Exception-Code", "")


# --- who may ask -----------------------------------------------------------------------------


def test_anonymous_request_is_refused_and_changes_nothing(
    clickhouse_endpoint: Endpoint, clickhouse: Client, visits: str
) -> None:
    drop = {"query": f"DROP DATABASE {visits}"}

    anonymous = httpx.post(clickhouse_endpoint.url, params=drop)
    empty_password = httpx.post(clickhouse_endpoint.url, params=drop, auth=("default", ""))
    empty_key = httpx.post(
        clickhouse_endpoint.url, params=drop, headers={"X-ClickHouse-User": "default", "X-ClickHouse-Key": ""}
    )

    for answer in (anonymous, empty_password, empty_key):
        assert refusal(answer) == (403, "516"), answer.text
        assert "Authentication failed" in answer.text
    assert database_exists(clickhouse, visits)


def test_the_password_is_generated_into_the_home_readable_by_the_owner_only(
    clickhouse_endpoint: Endpoint,
) -> None:
    password_file = clickhouse_endpoint.home / "clickhouse_password"

    assert password_file.read_text().strip() == clickhouse_endpoint.password
    assert len(clickhouse_endpoint.password) >= 32
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600


@pytest.mark.parametrize("origin", ["https://attacker.example", "null", "http://127.0.0.1:8050"])
def test_request_from_a_web_page_is_refused_even_with_the_password(
    clickhouse_endpoint: Endpoint, clickhouse: Client, visits: str, origin: str
) -> None:
    # A page's no-cors fetch needs no preflight, but the browser always says where it comes from.
    answer = httpx.post(
        clickhouse_endpoint.url,
        params={"query": f"DROP DATABASE {visits}"},
        headers={"Origin": origin},
        auth=clickhouse_endpoint.auth,
    )

    assert refusal(answer) == (403, "497"), answer.text
    assert "Origin header" in answer.text
    assert database_exists(clickhouse, visits)


FOREIGN_HOSTS = [
    "attacker.example:{port}",
    "attacker.example",
    "127.0.0.1",
    "127.0.0.1:{other}",
    "0.0.0.0:{port}",
]


@pytest.mark.parametrize("host", FOREIGN_HOSTS)
def test_request_naming_another_host_is_refused(
    clickhouse_endpoint: Endpoint, clickhouse: Client, visits: str, host: str
) -> None:
    # DNS rebinding: the attacker's domain, re-pointed at 127.0.0.1, keeps its own name in Host.
    port = int(clickhouse_endpoint.url.rsplit(":", 1)[1])
    named = host.format(port=port, other=port + 1)

    answer = httpx.post(
        clickhouse_endpoint.url,
        params={"query": f"DROP DATABASE {visits}"},
        headers={"Host": named},
        auth=clickhouse_endpoint.auth,
    )
    ping = httpx.get(f"{clickhouse_endpoint.url}/ping", headers={"Host": named})

    assert refusal(answer) == (403, "497"), answer.text
    assert f"Host '{named}' is not this endpoint's address" in answer.text
    assert refusal(ping) == (403, "497")
    assert database_exists(clickhouse, visits)


@pytest.mark.parametrize("address", ["127.0.0.1", "localhost", "LocalHost", "[::1]"])
def test_loopback_names_of_its_own_port_are_served(clickhouse_endpoint: Endpoint, address: str) -> None:
    port = clickhouse_endpoint.url.rsplit(":", 1)[1]

    answer = httpx.post(
        clickhouse_endpoint.url,
        content="SELECT 1",
        headers={"Host": f"{address}:{port}"},
        auth=clickhouse_endpoint.auth,
    )

    assert (answer.status_code, answer.text) == (200, "1\n")


# --- GET is read-only ------------------------------------------------------------------------

# What the engine makes of each spelling (checked against chDB 26.9's SET readonly): a number
# with an optional + and size suffix; nothing else parses.
READONLY_SPELLINGS_THAT_PARSE = ["0", "00", "000", "+0", "1", "01", "+1", "2", "1k"]
READONLY_SPELLINGS_THAT_DO_NOT_PARSE = [" 1", "1 ", "true", "false", "0x1", "-1", ""]


@pytest.mark.parametrize("readonly", READONLY_SPELLINGS_THAT_PARSE)
def test_get_never_writes_however_readonly_is_spelled(
    clickhouse_endpoint: Endpoint, clickhouse: Client, visits: str, readonly: str
) -> None:
    answer = httpx.get(
        clickhouse_endpoint.url,
        params={"query": f"INSERT INTO {visits}.visits VALUES (1)", "readonly": readonly},
        auth=clickhouse_endpoint.auth,
    )

    assert answer.headers.get("X-ClickHouse-Exception-Code") == "164", answer.text  # READONLY
    assert clickhouse.command(f"SELECT count() FROM {visits}.visits") == 0


@pytest.mark.parametrize("readonly", ["0", "00", "'00'"])
def test_get_cannot_turn_readonly_off_inside_the_statement(
    clickhouse_endpoint: Endpoint, clickhouse: Client, visits: str, readonly: str
) -> None:
    answer = httpx.get(
        clickhouse_endpoint.url,
        params={"query": f"INSERT INTO {visits}.visits SETTINGS readonly = {readonly} VALUES (1)"},
        auth=clickhouse_endpoint.auth,
    )

    assert answer.headers.get("X-ClickHouse-Exception-Code") == "164", answer.text
    assert "Cannot modify 'readonly' setting in readonly mode" in answer.text
    assert clickhouse.command(f"SELECT count() FROM {visits}.visits") == 0


@pytest.mark.parametrize("readonly", READONLY_SPELLINGS_THAT_DO_NOT_PARSE)
def test_readonly_the_engine_cannot_parse_is_refused(
    clickhouse_endpoint: Endpoint, clickhouse: Client, visits: str, readonly: str
) -> None:
    for send in (httpx.get, httpx.post):
        answer = send(
            clickhouse_endpoint.url,
            params={"query": f"INSERT INTO {visits}.visits VALUES (1)", "readonly": readonly},
            auth=clickhouse_endpoint.auth,
        )
        # CANNOT_PARSE_INPUT_ASSERTION_FAILED, CANNOT_PARSE_NUMBER, or (empty) ATTEMPT_TO_READ_AFTER_EOF
        assert answer.headers["X-ClickHouse-Exception-Code"] in ("27", "72", "32"), answer.text

    assert clickhouse.command(f"SELECT count() FROM {visits}.visits") == 0


def test_post_reads_readonly_as_the_engine_does(
    clickhouse_endpoint: Endpoint, clickhouse: Client, visits: str
) -> None:
    def insert(n: int, readonly: str) -> httpx.Response:
        return httpx.post(
            clickhouse_endpoint.url,
            params={"query": f"INSERT INTO {visits}.visits VALUES ({n})", "readonly": readonly},
            auth=clickhouse_endpoint.auth,
        )

    written = insert(1, "00")
    refused = [insert(n, readonly) for n, readonly in enumerate(["01", "+1", "1k", "2"], start=2)]

    assert written.status_code == 200, written.text
    assert [answer.headers.get("X-ClickHouse-Exception-Code") for answer in refused] == ["164"] * 4
    assert clickhouse.query(f"SELECT n FROM {visits}.visits").result_rows == [(1,)]


def test_get_may_still_read_and_change_settings(clickhouse_endpoint: Endpoint) -> None:
    # readonly=2, as ClickHouse gives a GET: no writes, but settings may change.
    answer = httpx.get(
        clickhouse_endpoint.url,
        params={"query": "SELECT getSetting('max_threads'), getSetting('readonly')", "max_threads": "1"},
        auth=clickhouse_endpoint.auth,
    )

    assert (answer.status_code, answer.text) == (200, "1\t2\n")


# --- compression bombs -----------------------------------------------------------------------


def zstd_bomb(size: int) -> bytes:
    """One zstd frame of `size` zero bytes (4 GiB make 128 KiB), built without holding it."""
    compressor = backports.zstd.ZstdCompressor(level=1)
    megabyte = bytes(1 << 20)
    return b"".join([compressor.compress(megabyte) for _ in range(size >> 20)] + [compressor.flush()])


def gzip_bomb(size: int) -> bytes:
    """Gzip members of 16 MiB of zeros each (16 KiB apiece), `size` bytes in all."""
    member = gzip.compress(bytes(16 << 20), compresslevel=9)
    return member * (size // (16 << 20))


def peak_memory_bytes(pid: int) -> int:
    """The process's peak resident set so far (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for process {pid}")


@pytest.fixture(scope="module")
def own_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    """An endpoint of its own, so that its peak memory is this module's bombs' doing alone."""
    with running_endpoint(tmp_path_factory.mktemp("bomb-home"), free_port()) as endpoint:
        yield endpoint


BOMBS: dict[str, Callable[[], bytes]] = {
    "zstd": lambda: zstd_bomb(4 << 30),
    "gzip": lambda: gzip_bomb(1 << 30),
}


@pytest.mark.parametrize("encoding", sorted(BOMBS))
def test_compression_bomb_is_refused_while_decompressing(own_endpoint: Endpoint, encoding: str) -> None:
    bomb = BOMBS[encoding]()
    before = peak_memory_bytes(own_endpoint.process.pid)

    answer = httpx.post(
        own_endpoint.url,
        params={"query": "SELECT 1"},
        content=bomb,
        headers={"Content-Encoding": encoding},
        auth=own_endpoint.auth,
        timeout=120,
    )
    after = peak_memory_bytes(own_endpoint.process.pid)

    assert refusal(answer) == (413, "229"), answer.text[:300]
    assert f"larger than {MAX_BODY_BYTES} bytes" in answer.text
    # Decompressed whole the bomb needs gigabytes; read up to the limit, two limits at most.
    assert after - before < 2 * MAX_BODY_BYTES, f"peak memory grew by {(after - before) >> 20} MiB"
    assert own_endpoint.process.poll() is None
    still_serving = httpx.post(own_endpoint.url, content="SELECT 1", auth=own_endpoint.auth)
    assert still_serving.text == "1\n"
