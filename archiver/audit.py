"""The archive checked against the log: is `events` a gapless copy of each partition?

Per partition, the offsets the archive accounts for (rows in `events`, dead letters in
`archive_deadletters`, copies of re-sent events in `archive_duplicates`) are compared with the
log's range: from the earliest offset Kafka still retains to the last archived one — and, for
`tally verify`, on to the offset the archiver's consumer group committed (archiver/log.py): a
lost part holding a partition's newest offsets leaves no row above them — every offset must be
there, once. A hole is re-read from Kafka — exactly that offset range — and
archived by the archiver's own rule (archiver/rows.py, write_batch: a copy of an event
archived elsewhere is recorded as one); the insert carries a deduplication token
named after the range, so a repair run twice at once (the archiver's own audit and `tally
verify`) lands once, and the archive is checked again right before it.

This relies on contiguous offsets in `pageviews` (see archiver/consumer.py, Batch): a range
that Kafka cannot fill offset by offset is reported, never papered over.

A round is incremental: per partition it checks only the offsets from its clean mark
(`archive_audit_marks`, migration 0065), the offset below which an earlier round found the
archive whole, and moves the mark up to the first offset it did not find clean (a hole, even one
it repaired, is checked again by the next round before the mark passes it). Nothing the archiver
or a repair writes lands below a mark: they write at or above the archive's end, or into a hole
that was found. What can — rows deleted by hand, a store restored from a backup, a thawed second
archiver's batch that got past its fence (archiver/fences.py) — is found by a full audit
(`tally verify --full`), which checks every offset and sets the marks to what it found. One
such loss every round finds: the offset just below a mark gone (a lost part held the newest
offsets a round had marked), its partition is checked from every offset (marks_still_held).
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaConnectionError, KafkaError, UnknownTopicOrPartitionError
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError, OperationalError

from archiver.log import committed_offsets, log_ranges
from archiver.rows import ACCOUNTED_OFFSETS, ArchiveRow, parse, write_batch
from storage import broken_parts, queries
from storage.client import connect
from storage.queries import provenance
from storage.tables import SYNTHETIC_PARTITION
from tally.settings import Settings

log = structlog.get_logger()

REPAIR_CHUNK = 10_000  # offsets read and inserted at a time

MARKS = "archive_audit_marks"
_MARKS = f"SELECT kafka_partition, argMax(clean_below, marked_at) FROM {MARKS} GROUP BY kafka_partition"

# The offsets a round checks: those of {partitions} from each one's mark ({marks}, in the same
# order). The constant bound {lowest} (the lowest mark) lets `events`' kafka_offset index skip
# granules.
_CHECKED = (
    "kafka_offset >= {lowest:UInt64} AND kafka_partition IN {partitions:Array(UInt16)} "
    "AND kafka_offset >= {marks:Array(UInt64)}[indexOf({partitions:Array(UInt16)}, kafka_partition)]"
)

SUMMARY = f"""
SELECT kafka_partition, min(kafka_offset), max(kafka_offset), uniqExact(kafka_offset), count()
FROM ({ACCOUNTED_OFFSETS}) WHERE {_CHECKED} GROUP BY kafka_partition
"""

NOTHING = 2**64 - 1  # no offset reaches it: nothing to read this round

# The lowest offset of a partition accounted for more than once, from {start}.
_FIRST_REPEATED = f"""
SELECT min(kafka_offset) FROM (
    SELECT kafka_offset FROM ({ACCOUNTED_OFFSETS})
    WHERE kafka_partition = {{partition:UInt16}} AND kafka_offset >= {{start:UInt64}}
    GROUP BY kafka_offset HAVING count() > 1
)
"""

# Runs of missing offsets between two accounted ones, as half-open [start, end).
_GAPS = f"""
SELECT kafka_offset + 1, next_offset FROM (
    SELECT kafka_offset,
           leadInFrame(kafka_offset, 1, kafka_offset + 1)
               OVER (ORDER BY kafka_offset ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING) AS next_offset
    FROM (SELECT DISTINCT kafka_offset FROM ({ACCOUNTED_OFFSETS})
          WHERE kafka_partition = {{partition:UInt16}}
            AND kafka_offset BETWEEN {{low:UInt64}} AND {{high:UInt64}})
) WHERE next_offset > kafka_offset + 1 ORDER BY kafka_offset
"""

# Offsets recorded as copies of re-sent events, per partition (archiver/copies.py).
_COPIES = "SELECT kafka_partition, count() FROM archive_duplicates FINAL GROUP BY kafka_partition"

# Events archived more than once although re-sent within the window (what archive_ids is
# for): ids with two rows received at most the window apart, among the events of the last two
# windows (the index keeps ids about one).
_REPEATED_IDS = """
SELECT countIf(arrayExists(gap -> gap <= {window_ms:UInt64}, arrayPopFront(arrayDifference(received))))
FROM (
    SELECT arraySort(groupArray(toUnixTimestamp64Milli(received_at))) AS received FROM events
    WHERE kafka_partition != {synthetic:UInt16}
      AND received_at >= now64(3) - toIntervalSecond({window_s:UInt32} * 2)
    GROUP BY site, event_id HAVING count() > 1
)
"""

# Of {partitions}, those still accounting for the offset just below their mark ({below}, in the
# same order); bounded like _CHECKED, so that the index skips the granules out of the range.
HELD_BELOW_MARKS = f"""
SELECT DISTINCT kafka_partition FROM ({ACCOUNTED_OFFSETS})
WHERE kafka_offset BETWEEN {{lowest:UInt64}} AND {{highest:UInt64}}
  AND kafka_partition IN {{partitions:Array(UInt16)}}
  AND kafka_offset = {{below:Array(UInt64)}}[indexOf({{partitions:Array(UInt16)}}, kafka_partition)]
"""

_HELD_IN_RANGE = f"""
SELECT count() FROM ({ACCOUNTED_OFFSETS})
WHERE kafka_partition = {{partition:UInt16}}
  AND kafka_offset >= {{start:UInt64}} AND kafka_offset < {{end:UInt64}}
"""


@dataclass(frozen=True)
class Hole:
    """Offsets [start, end) of one partition that the log retains and the archive lacks."""

    partition: int
    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start


@dataclass
class PartitionAudit:
    partition: int
    log_start: int  # the earliest offset Kafka still retains
    log_end: int  # the next offset Kafka will write
    archived_first: int | None
    archived_last: int | None
    duplicates: int  # offsets archived more than once
    holes: list[Hole] = field(default_factory=list)
    repaired: int = 0  # offsets re-read from the log and archived by this audit
    copies: int = 0  # offsets holding a copy of an event archived at another (not an error)
    checked_from: int = 0  # the clean mark the round started from (0: every offset)
    clean_below: int = 0  # the mark after the round: below it, every offset checked was clean
    committed: int | None = None  # the archiver's committed offset (None: it committed none)

    @property
    def missing(self) -> int:
        return sum(map(len, self.holes))

    @property
    def gapless(self) -> bool:
        return self.missing == self.repaired and self.duplicates == 0


def read_marks(client: Client) -> dict[int, int]:
    """Per partition, the offset below which the archive was last found whole."""
    return {int(p): int(mark) for p, mark in client.query(_MARKS).result_rows}


def find_holes(
    client: Client,
    logs: dict[int, tuple[int, int]],
    marks: dict[int, int] | None = None,
    committed: dict[int, int] | None = None,
) -> list[PartitionAudit]:
    """Compare the archive with the log's ranges, from each partition's clean mark (every offset
    without `marks`): count against max - min + 1 first, the gaps are only looked for where the
    count says there are some. Up to the archiver's `committed` offset every offset must be
    there: missing ones above the highest archived were lost, not "not archived yet"."""
    marks = _checked_from(logs, marks or {})
    committed = committed or {}
    summary = {
        int(p): (int(low), int(high), int(distinct), int(total))
        for p, low, high, distinct, total in client.query(
            SUMMARY, parameters=summary_parameters(logs, marks)
        ).result_rows
    }
    copies = {int(p): int(n) for p, n in client.query(_COPIES).result_rows}
    audits = []
    for partition, (log_start, log_end) in sorted(logs.items()):
        mark = marks.get(partition, 0)
        # Committed past the log's end: an offset the end read before it was committed (the
        # offsets above are for the next round), or a log deleted and created again.
        commit = committed.get(partition)
        said = min(commit, log_end) if commit is not None else None
        if partition not in summary:
            audit = PartitionAudit(
                partition, log_start, log_end, None, None, 0, checked_from=mark, committed=commit
            )
            audit.holes += _lost_newest(partition, max(log_start, mark), said)
            # nothing archived from the mark on: nothing more known clean
            audit.clean_below = min((hole.start for hole in audit.holes), default=mark)
            audits.append(audit)
            continue
        low, high, distinct, total = summary[partition]
        audit = PartitionAudit(
            partition,
            log_start,
            log_end,
            low,
            high,
            total - distinct,
            checked_from=mark,
            committed=commit,
        )
        audit.copies = copies.get(partition, 0)
        checked_from = max(low, log_start)  # below what Kafka retains, nothing can be re-read
        if low > max(log_start, mark):
            audit.holes.append(Hole(partition, max(log_start, mark), min(low, log_end)))
        held = (
            distinct - _held_below(client, partition, low, checked_from) if checked_from > low else distinct
        )
        if high >= checked_from and held < high - checked_from + 1:
            rows = client.query(
                _GAPS,
                parameters={
                    "partition": partition,
                    "low": checked_from,
                    "high": high,
                    "synthetic": SYNTHETIC_PARTITION,
                },
            ).result_rows
            audit.holes += [Hole(partition, int(start), int(end)) for start, end in rows]
        audit.holes += _lost_newest(partition, max(high + 1, log_start), said)
        audit.clean_below = _clean_below(client, audit)
        audits.append(audit)
    return audits


def _lost_newest(partition: int, lost_from: int, said: int | None) -> list[Hole]:
    """The offsets from `lost_from` (past what the archive holds) up to the archiver's committed
    offset `said`: the newest offsets, lost."""
    return [Hole(partition, lost_from, said)] if said is not None and said > lost_from else []


def summary_parameters(logs: dict[int, tuple[int, int]], marks: dict[int, int]) -> dict[str, object]:
    """SUMMARY's parameters for a round from `marks`. Only partitions with offsets on the log past
    their mark are read, and the lowest of their marks bounds the read: an idle partition's mark
    would otherwise hold every round down to it."""
    to_check = {p: mark for p, mark in _checked_from(logs, marks).items() if mark < logs[p][1]}
    return {
        "synthetic": SYNTHETIC_PARTITION,
        "partitions": list(to_check),
        "marks": list(to_check.values()),
        "lowest": min(to_check.values(), default=NOTHING),
    }


def marks_still_held(
    client: Client, logs: dict[int, tuple[int, int]], marks: dict[int, int]
) -> dict[int, int]:
    """The marks whose offset just below is still in the archive. Each mark was set one past an
    offset found accounted for (or at the log's start); one the archive lost since (a lost part
    holding the newest offsets a round had marked, rows deleted) means rows below the mark are
    gone: its partition is checked from every offset, as a full audit would."""
    probed = _probed(logs, marks)
    if not probed:
        return marks
    parameters = held_below_parameters(probed)
    held = {int(p) for (p,) in client.query(HELD_BELOW_MARKS, parameters=parameters).result_rows}
    for partition in sorted(set(probed) - held):
        log.warning("archive_lost_below_mark", partition=partition, mark=marks[partition])
    return {p: mark for p, mark in marks.items() if p not in probed or p in held}


def _probed(logs: dict[int, tuple[int, int]], marks: dict[int, int]) -> dict[int, int]:
    """The marks with an offset below them that the log held: at the log's start, or past its
    end (a log created again, checked from 0 anyway), there is none to look for."""
    return {p: mark for p, mark in marks.items() if p in logs and logs[p][0] < mark <= logs[p][1]}


def held_below_parameters(probed: dict[int, int]) -> dict[str, object]:
    """HELD_BELOW_MARKS's parameters for the marks `probed`."""
    below = [mark - 1 for mark in probed.values()]
    return {
        "synthetic": SYNTHETIC_PARTITION,
        "partitions": list(probed),
        "below": below,
        "lowest": min(below),
        "highest": max(below),
    }


def _checked_from(logs: dict[int, tuple[int, int]], marks: dict[int, int]) -> dict[int, int]:
    """Per partition of the log, the offset a round checks from: its mark, or 0 without one. A
    mark past the log's end belongs to a log deleted and created again: all of it is checked."""
    return {p: mark if (mark := marks.get(p, 0)) <= log_end else 0 for p, (_, log_end) in logs.items()}


def _held_below(client: Client, partition: int, start: int, offset: int) -> int:
    rows = client.query(
        f"SELECT uniqExact(kafka_offset) FROM ({ACCOUNTED_OFFSETS}) WHERE kafka_partition = "
        "{partition:UInt16} AND kafka_offset >= {start:UInt64} AND kafka_offset < {offset:UInt64}",
        parameters={
            "partition": partition,
            "start": start,
            "offset": offset,
            "synthetic": SYNTHETIC_PARTITION,
        },
    ).result_rows
    return int(rows[0][0])


def _clean_below(client: Client, audit: PartitionAudit) -> int:
    """Where the partition's mark may go: the first offset found missing or archived twice, or
    one past the last archived if none was (holes found now are not passed even once repaired:
    the next round checks them again)."""
    assert audit.archived_last is not None
    firsts = [hole.start for hole in audit.holes]
    if audit.duplicates:
        rows = client.query(
            _FIRST_REPEATED,
            parameters={
                "partition": audit.partition,
                "start": audit.checked_from,
                "synthetic": SYNTHETIC_PARTITION,
            },
        ).result_rows
        firsts.append(int(rows[0][0]))
    return min(firsts, default=audit.archived_last + 1)


def write_marks(client: Client, read: dict[int, int], audits: list[PartitionAudit]) -> None:
    """Record the marks the round found, each only if no other round moved it since this one
    read it (that round's mark stands; the next round starts from it)."""
    current = read_marks(client)
    rows = [
        [audit.partition, audit.clean_below]
        for audit in audits
        if audit.clean_below != read.get(audit.partition, 0)
        and current.get(audit.partition, 0) == read.get(audit.partition, 0)
    ]
    if rows:
        client.insert(MARKS, rows, column_names=["kafka_partition", "clean_below"])


async def repair(settings: Settings, client: Client, hole: Hole) -> int:
    """Re-read the hole's offsets from the log and archive them; the number archived."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap,
        enable_auto_commit=False,
        isolation_level="read_committed",
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )
    tp = TopicPartition(settings.pageviews_topic, hole.partition)
    repaired = 0
    await consumer.start()
    try:
        consumer.assign([tp])
        for start in range(hole.start, hole.end, REPAIR_CHUNK):
            chunk = Hole(hole.partition, start, min(start + REPAIR_CHUNK, hole.end))
            repaired += await _repair_chunk(consumer, tp, client, chunk, settings.dedup_window_s)
    finally:
        await consumer.stop()
    return repaired


async def _repair_chunk(
    consumer: AIOKafkaConsumer, tp: TopicPartition, client: Client, chunk: Hole, window_s: float
) -> int:
    consumer.seek(tp, chunk.start)
    rows: list[ArchiveRow] = []
    dead = []
    expected = chunk.start
    while expected < chunk.end:
        fetched = await consumer.getmany(tp, timeout_ms=10_000, max_records=chunk.end - expected)
        if not fetched:
            log.error("archive_repair_unreadable", partition=tp.partition, offset=expected)
            return 0
        for record in fetched[tp]:
            if record.offset < expected:
                continue
            if record.offset != expected or record.offset >= chunk.end:
                # Not contiguous (see the module doc): leave the hole reported, unrepaired.
                log.error(
                    "archive_repair_offset_jump", partition=tp.partition, expected=expected, got=record.offset
                )
                return 0
            row = parse(record)
            if isinstance(row, str):
                dead.append((record, row))
            else:
                rows.append(row)
            expected += 1
    # Checked again right before the insert: another repair may have filled it meanwhile.
    # Two running at the very same moment send the same token, and the store keeps one.
    held = client.query(
        _HELD_IN_RANGE,
        parameters={
            "partition": chunk.partition,
            "start": chunk.start,
            "end": chunk.end,
            "synthetic": SYNTHETIC_PARTITION,
        },
    ).result_rows[0][0]
    if held:
        return 0
    # The archiver's own rule, through the same function: a copy of an event archived
    # elsewhere is recorded as such, not archived a second time.
    token = f"repair:{chunk.partition}:{chunk.start}:{chunk.end}"
    write_batch(client, rows, dead, window_s, deduplication_token=token)
    return len(chunk)


async def audit_archive(
    settings: Settings, client: Client, fix: bool = True, full: bool = False, to_commits: bool = True
) -> list[PartitionAudit]:
    """Find the archive's holes above each partition's clean mark (`full`: in every offset) and,
    with `fix`, archive them from the log; then move the marks to what was found clean.
    `to_commits`: up to the archiver's committed offsets, the newest offsets too (the archiver's
    own rounds check only up to the archive's end: it resumes from there on every assignment, so
    the newest offsets lost are its own to archive again, and a round of its own would race it)."""
    logs = await log_ranges(settings)
    # Read before the archive: everything below an offset committed by then is in the store.
    committed = await committed_offsets(settings, list(logs)) if to_commits else {}
    marks = read_marks(client)
    audits = find_holes(client, logs, None if full else marks_still_held(client, logs, marks), committed)
    for audit in audits:
        for hole in audit.holes if fix else ():
            audit.repaired += await repair(settings, client, hole)
        if audit.holes or audit.duplicates:
            log.warning(
                "archive_audit",
                partition=audit.partition,
                holes=[(h.start, h.end) for h in audit.holes],
                missing=audit.missing,
                repaired=audit.repaired,
                duplicates=audit.duplicates,
            )
    write_marks(client, marks, audits)
    return audits


@dataclass
class AuditTotals:
    """What the archiver's audits found and repaired since it started, for `tally status`."""

    audits: int = 0
    holes_found: int = 0
    offsets_missing: int = 0
    offsets_repaired: int = 0
    duplicates: int = 0  # in the latest audit

    def add(self, audits: list[PartitionAudit]) -> None:
        self.audits += 1
        self.holes_found += sum(len(a.holes) for a in audits)
        self.offsets_missing += sum(a.missing for a in audits)
        self.offsets_repaired += sum(a.repaired for a in audits)
        self.duplicates = sum(a.duplicates for a in audits)

    def write(self, settings: Settings) -> None:
        path = audit_totals_path(settings)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Whole or not at all: `tally status` reads it whenever it likes, and a read between the
        # truncation and the write could find no JSON. (Per process: a cluster's archivers share it.)
        fresh = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        fresh.write_text(json.dumps(asdict(self)))
        fresh.replace(path)

    @classmethod
    def read(cls, settings: Settings) -> AuditTotals | None:
        path = audit_totals_path(settings)
        return cls(**json.loads(path.read_text())) if path.exists() else None


def audit_totals_path(settings: Settings) -> Path:
    return settings.home_dir / "run" / "archiver.audit.json"


# --- on demand: `tally verify` ------------------------------------------------------------


#: Broken parts one `tally verify` sets aside before it gives up (each is one more audit).
MAX_SET_ASIDE = 3


class AuditUnavailable(Exception):
    """Kafka or the store cannot be reached: nothing was checked."""


# Why a site-day's agg may differ from raw without anything being wrong:
#: the stream jobs have not processed some of its archived events yet (they will count them:
#: within the allowed lateness exactly; agg equals raw over the log prefix they processed);
PENDING = "not yet processed"
#: events older than the allowed lateness when they came (late_events): the rollups never count
#: them and the query layer answers the day from the archive (contract.LATE_EVENTS_RULE).
LATE = "late, answered from the archive"


@dataclass(frozen=True)
class DayMismatch:
    """A day on which a site's derived (agg) numbers differ from the archive's (raw), and why:
    `explained` is PENDING or LATE, or '' when nothing explains it (wrong)."""

    site: str
    day: datetime
    raw: tuple[int, int]  # page views, visitors
    agg: tuple[int, int]
    explained: str = ""
    late_events: int = 0  # the day's late events (late_events)

    @property
    def wrong(self) -> bool:
        return not self.explained


@dataclass
class VerifyReport:
    partitions: list[PartitionAudit]
    mismatches: list[DayMismatch]
    days_compared: int
    repeated_ids: int = 0  # (site, event_id) archived more than once within the window
    set_aside: list[str] = field(default_factory=list)  # broken parts detached and rebuilt

    @property
    def wrong(self) -> list[DayMismatch]:
        """The site-days whose difference nothing explains (late or pending ones are not wrong)."""
        return [m for m in self.mismatches if m.wrong]

    @property
    def ok(self) -> bool:
        return all(p.gapless for p in self.partitions) and not self.wrong and not self.repeated_ids

    def lines(self) -> list[str]:
        lines = []
        for p in self.partitions:
            archived = f"{p.archived_first}..{p.archived_last}" if p.archived_last is not None else "nothing"
            holes = ", ".join(f"{h.start}..{h.end - 1}" for h in p.holes) or "none"
            committed = f"up to {p.committed - 1}" if p.committed else "nothing"
            lines.append(
                f"partition {p.partition}: log {p.log_start}..{p.log_end - 1}, archiver committed "
                f"{committed}, checked from offset {p.checked_from} (clean below {p.clean_below} now), "
                f"archived {archived}, "
                f"holes {holes} ({p.missing} offsets), repaired {p.repaired}, duplicates {p.duplicates}, "
                f"re-sent copies not archived {p.copies}"
            )
        lines += [
            f"set aside a part the store could no longer read, and rebuilt it: {part}"
            for part in self.set_aside
        ]
        lines.append(f"event ids archived more than once within the dedup window: {self.repeated_ids}")
        pending = sum(m.explained == PENDING for m in self.mismatches)
        late = sum(m.explained == LATE for m in self.mismatches)
        lines.append(
            f"derived tables: {self.days_compared} site-days compared, {len(self.wrong)} differ "
            f"(wrong); explained: {pending} {PENDING}, {late} {LATE}"
        )
        lines += [
            f"  {m.site} {m.day:%Y-%m-%d}: raw {m.raw[0]} page views / {m.raw[1]} visitors, "
            f"agg {m.agg[0]} / {m.agg[1]}: {m.explained or 'wrong'}"
            + (f" ({m.late_events} late events)" if m.late_events else "")
            for m in self.mismatches
        ]
        return lines


def derived_mismatches(client: Client, topic: str, site: str | None = None) -> tuple[list[DayMismatch], int]:
    """Page views and visitors per site (or of `site`) and day, agg against raw (whole archived
    days), each difference explained (pending, late) or not (wrong): explain()."""
    mismatches, compared = [], 0
    spans = client.query(
        "SELECT site, toStartOfDay(min(ts)), toStartOfDay(max(ts)) + INTERVAL 1 DAY FROM events "
        "WHERE kafka_partition != {synthetic:UInt16} AND name = 'pageview' "
        "AND ({site:String} = '' OR site = {site:String}) GROUP BY site",
        parameters={"synthetic": SYNTHETIC_PARTITION, "site": site or ""},
    ).result_rows
    processed, _ = provenance.stream_progress(client, topic)
    for name, first_day, end_day in spans:
        q = queries.StatsQuery(name, first_day.replace(tzinfo=UTC), end_day.replace(tzinfo=UTC))
        raw = queries.timeseries(client, q, "day", source="raw")
        agg = queries.agg.timeseries(client, q, "day")  # the rollups themselves, whatever answers
        done = processed_days(client, q, processed)
        late = provenance.late_events_by_day(client, q)
        for r, a in zip(raw, agg, strict=True):
            if r.pageviews or a.pageviews:
                compared += 1
            day = provenance.as_utc(r.t)
            raw_day, agg_day = (r.pageviews, r.visitors), (a.pageviews, a.visitors)
            if raw_day != agg_day:
                why = explain(agg_day, done.get(day, (0, 0)), late.get(day, 0))
                mismatches.append(DayMismatch(name, r.t, raw_day, agg_day, why, late.get(day, 0)))
    return mismatches, compared


def processed_days(
    client: Client, q: queries.StatsQuery, processed: dict[int, int]
) -> dict[datetime, tuple[int, int]]:
    """Raw page views and visitors per UTC day over the log prefix the stream jobs processed."""
    offsets = provenance.processed_parameters(processed)
    parameters = {"site": q.site, "start": q.start, "end": q.end, **offsets}
    return {
        provenance.as_utc(day): (int(pageviews), int(visitors))
        for day, pageviews, visitors in client.query(provenance.RAW_DAYS, parameters=parameters).result_rows
    }


def explain(agg: tuple[int, int], processed: tuple[int, int], late_events: int) -> str:
    """Why a day's agg differs from raw, or '' (wrong). PENDING: agg equals raw over the events
    the stream jobs processed (the rest is on its way, and within the allowed lateness counts
    exactly). LATE: what agg lacks of the processed events is no more than the day's late events
    (older than the allowed lateness: each leaves one page view out, its visitor at most), which
    the query layer answers from the archive."""
    if agg == processed:
        return PENDING
    missing_pageviews, missing_visitors = processed[0] - agg[0], processed[1] - agg[1]
    if late_events and 0 < missing_pageviews <= late_events and 0 <= missing_visitors <= missing_pageviews:
        return LATE
    return ""


def repeated_ids(client: Client, window_s: int) -> int:
    """How many (site, event_id) the archive holds twice, received at most the window apart (a
    re-sent event archived twice), among the events received in the last two windows."""
    parameters = {"synthetic": SYNTHETIC_PARTITION, "window_s": window_s, "window_ms": window_s * 1000}
    rows = client.query(_REPEATED_IDS, parameters=parameters).result_rows
    return int(rows[0][0])


def verify(settings: Settings, fix: bool = True, site: str | None = None, full: bool = False) -> VerifyReport:
    """The archive against the log (holes repaired with `fix`; from the clean marks, or every
    offset with `full`), each re-sent event archived once, the derived tables against the
    archive (of every site, or of `site`). With `fix`, a part the store can no longer read is
    set aside and rebuilt (storage/broken_parts.py), then the audit runs again: from every
    offset when the part was the archive's, so the rows it held are re-read from the log."""
    set_aside: list[str] = []
    while True:
        try:
            report = _verify_once(settings, fix, site, full)
            report.set_aside = set_aside
            return report
        except ClickHouseError as error:
            done = _set_aside(settings, error) if fix and len(set_aside) < MAX_SET_ASIDE else None
            if done is None:
                raise AuditUnavailable(
                    f"ClickHouse at {settings.clickhouse_url} failed the audit: {_first_line(error)}"
                ) from error
            table, part = done
            set_aside.append(f"{table} part {part}")
            full = full or table.endswith(".events")


def _set_aside(settings: Settings, error: ClickHouseError) -> tuple[str, str] | None:
    """(table, part) of the broken part behind `error` (named in it, or found by CHECK:
    broken_parts.located), once set aside; None when there is none, or the store refused that
    too (the audit's own error is then the one to report)."""
    client = connect(settings)
    try:
        for broken in broken_parts.located(client, error):
            table = broken_parts.set_aside(client, broken)
            if table:
                return table, broken.part
    except ClickHouseError:
        return None
    return None


def _verify_once(settings: Settings, fix: bool, site: str | None, full: bool) -> VerifyReport:
    try:
        client = connect(settings)
        partitions = asyncio.run(audit_archive(settings, client, fix=fix, full=full))
        repeated = repeated_ids(client, settings.dedup_window_s)
        mismatches, compared = derived_mismatches(client, settings.pageviews_topic, site)
    except UnknownTopicOrPartitionError as error:
        where = f"Kafka at {settings.kafka_bootstrap}"
        raise AuditUnavailable(
            f"{where} has no topic {settings.pageviews_topic}: nothing to audit against"
        ) from error
    except KafkaError as error:
        raise AuditUnavailable(f"cannot reach Kafka at {settings.kafka_bootstrap}{_why(error)}") from error
    except (OperationalError, OSError) as error:
        store = settings.clickhouse_url
        raise AuditUnavailable(f"cannot reach ClickHouse at {store}{_why(error)}") from error
    return VerifyReport(partitions, mismatches, compared, repeated)


def _first_line(error: Exception) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0][:300]


def _why(error: Exception) -> str:
    """Nothing listening (the stack is down) in the words the CLI uses elsewhere; anything else
    with the error's first line (the HTTP client's wording of a refused connection is a paragraph)."""
    text = str(error)
    refused = "Connection refused" in text or "Failed to establish a new connection" in text
    if refused or isinstance(error, (KafkaConnectionError, ConnectionRefusedError)):
        return " — start the stack with 'tally up -d'"
    return f" ({_first_line(error)})"
