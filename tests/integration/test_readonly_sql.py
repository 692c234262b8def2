"""`tally query` / Explore: reads of the archive work; writes, DDL, other databases, private
tables and table functions are refused with a clear message — and nothing changed."""

from __future__ import annotations

import pytest

from storage import readonly_sql
from storage.archiver import SYNTHETIC_PARTITION
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings

pytestmark = pytest.mark.integration

SITE = "readonly.example.com"


@pytest.fixture(scope="module", autouse=True)
def archive_with_one_event(settings: Settings) -> None:
    client = connect(settings)
    add_site(client, SITE)
    client.command(
        "INSERT INTO events "
        "(event_id, site, ts, received_at, url, path, visitor_id, ip_hash, kafka_partition) "
        f"VALUES (generateUUIDv4(), '{SITE}', now64(3), now64(3), 'https://{SITE}/', '/', 'v', 'i', "
        f"{SYNTHETIC_PARTITION})"
    )


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count() FROM events",
        "SELECT site, count() FROM tally.events GROUP BY site",
        "WITH recent AS (SELECT path FROM events WHERE ts > now() - INTERVAL 1 DAY) "
        "SELECT count() FROM recent",
        "SELECT e.path FROM events AS e WHERE e.site IN (SELECT domain FROM sites) LIMIT 5",
        "SELECT 1",
    ],
)
def test_reads_of_the_archive_are_answered(settings: Settings, sql: str) -> None:
    result = readonly_sql.run(settings, sql)
    assert result.columns and result.rows


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        ("INSERT INTO events (site) VALUES ('x')", "only select"),
        ("ALTER TABLE events DELETE WHERE 1", "only select"),
        ("DROP TABLE events", "only select"),
        ("TRUNCATE TABLE events", "only select"),
        ("CREATE TABLE x (a UInt8) ENGINE = Memory", "only select"),
        ("SHOW TABLES FROM system", "only select"),
        ("SELECT * FROM system.tables", "system.tables"),
        ("SELECT * FROM default.anything", "default.anything"),
        ("SELECT * FROM salts", "private"),
        ("SELECT e.site FROM events AS e JOIN tally.salts AS s ON 1", "private"),
        ("SELECT * FROM file('/etc/passwd', 'LineAsString')", "table functions"),
        ("SELECT * FROM url('http://127.0.0.1:1/', 'CSV')", "table functions"),
        ("SELECT count() FROM events WHERE site IN (SELECT name FROM system.databases)", "system.databases"),
        ("SELECT 1 SETTINGS readonly = 0", "readonly"),
        ("SELECT count() FROM events; DROP TABLE events", "multi"),
    ],
)
def test_writes_ddl_and_reads_outside_the_archive_are_refused(
    settings: Settings, sql: str, says: str
) -> None:
    with pytest.raises(readonly_sql.QueryRefused) as refused:
        readonly_sql.run(settings, sql)
    assert says in str(refused.value).lower()
    assert "events" in [row[0] for row in connect(settings).query("SHOW TABLES").result_rows]


def test_results_are_capped(settings: Settings) -> None:
    result = readonly_sql.run(settings, "SELECT number FROM (SELECT arrayJoin(range(50000)) AS number)")
    assert len(result.rows) == readonly_sql.MAX_ROWS
    assert result.truncated
