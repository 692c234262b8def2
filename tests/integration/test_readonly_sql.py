"""`tally query` / Explore: reads of the archive work; writes, DDL, other databases, private
tables, files, output clauses and settings are refused with one clear line — and nothing was
written or leaked. Every query runs through the real guard against the real engine."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

import httpx
import pytest

from dashboard import explore
from dashboard.periods import period
from storage import readonly_sql
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

SITE = "readonly.example.com"
#: A salt of a day far ahead: private, no collector hashes with it, and none forgets it (collectors
#: sharing the store delete salts before their retention cutoff: one took 2000-01-01 mid-module).
SALT_DAY = date(2099, 12, 31)


@dataclass(frozen=True)
class Secrets:
    """What an escape would reach: a file only the server process can read, a salt, a path
    an escape would write to."""

    file: Path
    file_content: str
    salt: str
    outfile: Path

    def fill(self, sql: str) -> str:
        return sql.format(secret_file=self.file, outfile=self.outfile)

    def leaked_in(self, text: str) -> bool:
        return self.file_content in text or self.salt in text


@pytest.fixture(scope="module", autouse=True)
def archive_with_one_event(settings: Settings) -> None:
    client = connect(settings)
    add_site(client, SITE)
    rows, columns = archive_rows([page_view(SITE, "v", datetime.now(UTC), ip_hash="i")])
    client.insert("events", rows, column_names=columns)


@pytest.fixture(scope="module")
def reachable(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Secrets:
    folder = tmp_path_factory.mktemp("readonly-sql")
    secret_file = folder / "api_key"
    secret_file.write_text(secrets.token_hex(16))
    salt = secrets.token_hex(32)
    connect(settings).insert("salts", [[SALT_DAY, salt]], column_names=["day", "salt"])
    return Secrets(secret_file, secret_file.read_text(), salt, folder / "written.csv")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count() FROM events",
        "SELECT site, count() FROM tally.events GROUP BY site",
        "WITH recent AS (SELECT path FROM events WHERE ts > now() - INTERVAL 1 DAY) "
        "SELECT count() FROM recent",
        "SELECT e.path FROM events AS e WHERE e.site IN (SELECT domain FROM sites) LIMIT 5",
        "SELECT 1",
        # Aggregates with combinators and parameters, window functions, lambdas, ARRAY JOIN,
        # UNION, IN a readable table, a comment that looks like a second statement.
        f"SELECT countIf(path = '/'), uniqExact(visitor_id), quantile(0.5)(screen_width), "
        f"toStartOfHour(ts) AS hour FROM events WHERE site = '{SITE}' GROUP BY hour",
        f"SELECT path, row_number() OVER (PARTITION BY site ORDER BY ts) FROM events WHERE site = '{SITE}'",
        "SELECT arrayMap(x -> x * 2, [1, 2]), arrayFilter(x -> x > 1, [1, 2, 3])",
        f"SELECT k FROM events LEFT ARRAY JOIN mapKeys(props) AS k WHERE site = '{SITE}'",
        f"SELECT site FROM events WHERE site = '{SITE}' UNION ALL SELECT domain FROM sites",
        "WITH d AS (SELECT domain FROM sites) "
        f"SELECT count() FROM events WHERE site IN d AND site = '{SITE}'",
        "SELECT count() FROM events -- ; DROP TABLE events",
        "SELECT COUNT(*), LOWER('A') FROM events",
    ],
)
def test_reads_of_the_archive_are_answered(settings: Settings, sql: str) -> None:
    result = readonly_sql.run(settings, sql)
    assert result.columns and result.rows


# The adversarial corpus: (query, what the one-line refusal says). {secret_file} and {outfile}
# are filled in per run: a file the engine's process can read, a path it could write.
ESCAPES = [
    # statements other than SELECT
    ("INSERT INTO events (site) VALUES ('x')", "only select"),
    ("ALTER TABLE events DELETE WHERE 1", "only select"),
    ("DROP TABLE events", "only select"),
    ("TRUNCATE TABLE events", "only select"),
    ("CREATE TABLE x (a UInt8) ENGINE = Memory", "only select"),
    ("SHOW TABLES FROM system", "only select"),
    ("DESCRIBE TABLE salts", "only select"),
    ("EXPLAIN SELECT * FROM salts", "only select"),
    ("SELECT count() FROM events; DROP TABLE events", "multi"),
    ("SELECT 1 -- comment\n; DROP TABLE events", "multi"),
    ("SELECT 1 /* ; */ ; SELECT salt FROM salts", "multi"),
    # writing files: INTO OUTFILE in every variant, FORMAT and SETTINGS clauses
    ("SELECT * FROM events INTO OUTFILE '{outfile}'", "into outfile"),
    ("SELECT * FROM events INTO OUTFILE '{outfile}' FORMAT CSV", "into outfile"),
    (
        "SELECT * FROM events INTO OUTFILE '{outfile}' TRUNCATE FORMAT CSV SETTINGS max_threads = 1",
        "into outfile",
    ),
    ("SELECT * FROM events INTO OUTFILE '{outfile}' APPEND COMPRESSION 'gzip' LEVEL 3", "into outfile"),
    ("SELECT 1 INTO OUTFILE '{outfile}' AND STDOUT", "into outfile"),
    ("SELECT 1 /* hidden */ INTO /* hidden */ OUTFILE '{outfile}'", "into outfile"),
    ("SELECT 1 UNION ALL SELECT 2 INTO OUTFILE '{outfile}'", "into outfile"),
    ("WITH x AS (SELECT 1) SELECT * FROM x INTO OUTFILE '{outfile}'", "into outfile"),
    ("SELECT * FROM events LIMIT 1 FORMAT Null", "format"),
    (
        "SELECT count() FROM events WHERE site IN (SELECT domain FROM sites SETTINGS max_threads = 1)",
        "settings",
    ),
    ("SELECT * FROM events FORMAT CSV", "format"),
    ("SELECT * FROM events FORMAT CSV SETTINGS max_threads = 1", "settings"),
    ("SELECT 1 SETTINGS readonly = 0", "readonly"),
    ("SELECT 1 SETTINGS max_memory_usage = 0", "settings"),
    ("SELECT * FROM (SELECT 1 SETTINGS max_memory_usage = 0)", "settings"),
    # reading files and the network: scalar and table functions, in every position and case
    ("SELECT file('{secret_file}')", "file()"),
    ("SELECT FILE('{secret_file}')", "file()"),
    ("SELECT `file`('{secret_file}')", "file()"),
    ("SELECT arrayMap(p -> file(p), ['{secret_file}'])", "file()"),
    ("SELECT * APPLY(file) FROM (SELECT '{secret_file}' AS p)", "apply"),
    ("SELECT count() FROM events WHERE path = file('{secret_file}')", "file()"),
    ("WITH file('{secret_file}') AS k SELECT k", "file()"),
    ("SELECT * FROM file('{secret_file}', 'LineAsString')", "table functions"),
    ("SELECT * FROM url('http://127.0.0.1:1/', 'CSV')", "table functions"),
    ("SELECT * FROM url('file://{secret_file}', 'LineAsString')", "table functions"),
    ("SELECT * FROM events WHERE site IN (SELECT * FROM file('{secret_file}', 'LineAsString'))", "file()"),
    ("SELECT * FROM remote('127.0.0.1', system.one)", "table functions"),
    ("SELECT * FROM s3('http://127.0.0.1:1/x', 'CSV')", "table functions"),
    ("SELECT * FROM input('a String')", "table functions"),
    ("SELECT * FROM executable('cat {secret_file}', 'TSV', 'a String')", "table functions"),
    ("SELECT * FROM view(SELECT salt FROM salts)", "table functions"),
    ("SELECT * FROM merge('tally', 'salts')", "table functions"),
    ("SELECT * FROM cluster('default', tally.salts)", "table functions"),
    ("SELECT * FROM numbers(10)", "table functions"),
    ("SELECT * FROM dictionary('anything')", "table functions"),
    ("SELECT * FROM events AS e JOIN numbers(10) AS n ON 1", "table functions"),
    # dictionaries, joins by name, settings and system introspection
    ("SELECT dictGet('anything', 'a', 1)", "dictget()"),
    ("SELECT joinGet('salts', 'salt', toDate('{salt_day}'))", "joinget()"),
    ("SELECT getSetting('readonly')", "getsetting()"),
    ("SELECT currentDatabase()", "currentdatabase()"),
    ("SELECT hostName()", "hostname()"),
    ("SELECT version()", "version()"),
    ("SELECT filesystemAvailable()", "filesystemavailable()"),
    ("SELECT sleep(3)", "sleep()"),
    # the salts and other private tables, in any position
    ("SELECT * FROM salts", "private"),
    ("SELECT * FROM `salts`", "private"),
    ("SELECT * FROM tally.`salts`", "private"),
    ("SELECT * FROM schema_migrations", "private"),
    ("SELECT e.site FROM events AS e JOIN tally.salts AS s ON 1", "private"),
    ("SELECT count() FROM events WHERE (toDate('{salt_day}'), '') IN tally.salts", "private"),
    ("SELECT count() FROM events WHERE site NOT IN salts", "private"),
    ("SELECT count() FROM events WHERE site GLOBAL IN (salts)", "private"),
    ("SELECT (SELECT any(salt) FROM salts)", "private"),
    ("WITH (SELECT any(salt) FROM salts) AS s SELECT s", "private"),
    ("WITH s AS (SELECT salt FROM salts) SELECT * FROM s", "private"),
    ("WITH salts AS (SELECT 1) SELECT * FROM salts", "private"),
    ("SELECT site FROM events UNION ALL SELECT salt FROM salts", "private"),
    ("SELECT site FROM events INTERSECT SELECT salt FROM salts", "private"),
    ("SELECT site FROM events WHERE EXISTS (SELECT 1 FROM salts)", "private"),
    ("SELECT has(salts, 1) FROM events", "private"),
    # other databases, in any position
    ("SELECT * FROM system.tables", "system.tables"),
    ('SELECT * FROM "system"."tables"', "system.tables"),
    ("SELECT * FROM INFORMATION_SCHEMA.TABLES", "information_schema.tables"),
    ("SELECT * FROM default.anything", "default.anything"),
    ("SELECT 1 IN system.numbers", "system.numbers"),
    ("WITH system AS (SELECT 1 AS numbers) SELECT 1 IN system.numbers", "system.numbers"),
    ("SELECT count() FROM events WHERE site IN (SELECT name FROM system.databases)", "system.databases"),
    ("SELECT * FROM events AS e, system.one", "system.one"),
    ("SELECT * FROM tally.not_a_table", "not one of the tables"),
    # query parameters
    ("SELECT {{x:String}}", "query parameters"),
    ("SELECT * FROM {{table:Identifier}}", "query parameters"),
]


@pytest.mark.parametrize(("sql", "says"), ESCAPES)
def test_escapes_are_refused_in_one_line_with_nothing_written_or_leaked(
    settings: Settings, reachable: Secrets, sql: str, says: str
) -> None:
    query = reachable.fill(sql.replace("{salt_day}", SALT_DAY.isoformat()))
    with pytest.raises(readonly_sql.QueryRefused) as refused:
        readonly_sql.run(settings, query)
    message = str(refused.value)
    assert says in message.lower()
    assert "\n" not in message and "Traceback" not in message
    assert not reachable.leaked_in(message)
    assert not reachable.outfile.exists()
    assert "events" in [row[0] for row in connect(settings).query("SHOW TABLES").result_rows]


def test_escape_targets_are_real(settings: Settings, reachable: Secrets) -> None:
    """The corpus would catch an escape: the engine itself reads the file and the salt (and
    readonly=1 alone does not stop it), so only the guard stands between them and a user."""
    client = connect(settings)
    read = client.query(f"SELECT file('{reachable.file}')", settings={"readonly": 1}).result_rows
    salted = client.query(f"SELECT salt FROM salts WHERE day = '{SALT_DAY}'").result_rows
    assert read == [(reachable.file_content,)]
    assert salted == [(reachable.salt,)]


def test_explores_starting_query_passes_the_guard_and_finds_the_event(settings: Settings) -> None:
    filters = explore.explore_filters("pageview", "/", None, None)
    today = period("today", datetime.now(UTC))
    sql = readonly_sql.starting_sql(SITE, today.start, today.end, filters, 1000)
    result = readonly_sql.run(settings, sql)
    assert [row[result.columns.index("path")] for row in result.rows] == ["/"]


def test_results_are_capped(settings: Settings) -> None:
    result = readonly_sql.run(settings, "SELECT number FROM (SELECT arrayJoin(range(50000)) AS number)")
    assert len(result.rows) == readonly_sql.MAX_ROWS
    assert result.truncated


def test_query_needing_8_gib_fails_on_the_memory_limit_and_the_store_stays_up(settings: Settings) -> None:
    # 8,000 strings of 1 MB gathered into one array: 8 GiB if nothing stopped it.
    greedy = (
        "SELECT length(groupArray(repeat('x', 1000000))) "
        f"FROM (SELECT arrayJoin(range(8000)) AS i FROM events WHERE site = '{SITE}')"
    )
    with pytest.raises(readonly_sql.QueryRefused) as refused:
        readonly_sql.run(settings, greedy)
    assert "needs more than 1 GiB of memory" in str(refused.value)
    assert httpx.get(f"{settings.clickhouse_url}/ping").text == "Ok.\n"
    assert readonly_sql.run(settings, f"SELECT count() FROM events WHERE site = '{SITE}'").rows == [(1,)]


def test_in_set_over_the_row_limit_is_refused_in_one_line(settings: Settings) -> None:
    over = readonly_sql.LIMITS["max_rows_in_set"] + 1_000_000
    with pytest.raises(readonly_sql.QueryRefused) as refused:
        readonly_sql.run(settings, f"SELECT count() FROM events WHERE 1 IN (SELECT arrayJoin(range({over})))")
    assert "IN (subquery) set holds more than 10,000,000 rows" in str(refused.value)


def test_cli_prints_a_refusal_as_one_line_and_exits_non_zero(settings: Settings, reachable: Secrets) -> None:
    cli = subprocess.run(
        [sys.executable, "-m", "ops.cli", "query", f"SELECT file('{reachable.file}')"],
        env=os.environ | settings.environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = cli.stdout + cli.stderr
    assert cli.returncode == 2
    assert cli.stdout == ""
    assert cli.stderr.strip() == "tally: query refused: the function file() is not allowed in raw SQL"
    assert not reachable.leaked_in(output)


def test_cli_answers_a_count_of_the_archive(settings: Settings) -> None:
    cli = subprocess.run(
        [sys.executable, "-m", "ops.cli", "query", "SELECT count() FROM events", "--format", "csv"],
        env=os.environ | settings.environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.splitlines()[0] == "count()"
    assert int(cli.stdout.splitlines()[1]) >= 1
