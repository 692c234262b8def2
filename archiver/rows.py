"""Rows of the archive (`events`) as the archiver and the archive audit write them.

Each row is a validated PageViewEvent plus where it came from on the log (kafka_partition,
kafka_offset); a message that fails validation is recorded in `archive_deadletters` instead,
a copy of an event already archived (its sender re-sent it) in `archive_duplicates`, and an
event of a site whose events were erased (storage/erasures.py) in `archive_erased`, offsets
only, so that every offset read is accounted for in the store. `write_batch` is the one way both
write: the archiver's batches and the audit's repaired holes follow the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from aiokafka import ConsumerRecord
from clickhouse_connect.driver.client import Client
from pydantic import ValidationError

from archiver import fences
from archiver.copies import Copy, drop_copies, record_copies
from archiver.fences import Fence
from storage import erasures
from tally.event import PageViewEvent, describe_validation_error

EVENT_COLUMNS = list(PageViewEvent.model_fields)
ARCHIVE_COLUMNS = [*EVENT_COLUMNS, "kafka_partition", "kafka_offset"]
# ISO-8601 times as pydantic writes them ("2026-11-22T06:32:33.123Z"); a field the table
# does not know is an error, not silently dropped. A retried insert that `events` drops as a
# duplicate block still reaches its materialized views: the views' own tables that keep a
# deduplication window (engagement_minute, migration 0023) drop it too, so the engaged time of
# a retried batch is summed once; archive_ids, without a window, still indexes the retry's rows.
INSERT_SETTINGS = {
    "date_time_input_format": "best_effort",
    "input_format_skip_unknown_fields": 0,
    "deduplicate_blocks_in_dependent_materialized_views": 1,
}
# Every offset of the log the archive accounts for, per partition: archived rows, dead letters,
# copies of re-sent events, erased events (a query's parameter {synthetic:UInt16} is
# SYNTHETIC_PARTITION).
ACCOUNTED_OFFSETS = """
SELECT kafka_partition, kafka_offset FROM events WHERE kafka_partition != {synthetic:UInt16}
UNION ALL
SELECT kafka_partition, kafka_offset FROM archive_deadletters FINAL
UNION ALL
SELECT kafka_partition, kafka_offset FROM archive_duplicates FINAL
UNION ALL
SELECT kafka_partition, kafka_offset FROM archive_erased FINAL
"""


@dataclass(frozen=True, slots=True)
class ArchiveRow:
    """One event to archive: its JSONEachRow line, and what tells a re-sent copy of it."""

    line: bytes
    partition: int
    offset: int
    site: str
    event_id: UUID
    received_at: datetime

    @property
    def position(self) -> tuple[int, int]:
        return (self.partition, self.offset)


def archive_row(event: PageViewEvent, partition: int, offset: int) -> bytes:
    """The event as one JSONEachRow line of `events`, with where it came from on the log."""
    validated = event.model_dump_json().encode()
    return b'{"kafka_partition":%d,"kafka_offset":%d,%s' % (partition, offset, validated[1:])


def parse(record: ConsumerRecord) -> ArchiveRow | str:
    """The record's archive row, or why it cannot be archived."""
    try:
        event = PageViewEvent.from_json(record.value or b"")
    except ValidationError as error:
        return describe_validation_error(error, whole="value")
    line = archive_row(event, record.partition, record.offset)
    return ArchiveRow(line, record.partition, record.offset, event.site, event.event_id, event.received_at)


def write_batch(
    client: Client,
    rows: list[ArchiveRow],
    dead: list[tuple[ConsumerRecord, str]],
    window_s: float,
    deduplication_token: str = "",
    fence: Fence | None = None,
) -> list[Copy]:
    """Archive `rows` but the copies of events already archived, and account for every offset.

    The rows' ids enter `archive_ids` with the rows, in the same INSERT (a materialized view on
    `events`), so no crash of the archiver can leave an archived id unindexed. The copies and
    the dead letters are recorded after the rows: recorded first, one of their offsets would be
    the archive's end with the rows below it not in yet — a hole to the audit. The whole may be
    retried: a retried insert lands once (`events`' deduplication window,
    `deduplication_token`) while the view still indexes its rows, and rows found indexed at
    their own position are archived again, not taken for copies of themselves.

    Events of a site erased after they were received (storage/erasures.py; the list is read
    once per batch) are not archived: their offsets go to `archive_erased`, after the rows for
    the same reason as the copies.

    With a `fence` (the archiver's batches), each of the inserts keeps only the rows of
    partitions whose fence is still the archiver's, checked by the store (archiver/fences.py):
    a batch whose partitions were taken over inserts nothing."""
    rows, erased = drop_erased(client, rows)
    kept, copies = drop_copies(client, rows, window_s)
    if kept:
        insert_rows(client, [row.line for row in kept], deduplication_token, fence)
    if copies:
        record_copies(client, copies, fence)
    if dead:
        record_dead_letters(client, dead, fence)
    if erased:
        record_erased(client, erased, fence)
    return copies


def drop_erased(
    client: Client, rows: list[ArchiveRow]
) -> tuple[list[ArchiveRow], list[tuple[ArchiveRow, int]]]:
    """`rows` but those an erasure covers, and those with the erasure's version."""
    if not rows:
        return rows, []
    until = erasures.erased_until(client)
    if not until:
        return rows, []
    kept, erased = [], []
    for row in rows:
        erasure = erasures.covering(until, row.site, row.received_at)
        if erasure is None:
            kept.append(row)
        else:
            erased.append((row, erasure.version))
    return kept, erased


ERASED_STRUCTURE = [("kafka_partition", "UInt16"), ("kafka_offset", "UInt64"), ("erasure", "UInt64")]


def record_erased(client: Client, erased: list[tuple[ArchiveRow, int]], fence: Fence | None = None) -> None:
    lines = fences.json_lines(
        [
            {"kafka_partition": row.partition, "kafka_offset": row.offset, "erasure": version}
            for row, version in erased
        ]
    )
    fences.insert(client, "archive_erased", ERASED_STRUCTURE, lines, fence)


def insert_rows(
    client: Client, rows: list[bytes], deduplication_token: str = "", fence: Fence | None = None
) -> None:
    settings: dict[str, object] = dict(INSERT_SETTINGS)
    if deduplication_token:
        settings["insert_deduplication_token"] = deduplication_token
    structure = fences.structure(client, "events", ARCHIVE_COLUMNS)
    fences.insert(client, "events", structure, b"\n".join(rows), fence, settings)


DEAD_LETTER_STRUCTURE = [("kafka_partition", "UInt16"), ("kafka_offset", "UInt64"), ("reason", "String")]


def record_dead_letters(
    client: Client, letters: list[tuple[ConsumerRecord, str]], fence: Fence | None = None
) -> None:
    lines = fences.json_lines(
        [
            {"kafka_partition": record.partition, "kafka_offset": record.offset, "reason": reason}
            for record, reason in letters
        ]
    )
    fences.insert(client, "archive_deadletters", DEAD_LETTER_STRUCTURE, lines, fence)
