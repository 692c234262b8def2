"""What one page view costs on disk, in the log and in the archive (docs/capacity.md's inputs).

Page views are made as traffic would make them: loadgen's visit model (20 sites, sessions of
about three page views, its user agents, referrers and campaigns), run through the collector's
own enrichment pipeline (user agent parsed, country looked up, visitor hashed, URL split), and
encoded as the collector encodes them for the log (tally.event.encode_fields). Then:
- the log: the records packed into Kafka record batches as the collector's producer packs them
  (record format v2, lz4, at most its max_batch_size), from one event per batch (a quiet site:
  the collector sends each request's event at once, linger_ms=0) to full batches (under load,
  events that arrive while a send is in flight travel together); per replica, before the
  broker's index files;
- the archive: the records turned into archive rows by the archiver's own conversion
  (archiver.rows.archive_row), inserted into a copy of `events` (the same columns, codecs and
  sorting key, no views attached) in the stack's ClickHouse, merged into one part, measured from
  system.parts and system.parts_columns, and dropped.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from uuid import uuid4

from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from clickhouse_connect.driver.client import Client

from archiver.rows import ARCHIVE_COLUMNS, archive_row
from collector.app import log_record
from collector.enrichment import Draft, Dropped, RequestContext, build_pipeline, enrich
from collector.event_log import MAX_BATCH_BYTES
from collector.geo import CountryLookup
from loadgen.traffic import TrafficModel, site_names
from storage.client import connect
from tally.event import PageViewEvent
from tally.settings import Settings

LogRecord = tuple[bytes, bytes]
# Records per batch measured: one (a quiet site), a few (a busy partition's events arriving during
# a send), up to what 256 KiB holds.
LOG_BATCH_SIZES = (1, 2, 5, 10, 100, 10_000)


def realistic_records(count: int, seed: int = 7) -> list[LogRecord]:
    """`count` page views as the collector appends them to the log: (key, value)."""
    model = TrafficModel(site_names(20), seed=seed, visitors=max(1, count // 10))
    pipeline = build_pipeline(lambda site: True, lambda ip_hash: False, CountryLookup())
    rng = random.Random(seed)
    salt = rng.randbytes(32)
    moment = datetime.now(UTC) - timedelta(days=1)
    records: list[LogRecord] = []
    while len(records) < count:
        for visit in model.session():
            moment += timedelta(seconds=rng.expovariate(1 / 2))
            draft = Draft(visit.site, "pageview", visit.url, visit.referrer, {}, visit.screen_width, moment)
            context = RequestContext(
                visit.client_ip, visit.user_agent, moment, salt, accept_language=visit.accept_language
            )
            try:
                records.append(log_record(enrich(draft, context, pipeline)))
            except Dropped:  # none of a browser's page views is dropped with every site known
                continue
    return records[:count]


def log_bytes(records: list[LogRecord], per_batch: int) -> int:
    """The bytes of `records` packed into lz4 record batches of up to `per_batch` records each
    (and at most the collector's batch size in bytes), as the broker stores them."""
    total = 0
    for first in range(0, len(records), per_batch):
        batch = _batch()
        for offset, (key, value) in enumerate(records[first : first + per_batch]):
            if batch.append(offset, timestamp=None, key=key, value=value, headers=[]) is None:
                total += len(batch.build())  # full: the record opens the next batch
                batch = _batch()
                batch.append(offset, timestamp=None, key=key, value=value, headers=[])
        total += len(batch.build())
    return total


def _batch() -> DefaultRecordBatchBuilder:
    return DefaultRecordBatchBuilder(
        magic=2,
        compression_type=DefaultRecordBatch.CODEC_LZ4,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=MAX_BATCH_BYTES,
    )


def archive_bytes(client: Client, records: list[LogRecord]) -> tuple[int, dict[str, int]]:
    """The bytes on disk of `records` archived into a copy of `events` merged into one part,
    and each column's compressed bytes."""
    table = f"bench_bytes_{uuid4().hex[:12]}"
    client.command(f"CREATE TABLE {table} AS events")
    # wide parts, as the archive's are at any real size (a small compact part has no per-column sizes)
    wide = "min_bytes_for_wide_part = 0, min_rows_for_wide_part = 0"
    client.command(f"ALTER TABLE {table} MODIFY SETTING {wide}")
    try:
        events = (PageViewEvent.from_json(value) for _, value in records)
        rows = [archive_row(event, 0, offset) for offset, event in enumerate(events)]
        client.raw_insert(table, ARCHIVE_COLUMNS, b"\n".join(rows), fmt="JSONEachRow")
        client.command(f"OPTIMIZE TABLE {table} FINAL")
        on_disk = client.query(
            "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = currentDatabase() AND "
            "table = {table:String} AND active",
            parameters={"table": table},
        ).result_rows[0][0]
        columns = client.query(
            "SELECT column, sum(column_data_compressed_bytes) AS size FROM system.parts_columns "
            "WHERE database = currentDatabase() AND table = {table:String} AND active "
            "GROUP BY column ORDER BY size DESC",
            parameters={"table": table},
        ).result_rows
    finally:
        client.command(f"DROP TABLE IF EXISTS {table} SYNC")
    return int(on_disk), {name: int(size) for name, size in columns}


def bench_storage_cost(settings: Settings, count: int = 200_000) -> dict[str, object]:
    """Bytes per page view: in the log (by records per batch) and in the archive."""
    records = realistic_records(count)
    encoded = sum(len(key) + len(value) for key, value in records)
    archived, columns = archive_bytes(connect(settings, send_receive_timeout=600), records)
    return {
        "events": count,
        "encoded_bytes_per_event": round(encoded / count, 1),
        # by records per batch: what the log costs depends on how many travel together
        "log_bytes_per_event_by_batch": {
            str(size): round(log_bytes(records, per_batch=size) / count, 1) for size in LOG_BATCH_SIZES
        },
        "archive_bytes_per_event": round(archived / count, 1),
        "archive_largest_columns_bytes_per_event": {
            name: round(size / count, 2) for name, size in list(columns.items())[:8]
        },
    }
