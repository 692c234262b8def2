"""Copies of a re-sent event: recognised by (site, event_id), archived once.

A sender that did not get its 202 (the collector crashed after Kafka took the event, a
timeout, a 503 for a write that landed) sends the event again with the same event_id, so the
log may hold it twice, at two offsets, perhaps in two partitions and with different receive
times. A row is a copy when an earlier one of the same site and event_id, received at most
the window (TALLY_DEDUP_WINDOW_S, 7 days) before or after it, is archived or being archived:

* within a batch, the first by (kafka_partition, kafka_offset) is kept — within a partition
  the lowest offset, as the stream jobs keep;
* against the archive, `archive_ids` (migration 0021) holds every archived event's id, written
  by the very INSERT that archives the row (a materialized view on `events`); a row found
  there at its own position is not a copy but the same row archived again (an audit
  repairing a hole, a batch retried after a lost answer).

The key is scoped to the site, so that one site's sender can never suppress another site's
events. A copy is not archived: its offset goes to `archive_duplicates` with the position of
the first copy, so that the archive still accounts for every offset of the log.

What this does not close: two archivers (or the audit and the archiver) writing two copies
of one event from two partitions at the same instant each look before the other has
indexed, and both archive theirs (docs/architecture.md, "Retries count once"). Two archivers
never write the same offsets: a thawed archiver's batch for partitions taken over while it was
frozen is refused by their fences (archiver/fences.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from uuid import UUID

from clickhouse_connect.driver.client import Client

from archiver.fences import Fence, insert, json_lines

if TYPE_CHECKING:
    from archiver.rows import ArchiveRow

INDEX = "archive_ids"
DUPLICATES = "archive_duplicates"

# The ids are sent in pieces of 2,500 (about 100 KB) joined again in the query: a parameter
# this long goes to the server as a form field, and clickhouse-server takes at most 128 KiB
# per field (http_max_field_value_size). One query per batch, not one per piece: each query
# reads every part of the index.
PIECE = 2_500
PIECES = 4  # 10,000 ids, the archiver's batch
_LOOKUP = f"""
SELECT site, event_id, kafka_partition, kafka_offset, toUnixTimestamp64Milli(received_at)
FROM {INDEX} WHERE event_id IN arrayConcat({", ".join(f"{{ids{n}:Array(UUID)}}" for n in range(PIECES))})
"""

Key = tuple[str, UUID]  # (site, event_id)
Position = tuple[int, int]  # (kafka_partition, kafka_offset)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Seen:
    """A copy of an event kept in the archive: where it is, when it was received."""

    partition: int
    offset: int
    received_ms: int


Archived = dict[Key, list[Seen]]  # what the index holds of some ids


@dataclass(frozen=True)
class Copy:
    """A row not archived: its event was already archived, at `first`."""

    row: ArchiveRow
    first: Seen


def drop_copies(
    client: Client, rows: list[ArchiveRow], window_s: float
) -> tuple[list[ArchiveRow], list[Copy]]:
    """The rows to archive, in their order, and the copies among them of events archived
    earlier or kept earlier in `rows`."""
    if not rows:
        return [], []
    event_ids = {row.event_id for row in rows}
    archived = archived_ids(client, list(event_ids))
    if not archived and len(event_ids) == len(rows):
        return rows, []  # nearly always: no id seen before, none twice in the batch
    return split_copies(rows, archived, window_s)


def split_copies(
    rows: list[ArchiveRow], archived: Archived, window_s: float
) -> tuple[list[ArchiveRow], list[Copy]]:
    """`drop_copies` given what the index holds of the rows' ids."""
    by_key: dict[Key, list[ArchiveRow]] = {}
    for row in rows:
        by_key.setdefault((row.site, row.event_id), []).append(row)
    window_ms = int(window_s * 1000)
    copies: dict[Position, Copy] = {}
    for key, candidates in by_key.items():
        known = archived.get(key)
        if known is None and len(candidates) == 1:
            continue  # nearly always: an event seen once
        copies.update(_copies_of(candidates, known or [], window_ms))
    if not copies:
        return rows, []
    kept = [row for row in rows if row.position not in copies]
    return kept, sorted(copies.values(), key=lambda copy: copy.row.position)


def _copies_of(candidates: list[ArchiveRow], known: list[Seen], window_ms: int) -> dict[Position, Copy]:
    """Walk one event's rows in log order: each is a copy of the first kept or indexed one
    received within the window, unless it is an indexed row itself."""
    firsts = sorted(known, key=lambda seen: (seen.partition, seen.offset))
    indexed_at = {(seen.partition, seen.offset) for seen in firsts}
    copies = {}
    for row in sorted(candidates, key=lambda row: row.position):
        received_ms = _ms(row)
        if row.position in indexed_at:
            continue  # this very row, indexed before: archived again, not a copy
        first = next((s for s in firsts if abs(received_ms - s.received_ms) <= window_ms), None)
        if first is None:
            firsts.append(Seen(row.partition, row.offset, received_ms))
        else:
            copies[row.position] = Copy(row, first)
    return copies


def archived_ids(client: Client, event_ids: list[UUID]) -> Archived:
    """What the index holds of these ids, per (site, event_id)."""
    found: Archived = {}
    per_query = PIECE * PIECES
    for start in range(0, len(event_ids), per_query):
        ids = event_ids[start : start + per_query]
        pieces = {f"ids{n}": _UuidArray(ids[n * PIECE : (n + 1) * PIECE]) for n in range(PIECES)}
        for site, event_id, partition, offset, received_ms in client.query(
            _LOOKUP, parameters=pieces
        ).result_rows:
            found.setdefault((site, event_id), []).append(Seen(int(partition), int(offset), int(received_ms)))
    return found


class _UuidArray:
    """An Array(UUID) query parameter, written at once. clickhouse-connect formats a list
    element by element (about 20 ms for 10,000 UUIDs, holding the GIL the archiver's parsing
    needs); a UUID's text needs no escaping, and clickhouse-connect sends any other object as
    its str()."""

    def __init__(self, ids: list[UUID]) -> None:
        self._text = "['" + "','".join(map(str, ids)) + "']" if ids else "[]"

    def __str__(self) -> str:
        return self._text


def _ms(row: ArchiveRow) -> int:
    """The receive time in whole milliseconds, truncated as the archive's DateTime64(3) keeps it."""
    at = row.received_at if row.received_at.tzinfo else row.received_at.replace(tzinfo=UTC)
    return (at - _EPOCH) // timedelta(milliseconds=1)


COPY_STRUCTURE = [
    ("kafka_partition", "UInt16"),
    ("kafka_offset", "UInt64"),
    ("site", "String"),
    ("event_id", "UUID"),
    ("first_kafka_partition", "UInt16"),
    ("first_kafka_offset", "UInt64"),
]


def record_copies(client: Client, copies: list[Copy], fence: Fence | None = None) -> None:
    """Record the copies' offsets, with a fence only those of partitions still its owner's."""
    lines = json_lines(
        [
            {
                "kafka_partition": c.row.partition,
                "kafka_offset": c.row.offset,
                "site": c.row.site,
                "event_id": str(c.row.event_id),
                "first_kafka_partition": c.first.partition,
                "first_kafka_offset": c.first.offset,
            }
            for c in copies
        ]
    )
    insert(client, DUPLICATES, COPY_STRUCTURE, lines, fence)
