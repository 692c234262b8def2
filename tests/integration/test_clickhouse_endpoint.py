"""The local ClickHouse endpoint, driven over HTTP as Tally's components drive it:
clickhouse-connect for almost everything, plain HTTP where the wire itself is the point."""

from __future__ import annotations

import gzip
import http.client
import io
import json
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlparse

import httpx
import lz4.frame
import pyarrow.ipc
import pyarrow.parquet
import pytest
import zstandard
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import DatabaseError

from tests.fixtures.clickhouse import Endpoint, connect, running_endpoint
from tests.fixtures.ports import free_port

pytestmark = pytest.mark.integration

PAGEVIEW_COLUMNS = ["event_id", "site", "ts", "path", "screen_width", "props"]
PAGEVIEWS_DDL = """
CREATE TABLE {database}.pageviews (
    event_id UUID,
    site LowCardinality(String),
    ts DateTime64(3, 'UTC'),
    path String,
    screen_width UInt16,
    props Map(String, String)
) ENGINE = MergeTree ORDER BY (site, ts)
"""


def pageview_rows(count: int) -> list[list[Any]]:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    # Paths up to 2 KB make clickhouse-connect cut the insert into several blocks, each one
    # compressed as a frame of its own.
    return [
        [
            uuid.UUID(int=n + 1),
            f"site{n % 3}.example",
            start + timedelta(milliseconds=1001 * n),
            "/" + "p" * (n % 2000),
            n % 2000,
            {"n": str(n)},
        ]
        for n in range(count)
    ]


@pytest.fixture
def database(clickhouse: Client) -> Iterator[str]:
    name = f"endpoint_test_{uuid.uuid4().hex[:12]}"
    clickhouse.command(f"CREATE DATABASE {name}")
    yield name
    clickhouse.command(f"DROP DATABASE IF EXISTS {name}")


def post(
    endpoint: Endpoint, sql: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> httpx.Response:
    return httpx.post(endpoint.url, params={"query": sql}, content=body, headers=headers, auth=endpoint.auth)


def test_ping_and_bare_root_answer_ok(clickhouse_endpoint: Endpoint) -> None:
    assert httpx.get(f"{clickhouse_endpoint.url}/ping").text == "Ok.\n"
    assert httpx.get(f"{clickhouse_endpoint.url}/").text == "Ok.\n"


def test_client_connect_probes_see_a_server(clickhouse: Client) -> None:
    assert clickhouse.server_version.split(".")[0].isdigit()
    assert "max_result_rows" in clickhouse.server_settings
    assert clickhouse.command("SELECT version()") == clickhouse.server_version


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_compressed_insert_reads_back_through_every_query_api(
    clickhouse_endpoint: Endpoint, database: str, compression: str
) -> None:
    client = connect(clickhouse_endpoint, compress=compression, database=database, tz_mode="aware")
    client.command(PAGEVIEWS_DDL.format(database=database))
    rows = pageview_rows(5000)

    summary = client.insert("pageviews", rows, column_names=PAGEVIEW_COLUMNS)

    assert summary.written_rows == 5000
    stored = client.query(f"SELECT {', '.join(PAGEVIEW_COLUMNS)} FROM pageviews").result_rows
    assert sorted(stored) == sorted(tuple(row) for row in rows)
    assert client.command("SELECT count() FROM pageviews") == 5000
    views = client.query_df("SELECT site, count() AS views FROM pageviews GROUP BY site ORDER BY site")
    assert dict(zip(views["site"], views["views"], strict=True)) == Counter(row[1] for row in rows)
    widths = client.query_arrow("SELECT screen_width FROM pageviews")
    assert widths.num_rows == 5000
    assert sum(widths.column("screen_width").to_pylist()) == sum(row[4] for row in rows)
    client.close()


def test_inserts_in_the_body_and_as_values(clickhouse_endpoint: Endpoint, database: str) -> None:
    client = connect(clickhouse_endpoint, compress=False, database=database)
    client.command("CREATE TABLE visits (n UInt32, path String) ENGINE = MergeTree ORDER BY n")

    client.insert(
        "visits", [[1, "/native"]], column_names=["n", "path"]
    )  # INSERT and Native data in the body
    client.raw_insert("visits", ["n", "path"], "2,/csv\n", fmt="CSV")  # INSERT and CSV data in the body
    client.command("INSERT INTO visits FORMAT TSV", data="3\t/tsv\n")  # INSERT in the URL, data in the body
    client.command("INSERT INTO visits VALUES (4, '/values')")

    assert client.query("SELECT n, path FROM visits ORDER BY n").result_rows == [
        (1, "/native"),
        (2, "/csv"),
        (3, "/tsv"),
        (4, "/values"),
    ]
    client.close()


@pytest.mark.parametrize("fmt", ["JSONEachRow", "Native"])
def test_an_insert_the_table_refuses_fails_and_writes_nothing(
    clickhouse_endpoint: Endpoint, database: str, fmt: str
) -> None:
    """A block the table cannot write (here a violated constraint; a full disk alike) is an error
    the client sees, as clickhouse-server answers it — never a 200 for rows that are gone."""
    client = connect(clickhouse_endpoint, compress=False, database=database)
    client.command(
        "CREATE TABLE capped (n UInt32, path String, CONSTRAINT small CHECK n < 100)"
        " ENGINE = MergeTree ORDER BY n"
    )
    with pytest.raises(DatabaseError, match=r"VIOLATED_CONSTRAINT|Constraint"):
        if fmt == "Native":
            client.insert("capped", [[1, "/fine"], [500, "/too-big"]], column_names=["n", "path"])
        else:
            rows = '{"n": 1, "path": "/fine"}\n{"n": 500, "path": "/too-big"}\n'
            client.command("INSERT INTO capped FORMAT JSONEachRow", data=rows)
    assert client.query("SELECT count() FROM capped").result_rows == [(0,)]
    # …and the rows that fit go in, with the columns they leave out at their defaults
    client.command("INSERT INTO capped (n) FORMAT JSONEachRow", data='{"n": 2}\n')
    assert client.query("SELECT n, path FROM capped").result_rows == [(2, "")]
    # …and the data sent with an INSERT … SELECT … FROM input(…) is what `input` reads
    client.command(
        "INSERT INTO capped SELECT n + 10, upper(path) FROM input('n UInt32, path String') WHERE n > 3"
        " FORMAT JSONEachRow",
        data='{"n": 3, "path": "/skipped"}\n{"n": 4, "path": "/kept"}\n',
    )
    assert client.query("SELECT n, path FROM capped ORDER BY n").result_rows == [(2, ""), (14, "/KEPT")]
    client.close()


@pytest.mark.parametrize("fmt", ["JSONEachRow", "Native"])
def test_a_block_inserted_twice_lands_once(clickhouse_endpoint: Endpoint, database: str, fmt: str) -> None:
    """A retried insert whose first answer was lost lands once: a table's deduplication window
    drops an identical block, and a repeated insert_deduplication_token, as clickhouse-server
    does (the archiver's exactly-once rests on it)."""
    client = connect(clickhouse_endpoint, compress=False, database=database)
    client.command(
        "CREATE TABLE retried (n UInt32, path String) ENGINE = MergeTree ORDER BY n"
        " SETTINGS non_replicated_deduplication_window = 100"
    )

    def insert(rows: list[list[object]], settings: dict[str, str] | None = None) -> None:
        if fmt == "Native":
            client.insert("retried", rows, column_names=["n", "path"], settings=settings)
        else:
            data = "".join(json.dumps({"n": n, "path": path}) + "\n" for n, path in rows)
            client.raw_insert("retried", ["n", "path"], data, fmt="JSONEachRow", settings=settings)

    insert([[1, "/a"], [2, "/b"]])
    insert([[1, "/a"], [2, "/b"]])  # the same block again
    assert client.query("SELECT count() FROM retried").result_rows == [(2,)]
    insert([[3, "/c"]], {"insert_deduplication_token": "batch-7"})
    insert([[3, "/c"], [4, "/d"]], {"insert_deduplication_token": "batch-7"})  # the token decides
    assert client.query("SELECT n FROM retried ORDER BY n").result_rows == [(1,), (2,), (3,)]
    client.close()


COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "lz4": lz4.frame.compress,
    "zstd": zstandard.ZstdCompressor().compress,
}


@pytest.mark.parametrize("encoding", sorted(COMPRESSORS))
def test_body_of_several_compressed_frames(
    clickhouse_endpoint: Endpoint, clickhouse: Client, database: str, encoding: str
) -> None:
    clickhouse.command(f"CREATE TABLE {database}.frames (n UInt32) ENGINE = MergeTree ORDER BY n")
    compress = COMPRESSORS[encoding]

    answer = post(
        clickhouse_endpoint,
        f"INSERT INTO {database}.frames FORMAT CSV",
        compress(b"1\n2\n") + compress(b"3\n"),
        headers={"Content-Encoding": encoding},
    )

    assert answer.status_code == 200, answer.text
    assert json.loads(answer.headers["X-ClickHouse-Summary"])["written_rows"] == "3"
    assert clickhouse.query(f"SELECT n FROM {database}.frames ORDER BY n").result_columns == [[1, 2, 3]]


def test_results_come_in_the_format_asked_for(
    clickhouse_endpoint: Endpoint, clickhouse: Client, database: str
) -> None:
    clickhouse.command(f"CREATE TABLE {database}.pages (n UInt8, path String) ENGINE = MergeTree ORDER BY n")
    clickhouse.insert(f"{database}.pages", [[1, "/a"], [2, "/b"]])
    select = f"SELECT n, path FROM {database}.pages ORDER BY n"

    default = post(clickhouse_endpoint, select)
    assert (default.text, default.headers["X-ClickHouse-Format"]) == ("1\t/a\n2\t/b\n", "TabSeparated")
    asked = httpx.get(
        clickhouse_endpoint.url,
        params={"query": select, "default_format": "JSONCompact"},
        auth=clickhouse_endpoint.auth,
    )
    assert asked.json()["data"] == [[1, "/a"], [2, "/b"]]
    assert asked.headers["X-ClickHouse-Format"] == "JSONCompact"
    lines = clickhouse.raw_query(select, fmt="JSONEachRow").decode().splitlines()
    assert [json.loads(line) for line in lines] == [{"n": 1, "path": "/a"}, {"n": 2, "path": "/b"}]
    assert clickhouse.raw_query(select, fmt="CSVWithNames") == b'"n","path"\n1,"/a"\n2,"/b"\n'
    assert json.loads(clickhouse.raw_query(select, fmt="JSON"))["rows"] == 2
    parquet = pyarrow.parquet.read_table(io.BytesIO(clickhouse.raw_query(select, fmt="Parquet")))
    assert parquet.to_pydict() == {"n": [1, 2], "path": ["/a", "/b"]}
    arrow = pyarrow.ipc.open_file(clickhouse.raw_query(select, fmt="Arrow")).read_all()
    assert arrow.to_pydict() == {"n": [1, 2], "path": ["/a", "/b"]}


def test_parameters_are_bound_not_spliced(clickhouse: Client, database: str) -> None:
    hostile = "O'Brien \"quoted\" \\back\tslash\n'); DROP TABLE pages; --"
    clickhouse.command(f"CREATE TABLE {database}.pages (path String) ENGINE = MergeTree ORDER BY path")
    clickhouse.insert(f"{database}.pages", [[hostile], ["/other"]])

    echoed = clickhouse.query("SELECT {value:String}", parameters={"value": hostile}).result_rows
    matches = clickhouse.command(
        f"SELECT count() FROM {database}.pages WHERE path = {{value:String}}", parameters={"value": hostile}
    )
    # Past 4 KB clickhouse-connect moves the query and its values into a multipart form.
    long_value = hostile * 100
    long_echo = clickhouse.query("SELECT {value:String}", parameters={"value": long_value}).result_rows

    assert echoed == [(hostile,)]
    assert matches == 1
    assert long_echo == [(long_value,)]
    assert clickhouse.command(f"SELECT count() FROM {database}.pages") == 2


def test_errors_carry_the_clickhouse_exception(clickhouse_endpoint: Endpoint, clickhouse: Client) -> None:
    with pytest.raises(DatabaseError) as bad_sql:
        clickhouse.query("SELEC 1")
    with pytest.raises(DatabaseError) as unknown_table:
        clickhouse.query("SELECT * FROM default.no_such_table")
    with pytest.raises(DatabaseError) as two_statements:
        clickhouse.command("SELECT 1; SELECT 2")

    assert bad_sql.value.code == 62
    assert "DB::Exception: Syntax error" in str(bad_sql.value)
    assert unknown_table.value.code == 60
    assert "no_such_table" in str(unknown_table.value)
    assert "UNKNOWN_TABLE" in str(unknown_table.value)
    assert "Multi-statements are not allowed" in str(two_statements.value)
    on_the_wire = post(clickhouse_endpoint, "SELECT * FROM default.no_such_table")
    assert on_the_wire.status_code == 404
    assert on_the_wire.headers["X-ClickHouse-Exception-Code"] == "60"
    assert on_the_wire.text.startswith("Code: 60. DB::Exception: ")
    assert post(clickhouse_endpoint, "SELEC 1").status_code == 400


def test_readonly_refuses_writes_for_that_query_only(
    clickhouse_endpoint: Endpoint, clickhouse: Client, database: str
) -> None:
    clickhouse.command(f"CREATE TABLE {database}.visits (n UInt32) ENGINE = MergeTree ORDER BY n")

    with pytest.raises(DatabaseError) as refused_insert:
        clickhouse.insert(f"{database}.visits", [[1]], settings={"readonly": 1})
    with pytest.raises(DatabaseError) as refused_command:
        clickhouse.command(f"INSERT INTO {database}.visits VALUES (2)", settings={"readonly": 1})
    read_while_readonly = clickhouse.command(
        f"SELECT count() FROM {database}.visits", settings={"readonly": 1}
    )
    refused_get = httpx.get(
        clickhouse_endpoint.url,
        params={"query": f"INSERT INTO {database}.visits VALUES (3)"},
        auth=clickhouse_endpoint.auth,
    )
    clickhouse.insert(f"{database}.visits", [[4]])

    assert (refused_insert.value.code, refused_command.value.code) == (164, 164)
    assert "READONLY" in str(refused_insert.value)
    assert read_while_readonly == 0
    assert refused_get.headers["X-ClickHouse-Exception-Code"] == "164"
    assert clickhouse.query(f"SELECT n FROM {database}.visits").result_rows == [(4,)]


def test_settings_apply_to_their_own_query(clickhouse: Client) -> None:
    with pytest.raises(DatabaseError) as limited:
        clickhouse.query(
            "SELECT number FROM numbers(10)", settings={"max_result_rows": 3, "result_overflow_mode": "throw"}
        )
    with pytest.raises(DatabaseError) as unknown:
        clickhouse.query("SELECT 1", settings={"no_such_setting": 1})

    assert "TOO_MANY_ROWS_OR_BYTES" in str(limited.value)
    assert unknown.value.code == 115
    assert len(clickhouse.query("SELECT number FROM numbers(10)").result_rows) == 10


def test_body_over_the_limit_is_refused(clickhouse_endpoint: Endpoint) -> None:
    address = urlparse(clickhouse_endpoint.url)
    connection = http.client.HTTPConnection(address.hostname or "", address.port)
    connection.putrequest("POST", "/?" + urlencode({"query": "INSERT INTO default.t FORMAT CSV"}))
    connection.putheader("X-ClickHouse-Key", clickhouse_endpoint.password)
    connection.putheader("Content-Length", str(300 * 1024 * 1024))
    connection.endheaders(b"1\n")

    answer = connection.getresponse()

    assert answer.status == 413
    assert answer.getheader("X-ClickHouse-Exception-Code") == "229"
    connection.close()


def test_wrong_credentials_are_refused(tmp_path: Path) -> None:
    with running_endpoint(tmp_path, free_port(), password="s3cret") as endpoint:
        with pytest.raises(DatabaseError) as wrong_password:
            connect(endpoint, password="wrong")
        with pytest.raises(DatabaseError) as wrong_user:
            connect(endpoint, username="nobody", password="s3cret")
        client = connect(endpoint)
        answered = client.command("SELECT 1")
        client.close()

        def answer(**request: Any) -> httpx.Response:
            return httpx.post(endpoint.url, content="SELECT 1", **request)

        assert (wrong_password.value.code, wrong_user.value.code) == (516, 516)
        assert "AUTHENTICATION_FAILED" in str(wrong_password.value)
        assert answered == 1
        assert answer(headers={"X-ClickHouse-User": "default", "X-ClickHouse-Key": "s3cret"}).text == "1\n"
        assert answer(headers={"X-ClickHouse-User": "default", "X-ClickHouse-Key": "nope"}).status_code == 403
        assert answer(params={"user": "default", "password": "s3cret"}).text == "1\n"
        assert answer().status_code == 403


def test_data_survives_an_endpoint_restart(tmp_path: Path) -> None:
    with running_endpoint(tmp_path, free_port()) as endpoint:
        client = connect(endpoint)
        client.command("CREATE DATABASE kept")
        client.command("CREATE TABLE kept.visits (n UInt32) ENGINE = MergeTree ORDER BY n")
        client.insert("kept.visits", [[n] for n in range(1000)])
        client.close()

    with running_endpoint(tmp_path, free_port()) as endpoint:
        client = connect(endpoint)
        assert client.query("SELECT count(), sum(n) FROM kept.visits").first_row == (1000, sum(range(1000)))
        client.close()


def test_concurrent_clients_see_their_own_writes(
    clickhouse_endpoint: Endpoint, clickhouse: Client, database: str
) -> None:
    clickhouse.command(
        f"CREATE TABLE {database}.visits (worker UInt8, n UInt32) ENGINE = MergeTree ORDER BY n"
    )
    workers, batches, batch_rows = 8, 5, 500

    def insert_and_read(worker: int) -> list[tuple[int, int]]:
        client = connect(clickhouse_endpoint, database=database)
        seen = []
        for batch in range(batches):
            numbers = range(batch * batch_rows, (batch + 1) * batch_rows)
            client.insert("visits", [[worker, n] for n in numbers], column_names=["worker", "n"])
            # Readers run read-only while the others write: the setting must not reach them.
            seen.append(
                client.query(
                    "SELECT count(), sum(n) FROM visits WHERE worker = {worker:UInt8}",
                    parameters={"worker": worker},
                    settings={"readonly": 1},
                ).first_row
            )
        client.close()
        return seen

    with ThreadPoolExecutor(workers) as pool:
        seen_by_worker = list(pool.map(insert_and_read, range(workers)))

    expected = [(rows, sum(range(rows))) for rows in range(batch_rows, batches * batch_rows + 1, batch_rows)]
    assert seen_by_worker == [expected] * workers
    assert clickhouse.command(f"SELECT count() FROM {database}.visits") == workers * batches * batch_rows
