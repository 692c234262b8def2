"""Rows of the archive (`events`) as the archiver and the archive audit write them.

Each row is a validated PageViewEvent plus where it came from on the log (kafka_partition,
kafka_offset); a message that fails validation is recorded in `archive_deadletters` instead,
so that every offset read is accounted for in the store.
"""

from __future__ import annotations

from aiokafka import ConsumerRecord
from clickhouse_connect.driver.client import Client
from pydantic import ValidationError

from tally.event import PageViewEvent, describe_validation_error

EVENT_COLUMNS = list(PageViewEvent.model_fields)
ARCHIVE_COLUMNS = [*EVENT_COLUMNS, "kafka_partition", "kafka_offset"]
# The partition for rows written straight into the archive (tests, benchmarks): no topic has
# it, so these rows never move the archiver's resume position for a real partition.
SYNTHETIC_PARTITION = 65535
# ISO-8601 times as pydantic writes them ("2026-11-22T06:32:33.123Z"); a field the table
# does not know is an error, not silently dropped.
INSERT_SETTINGS = {"date_time_input_format": "best_effort", "input_format_skip_unknown_fields": 0}


def archive_row(event: PageViewEvent, partition: int, offset: int) -> bytes:
    """The event as one JSONEachRow line of `events`, with where it came from on the log."""
    validated = event.model_dump_json().encode()
    return b'{"kafka_partition":%d,"kafka_offset":%d,%s' % (partition, offset, validated[1:])


def parse(record: ConsumerRecord) -> bytes | str:
    """The record's archive row, or why it cannot be archived."""
    try:
        event = PageViewEvent.from_json(record.value or b"")
    except ValidationError as error:
        return describe_validation_error(error, whole="value")
    return archive_row(event, record.partition, record.offset)


def insert_rows(client: Client, rows: list[bytes], deduplication_token: str = "") -> None:
    settings: dict[str, object] = dict(INSERT_SETTINGS)
    if deduplication_token:
        settings["insert_deduplication_token"] = deduplication_token
    client.raw_insert("events", ARCHIVE_COLUMNS, b"\n".join(rows), settings=settings, fmt="JSONEachRow")


def record_dead_letters(client: Client, letters: list[tuple[ConsumerRecord, str]]) -> None:
    client.insert(
        "archive_deadletters",
        [[record.partition, record.offset, reason] for record, reason in letters],
        column_names=["kafka_partition", "kafka_offset", "reason"],
    )
