"""Erasing a deleted site's events (issue 37; storage/erasures.py): its rows leave the archive and
every derived table, another site's stay, the archive still accounts for every offset of the
log (`tally verify --full` clean), and the log does not bring them back through the archiver.

Real Kafka and the real ClickHouse engine, a store and a topic of each test's own; the doors
(`DELETE /api/v1/sites/<site_id>?erase_events=true`, `tally sites remove --erase-events`) on
the real dashboard server and CLI."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from clickhouse_connect.driver.client import Client
from pyspark.sql import SparkSession

from archiver.audit import verify
from archiver.rows import ACCOUNTED_OFFSETS
from storage import erasures, users
from storage.client import connect
from storage.rollup_backfill import backfill_rollups
from storage.sites import add_site, list_sites
from storage.tables import ERASED_TABLES, KEPT_ON_ERASURE, SYNTHETIC_PARTITION
from stream_jobs.context import REPLAY_SUFFIX
from stream_jobs.replay import rebuild
from tally.settings import Settings
from tests.fixtures.archive import archived
from tests.fixtures.cli import run_tally
from tests.fixtures.clickhouse import Endpoint, own_database_settings
from tests.fixtures.dashboard_server import DashboardServer
from tests.fixtures.events import archive_rows, make_events, page_view
from tests.fixtures.spark import minutes_ago, site_names
from tests.fixtures.spark import produce as produce_events
from tests.fixtures.topics import own_store_and_topic
from tests.integration.test_archiver import archive_until, produce
from tests.security.conftest import Tenants, bearer, opened_share
from tests.security.conftest import tenants as tenants  # the module-scoped fixture, shared

pytestmark = pytest.mark.integration

DAY = date(2026, 11, 20)  # make_events' START


def site_columns(client: Client) -> set[str]:
    """The store's tables (not views) with a `site` column."""
    rows = client.query(
        "SELECT DISTINCT c.table FROM system.columns AS c INNER JOIN system.tables AS t "
        "ON c.database = t.database AND c.table = t.name WHERE c.database = currentDatabase() "
        "AND c.name = 'site' AND t.engine NOT IN ('MaterializedView', 'View')"
    ).result_rows
    return {str(row[0]) for row in rows}


@pytest.mark.slow  # migrates a database of its own: about 7 s
def test_every_table_with_a_site_column_is_erased_or_kept_on_purpose(
    tmp_path: Path, clickhouse_endpoint: Endpoint
) -> None:
    client = connect(own_database_settings(tmp_path, clickhouse_endpoint, "erasure_tables"))
    with_site = site_columns(client)
    listed = set(ERASED_TABLES) | set(KEPT_ON_ERASURE)
    assert with_site - listed == set(), "a new table with a site column: erase it or say why it is kept"
    assert listed - with_site == set(), "listed tables the store does not have (renamed?)"
    assert not set(ERASED_TABLES) & set(KEPT_ON_ERASURE)


def rows_per_table(client: Client, site: str) -> dict[str, int]:
    return {
        table: int(
            client.query(
                f"SELECT count() FROM {table} WHERE site = {{site:String}}", parameters={"site": site}
            ).result_rows[0][0]
        )
        for table in ERASED_TABLES
    }


def fill_every_table(client: Client, site: str) -> None:
    """A row of `site` in each erased table the archive's views and the backfill leave empty
    (the stream's late events, alerts, imports, funnel days): now in its times and 1 in its
    numbers (a sum of zeros, a time past its TTL, would not be kept), defaults elsewhere."""
    for table, rows in rows_per_table(client, site).items():
        if rows:
            continue
        columns = client.query(
            "SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = {t:String}",
            parameters={"t": table},
        ).result_rows
        values = {name: value for name, kind in columns if (value := column_value(name, kind))}
        listed = ", ".join(values)
        client.command(
            f"INSERT INTO {table} ({listed}) SELECT {', '.join(values.values())}", parameters={"site": site}
        )


def column_value(name: str, kind: str) -> str:
    inner = (
        kind.removeprefix("SimpleAggregateFunction(").rsplit(", ", 1)[-1].rstrip(")")
        if "Simple" in kind
        else kind
    )
    if name == "site":
        return "{site:String}"
    if inner.startswith(("DateTime", "Date")):
        return f"CAST(now() AS {kind})"
    if inner.startswith(("UInt", "Int", "Float")):
        return f"CAST(1 AS {kind})"
    return ""


def accounted(client: Client) -> list[tuple[int, int]]:
    rows = client.query(
        f"SELECT kafka_partition, kafka_offset FROM ({ACCOUNTED_OFFSETS}) ORDER BY ALL",
        parameters={"synthetic": SYNTHETIC_PARTITION},
    ).result_rows
    return [(int(p), int(o)) for p, o in rows]


def clean(settings: Settings) -> bool:
    """`tally verify --full`, repairing nothing: every offset accounted once, agg equals raw."""
    report = verify(settings, fix=False, full=True)
    return all(p.holes == [] and p.duplicates == 0 for p in report.partitions) and report.ok


def test_an_erasure_empties_every_table_of_the_site_keeps_another_sites_and_the_log_accounted(
    tmp_path: Path, clickhouse_endpoint: Endpoint, kafka_bootstrap: str
) -> None:
    settings = own_store_and_topic(tmp_path, clickhouse_endpoint, kafka_bootstrap, "erasure_archive")
    gone, kept = "gone.example.com", "kept.example.com"
    events = make_events(gone, 300) + make_events(kept, 200)
    asyncio.run(produce(settings, [(e.key, e.to_json()) for e in events]))
    asyncio.run(archive_until(settings, kept, expected=len(events), rows=lambda s, _: accounted_count(s)))
    client = connect(settings)
    for site in (gone, kept):
        add_site(client, site)
        backfill_rollups(client, site, DAY, DAY + timedelta(days=1))
        fill_every_table(client, site)
    kept_before, offsets_before = rows_per_table(client, kept), accounted(client)
    assert all(rows_per_table(client, gone).values()), rows_per_table(client, gone)
    assert clean(settings)

    erased = erasures.erase_site(client, gone, "test")

    assert rows_per_table(client, gone) == dict.fromkeys(ERASED_TABLES, 0)
    assert rows_per_table(client, kept) == kept_before
    assert erased.archived_rows == 300
    assert accounted(client) == offsets_before  # the erased offsets moved to archive_erased
    assert clean(settings)
    assert erasures.latest_version(client, gone) == erased.erasure.version
    assert erasures.latest_version(client, kept) is None


def test_the_archiver_drops_an_erased_sites_old_events_and_keeps_those_received_after(
    tmp_path: Path, clickhouse_endpoint: Endpoint, kafka_bootstrap: str
) -> None:
    settings = own_store_and_topic(tmp_path, clickhouse_endpoint, kafka_bootstrap, "erasure_archiver")
    site, other = "again.example.com", "other.example.com"
    client = connect(settings)
    erasure = erasures.record(client, site, "test")
    # Received before the erasure (still in the log, or sent while it ran) and after it (the
    # domain registered again).
    old = make_events(site, 40)
    new = [page_view(site, f"n{i}", erasure.cutoff + timedelta(seconds=1 + i)) for i in range(10)]
    others = make_events(other, 20)
    asyncio.run(produce(settings, [(e.key, e.to_json()) for e in old + new + others]))

    # Until every offset of the log is accounted for: archived, or erased.
    asyncio.run(archive_until(settings, other, expected=70, rows=lambda s, _: accounted_count(s)))

    assert archived(settings, site) == (10, 10)
    stored = {
        row[0]
        for row in client.query("SELECT event_id FROM events WHERE site = 'again.example.com'").result_rows
    }
    assert stored == {e.event_id for e in new}
    assert archived(settings, other) == (20, 20)
    assert int(client.query("SELECT count() FROM archive_erased FINAL").result_rows[0][0]) == 40
    assert clean(settings)


def accounted_count(settings: Settings) -> int:
    return len(accounted(connect(settings)))


# -- the doors ---------------------------------------------------------------------------------


def stats(api: httpx.Client, site: str, source: str) -> dict:
    answer = api.get(
        "/api/v1/stats/aggregate",
        params={"site": site, "from": "2026-11-20T00:00:00Z", "to": "2026-11-21T00:00:00Z",
                "source": source, "meta": "true"},
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    return answer.json()


def stored_with_figures(settings: Settings, site: str, count: int) -> Client:
    client = connect(settings)
    rows, columns = archive_rows(make_events(site, count))
    client.insert("events", rows, column_names=columns)
    add_site(client, site)
    backfill_rollups(client, site, DAY, DAY + timedelta(days=1))
    return client


def test_deleting_a_site_with_erase_events_answers_zero_for_it_and_the_same_for_another(
    dashboard_server: DashboardServer, dashboard_settings: Settings
) -> None:
    tag = uuid.uuid4().hex[:8]
    site, other = f"erased-{tag}.example.com", f"untouched-{tag}.example.com"
    client = stored_with_figures(dashboard_settings, site, 120)
    stored_with_figures(dashboard_settings, other, 80)
    api = httpx.Client(base_url=dashboard_server.url, headers=bearer(dashboard_server.api_key), timeout=60)
    before = {source: stats(api, other, source)["results"] for source in ("agg", "raw")}
    assert stats(api, site, "agg")["results"]["pageviews"] == 120

    answer = api.delete(f"/api/v1/sites/{site}", params={"erase_events": "true"})

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["deleted"], body["events"]) == (True, "erased") and body["erasure"] >= 1
    assert site not in list_sites(client)
    add_site(client, site)  # registered again: it starts from nothing
    for source in ("agg", "raw"):
        answered = stats(api, site, source)
        assert answered["results"]["pageviews"] == 0, source
        assert answered["results"]["visitors"] == 0, source
        assert answered["meta"]["erasure"] == body["erasure"]
        assert stats(api, other, source)["results"] == before[source]
        assert stats(api, other, source)["meta"]["erasure"] is None
    audit = [e for e in users.audit(client, [site]) if e.action == "site_removed"]
    assert "events erased" in audit[0].detail and "120 archived rows" in audit[0].detail
    api.close()


def test_deleting_a_site_keeps_its_events_unless_asked(
    dashboard_server: DashboardServer, dashboard_settings: Settings
) -> None:
    site = f"kept-{uuid.uuid4().hex[:8]}.example.com"
    client = stored_with_figures(dashboard_settings, site, 30)
    api = httpx.Client(base_url=dashboard_server.url, headers=bearer(dashboard_server.api_key), timeout=60)
    answer = api.delete(f"/api/v1/sites/{site}", params={"erase_events": "false"})
    assert answer.json() == {"deleted": True, "events": "kept"}
    assert archived(dashboard_settings, site) == (30, 30)
    assert erasures.latest_version(client, site) is None
    api.close()


def refused(answer: httpx.Response, status: int, field: str) -> None:
    assert answer.status_code == status, (answer.status_code, answer.text)
    assert answer.json()["error"].startswith(f"{field}:"), answer.json()


def test_only_the_sites_owner_may_erase_and_a_bad_flag_is_a_400(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    site, url = tenants.site_a, tenants.server.url
    client = connect(dashboard_settings)
    rows, columns = archive_rows(make_events(site, 10))
    client.insert("events", rows, column_names=columns)
    erase = {"erase_events": "true"}
    viewer = httpx.Client(base_url=url, headers=bearer(tenants.viewer_a.manage_key), timeout=30)
    refused(viewer.delete(f"/api/v1/sites/{site}", params=erase), 403, "site_id")
    other = httpx.Client(base_url=url, headers=bearer(tenants.admin_b.manage_key), timeout=30)
    refused(other.delete(f"/api/v1/sites/{site}", params=erase), 403, "site_id")
    shared = opened_share(tenants.server, tenants.share_a)
    assert shared.delete(f"/api/v1/sites/{site}", params=erase).status_code in (401, 403)
    anonymous = httpx.Client(base_url=url, timeout=30)
    assert anonymous.delete(f"/api/v1/sites/{site}", params=erase).status_code == 401
    owner = httpx.Client(base_url=url, headers=bearer(tenants.owner_a.manage_key), timeout=30)
    for bad in ("yes", "1", ""):
        refused(owner.delete(f"/api/v1/sites/{site}", params={"erase_events": bad}), 400, "erase_events")
    assert site in list_sites(client) and archived(dashboard_settings, site) == (10, 10)
    assert erasures.latest_version(client, site) is None
    for http in (viewer, other, shared, anonymous, owner):
        http.close()


def tally(settings: Settings, *args: str, typed: str) -> subprocess.CompletedProcess[str]:
    """The real `tally` CLI as a user runs it, typing `typed` at its prompt."""
    return run_tally(os.environ | settings.environment(), *args, stdin=typed)


@pytest.mark.slow  # the CLI in a subprocess, twice: about 11 s
def test_the_cli_erases_only_once_the_domain_is_typed(dashboard_settings: Settings) -> None:
    site = f"cli-{uuid.uuid4().hex[:8]}.example.com"
    stored_with_figures(dashboard_settings, site, 25)

    wrong = tally(dashboard_settings, "sites", "remove", site, "--erase-events", typed="other.example.com\n")
    assert wrong.returncode != 0 and "not confirmed" in wrong.stderr, wrong.stderr
    assert "Traceback" not in wrong.stderr + wrong.stdout
    assert archived(dashboard_settings, site) == (25, 25) and site in list_sites(connect(dashboard_settings))

    typed = tally(dashboard_settings, "sites", "remove", site, "--erase-events", typed=f"{site}\n")
    assert typed.returncode == 0, typed.stderr
    assert "25 archived rows" in typed.stdout
    assert archived(dashboard_settings, site) == (0, 0)
    assert site not in list_sites(connect(dashboard_settings))
    since = datetime.now(UTC) - timedelta(hours=1)
    assert since < erasures.erased_until(connect(dashboard_settings))[site].cutoff


def test_a_replay_leaves_an_erased_sites_old_events_out_and_counts_those_received_after(
    spark: SparkSession, stream_settings: Settings
) -> None:
    """`tally replay` rebuilds the derived tables from the log, which still holds the erased
    events: the stream jobs drop those the erasure covers (stream_jobs/queries.py)."""
    settings = stream_settings
    site, other = site_names(2)
    cutoff = minutes_ago(60)
    old = [page_view(site, f"o{i % 3}", cutoff - timedelta(minutes=20, seconds=-i)) for i in range(12)]
    new = [page_view(site, f"n{i % 2}", cutoff + timedelta(seconds=1 + i)) for i in range(5)]
    others = [page_view(other, f"x{i % 4}", cutoff - timedelta(minutes=10, seconds=-i)) for i in range(7)]
    erasures.record(connect(settings), site, "test", cutoff=cutoff)
    produce_events(settings, sorted(old + new + others, key=lambda e: e.ts))

    rebuild(spark, settings)

    rows = (
        connect(settings)
        .query(
            f"SELECT site, sum(pageviews) FROM rollup_minute{REPLAY_SUFFIX} "
            "WHERE dimension = '' GROUP BY site"
        )
        .result_rows
    )
    assert {str(s): int(n) for s, n in rows} == {site: len(new), other: len(others)}
