"""Fences: an archiver writes a partition's offsets into the archive only while it holds the
partition's fence, checked by the store in the very INSERT.

Two archivers share a consumer group (`tally up --cluster`). One frozen for longer than its
consumer session (a GC pause, a stopped VM, SIGSTOP) loses its partitions to the other, which
archives them from where the archive ends. Thawed, the first goes on with the batch it held, for
offsets it no longer owns: without a fence those rows land a second time.

* On each assignment, before it reads where the archive ends, the archiver takes each assigned
  partition's fence (`archive_fences`, migration 0066): one epoch above the highest written, and
  its owner name, unique to the process. The fence that holds is the highest (epoch, owner).
* Each insert of a batch (`events`, `archive_duplicates`, `archive_deadletters`) is an
  `INSERT … SELECT … FROM input(…) WHERE kafka_partition IN (partitions whose fence is still
  this archiver's)`: the store checks and inserts in one statement, so a stale batch inserts
  zero rows; nothing is read first in Python and written after.
* After the inserts the archiver asks which of the batch's partitions it still holds: a
  partition it lost is logged (`fenced`), its offsets are not committed and its records are
  skipped until the group assigns it again (the next owner resumes from the archive's end).

Epochs only grow, so a fence that holds now has held since it was taken. A new owner reads the
archive's end after taking its fence; a statement that passed the check lands before that read
or is refused. What it cannot close: the check runs when the statement starts, and
clickhouse-server starts an `INSERT … FROM input()` before it has read the data, so a writer frozen
in the middle of sending a batch (for less than the server's receive timeout) may still land
it. The local endpoint reads the whole batch first (ops/clickhouse_endpoint/engine.py). A full
audit (`tally verify --full`) reports such a duplicate.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from uuid import uuid4

import orjson
from clickhouse_connect.driver.client import Client

from storage.literals import quote_string

FENCES = "archive_fences"

# The partitions of {fence_topic} whose fence is this archiver's: {fence_owner} with, per
# partition of {fence_partitions}, the epoch it took (in {fence_epochs}, in the same order; a
# partition it never took gets 0, no epoch).
_EPOCH_TAKEN = "{fence_epochs:Array(UInt64)}[indexOf({fence_partitions:Array(UInt16)}, partition)]"
HELD_PARTITIONS = f"""
SELECT partition FROM {FENCES} WHERE topic = {{fence_topic:String}}
GROUP BY partition
HAVING max((epoch, owner)) = ({_EPOCH_TAKEN}, {{fence_owner:String}})
"""

# One epoch above the highest written, per assigned partition, in one statement.
_TAKE = f"""
INSERT INTO {FENCES} (topic, partition, epoch, owner)
SELECT {{topic:String}}, assigned.partition, known.epoch + 1, {{owner:String}}
FROM (SELECT arrayJoin({{partitions:Array(UInt16)}}) AS partition) AS assigned
LEFT JOIN (
    SELECT partition, max(epoch) AS epoch FROM {FENCES} WHERE topic = {{topic:String}} GROUP BY partition
) AS known ON assigned.partition = known.partition
SETTINGS join_use_nulls = 0
"""

_TAKEN = f"""
SELECT partition, max(epoch) FROM {FENCES}
WHERE topic = {{topic:String}} AND owner = {{owner:String}} AND partition IN {{partitions:Array(UInt16)}}
GROUP BY partition
"""


def new_owner() -> str:
    """A name no other archiver process has, now or later: host, pid and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid4().hex[:12]}"


@dataclass
class Fence:
    """The fences one archiver holds on a topic: per partition, the epoch it took."""

    topic: str
    owner: str
    epochs: dict[int, int] = field(default_factory=dict)

    def of(self, partitions: set[int] | list[int]) -> Fence:
        """A copy limited to `partitions` (a batch's): the inserts of a batch check the fences
        as they were when it was collected."""
        return Fence(self.topic, self.owner, {p: e for p, e in self.epochs.items() if p in partitions})

    def parameters(self) -> dict[str, object]:
        partitions = sorted(self.epochs)
        return {
            "fence_topic": self.topic,
            "fence_owner": self.owner,
            "fence_partitions": partitions,
            "fence_epochs": [self.epochs[p] for p in partitions],
        }


def take(client: Client, topic: str, owner: str, partitions: list[int]) -> dict[int, int]:
    """Take the fences of `partitions` for `owner`; the epoch taken per partition."""
    parameters = {"topic": topic, "owner": owner, "partitions": sorted(partitions)}
    client.command(_TAKE, parameters=parameters)
    rows = client.query(_TAKEN, parameters=parameters).result_rows
    return {int(partition): int(epoch) for partition, epoch in rows}


def held(client: Client, fence: Fence) -> set[int]:
    """Which of the fence's partitions are still its owner's."""
    if not fence.epochs:
        return set()
    rows = client.query(HELD_PARTITIONS, parameters=fence.parameters()).result_rows
    return {int(row[0]) for row in rows} & set(fence.epochs)


def insert(
    client: Client,
    table: str,
    structure: list[tuple[str, str]],
    lines: bytes,
    fence: Fence | None,
    settings: dict[str, object] | None = None,
) -> None:
    """Insert JSONEachRow `lines` (each with its kafka_partition) into `table`: all of them
    without a fence; with one, only those of partitions whose fence is still its owner's,
    checked by the store in the same statement."""
    columns = [name for name, _ in structure]
    if fence is None:
        client.raw_insert(table, columns, lines, settings=settings, fmt="JSONEachRow")
        return
    described = quote_string(", ".join(f"{name} {kind}" for name, kind in structure))
    listed = ", ".join(columns)
    client.command(
        f"INSERT INTO {table} ({listed}) SELECT {listed} FROM input({described})"
        f" WHERE kafka_partition IN ({HELD_PARTITIONS}) FORMAT JSONEachRow",
        parameters=fence.parameters(),
        data=lines,
        settings=settings,
    )


_structures: dict[tuple[str, str, tuple[str, ...]], list[tuple[str, str]]] = {}


def structure(client: Client, table: str, columns: list[str]) -> list[tuple[str, str]]:
    """`columns` of `table` with their types, as the table declares them (asked once)."""
    key = (client.database or "", table, tuple(columns))
    if key not in _structures:
        rows = client.query(
            "SELECT name, type FROM system.columns WHERE database = currentDatabase()"
            " AND table = {table:String} AND name IN {columns:Array(String)}",
            parameters={"table": table, "columns": columns},
        ).result_rows
        types = dict(rows)
        missing = [name for name in columns if name not in types]
        if missing:
            raise LookupError(f"{table} has no column {', '.join(missing)}")
        _structures[key] = [(name, types[name]) for name in columns]
    return _structures[key]


def json_lines(rows: list[dict[str, object]]) -> bytes:
    return b"\n".join(orjson.dumps(row) for row in rows)
