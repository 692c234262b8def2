"""Erasing a site's events: the archive's rows, its index, and every table derived
from them, so that no figure of the site is left.

An erasure is recorded first (`site_erasures`, migration 0072): its version (the installation's
erasures numbered 1, 2, …), the site, who asked, and its cutoff, the moment it was asked. Events
of the site received at or before the cutoff are erased; later ones (the domain registered
again) are kept. The record is what keeps the log from bringing them back: Kafka still holds
them for its retention, and the archiver, the audit's repairs (archiver/rows.py write_batch) and
the stream jobs (stream_jobs/queries.py, which `tally replay` runs) drop them on the way in.

Then, in this order:
1. the erased rows' (kafka_partition, kafka_offset) go to `archive_erased`, offsets only, so the
   archive still accounts for every offset of the log (`tally verify --full` stays clean);
2. the site's rows go from every table of storage/tables.py ERASED_TABLES (and from the replay
   and what-if copies of them that exist), each an `ALTER TABLE … DELETE` that has finished on
   every replica when it returns (mutations_sync = 2): the rows are rewritten out of the parts,
   not only hidden as a lightweight DELETE would until its next merge.

Re-running an erasure (`erase`, the same record) finishes one a crash interrupted: step 1 keeps
one row per offset, step 2 deletes what is still there.

What it does not close: an archiver batch that read the erasures just before this one was
recorded and lands after its delete; the live stream jobs read the erasures when they start, so
a stream behind the log at the erasure writes the site's figures again until restarted (the
site is unregistered by then: the collector takes no new event of it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from clickhouse_connect.driver.client import Client

from storage.tables import (
    ARCHIVE_ERASED,
    ERASED_TABLES,
    EVENTS,
    SITE_ERASURES,
    SYNTHETIC_PARTITION,
)

#: Each delete has finished on every replica when the statement returns.
MUTATION_SETTINGS = {"mutations_sync": 2}
# Copies of the derived tables that a replay or a what-if writes beside them (stream_jobs/context.py).
_COPY_SUFFIX = r"(_replay|_v[0-9]+)?"


@dataclass(frozen=True)
class Erasure:
    version: int
    site: str
    cutoff: datetime
    actor: str


@dataclass(frozen=True)
class Erased:
    """What an erasure removed: its record, the archive's rows, the rows of each other table."""

    erasure: Erasure
    archived_rows: int
    derived_rows: dict[str, int]


def record(client: Client, site: str, actor: str, cutoff: datetime | None = None) -> Erasure:
    """Records an erasure of `site`'s events received at or before `cutoff` (now): from here on
    the archiver and the stream jobs drop them. Its version is one above the highest; two
    erasures recorded at the very same moment may share one (callers serialise)."""
    moment = cutoff or datetime.now(UTC)
    moment = moment.replace(microsecond=moment.microsecond // 1000 * 1000)  # as the store keeps it
    highest = client.query(f"SELECT max(version) FROM {SITE_ERASURES}").result_rows[0][0] or 0
    erasure = Erasure(int(highest) + 1, site, moment, actor)
    client.insert(
        SITE_ERASURES,
        [[erasure.version, site, moment, actor]],
        column_names=["version", "site", "cutoff", "actor"],
    )
    return erasure


def erase(client: Client, erasure: Erasure) -> Erased:
    """Deletes what `erasure` covers, its offsets accounted for first (see the module doc)."""
    parameters = {"site": erasure.site, "cutoff": erasure.cutoff, "synthetic": SYNTHETIC_PARTITION}
    covered = "site = {site:String} AND received_at <= {cutoff:DateTime64(3, 'UTC')}"
    client.command(
        f"INSERT INTO {ARCHIVE_ERASED} (kafka_partition, kafka_offset, erasure) "
        f"SELECT kafka_partition, kafka_offset, {erasure.version:d} FROM {EVENTS} "
        f"WHERE {covered} AND kafka_partition != {{synthetic:UInt16}}",
        parameters=parameters,
    )
    archived = _count(client, EVENTS, covered, parameters)
    client.command(
        f"ALTER TABLE {EVENTS} DELETE WHERE {covered}", parameters=parameters, settings=MUTATION_SETTINGS
    )
    derived = {}
    for table in _derived_tables(client):
        derived[table] = _count(client, table, "site = {site:String}", parameters)
        if derived[table]:
            client.command(
                f"ALTER TABLE {table} DELETE WHERE site = {{site:String}}",
                parameters=parameters,
                settings=MUTATION_SETTINGS,
            )
    return Erased(erasure, archived, derived)


def erase_site(client: Client, site: str, actor: str) -> Erased:
    """Records an erasure of every event of `site` received until now, then carries it out."""
    return erase(client, record(client, site, actor))


def summary(erased: Erased) -> str:
    """One line for the audit row: the erasure, and the rows it removed."""
    derived = sum(erased.derived_rows.values())
    tables = sum(1 for rows in erased.derived_rows.values() if rows)
    return (
        f"erasure {erased.erasure.version}, cutoff {erased.erasure.cutoff.isoformat()}: "
        f"{erased.archived_rows} archived rows, {derived} derived rows in {tables} tables"
    )


def _derived_tables(client: Client) -> list[str]:
    """The tables of ERASED_TABLES but `events`, and the replay and what-if copies of them that
    exist now: each table of the store named so that has a `site` column."""
    names = [table for table in ERASED_TABLES if table != EVENTS]
    pattern = f"^({'|'.join(names)}){_COPY_SUFFIX}$"
    rows = client.query(
        "SELECT DISTINCT c.table FROM system.columns AS c INNER JOIN system.tables AS t "
        "ON c.database = t.database AND c.table = t.name "
        "WHERE c.database = currentDatabase() AND c.name = 'site' AND t.engine NOT IN "
        "('MaterializedView', 'View') AND match(c.table, {pattern:String}) ORDER BY c.table",
        parameters={"pattern": pattern},
    ).result_rows
    return [str(row[0]) for row in rows]


def _count(client: Client, table: str, where: str, parameters: dict[str, object]) -> int:
    return int(
        client.query(f"SELECT count() FROM {table} WHERE {where}", parameters=parameters).result_rows[0][0]
    )


def erased_until(client: Client) -> dict[str, Erasure]:
    """Per erased site, its latest erasure: the site's events received at or before its cutoff
    are erased (a later cutoff covers every earlier one). Small: one row per site ever erased."""
    rows = client.query(
        f"SELECT site, max(version), argMax(cutoff, version), argMax(actor, version) "
        f"FROM {SITE_ERASURES} GROUP BY site"
    ).result_rows
    return {
        str(site): Erasure(int(version), str(site), _utc(cutoff), str(actor))
        for site, version, cutoff, actor in rows
    }


def latest_version(client: Client, site: str) -> int | None:
    """The version of `site`'s latest erasure, None if it was never erased."""
    rows = client.query(
        f"SELECT max(version), count() FROM {SITE_ERASURES} WHERE site = {{site:String}}",
        parameters={"site": site},
    ).result_rows
    return int(rows[0][0]) if rows and rows[0][1] else None


def covering(until: dict[str, Erasure], site: str, received_at: datetime) -> Erasure | None:
    """The erasure that covers an event of `site` received at `received_at`, if one does."""
    erasure = until.get(site)
    return erasure if erasure is not None and _utc(received_at) <= erasure.cutoff else None


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
