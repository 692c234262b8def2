"""The archiver: Kafka `pageviews` → ClickHouse `events`, every event exactly once.

Exactly once: each row carries its (kafka_partition, kafka_offset). When partitions are
assigned, the archiver seeks each one to one past the highest offset already in the
archive, so the archive — not the consumer group — is the record of progress. A crash
between the insert and the offset commit therefore re-reads nothing that is archived.
Offsets are still committed after each insert so that lag is visible to Kafka tooling.
Resuming from the archive's end is only sound if nothing below it is missing: so a record is
archived only if its offset is exactly its partition's next one (Batch), and the archive
audits itself against the log at start and every archive_audit_interval_s, archiving any
hole it finds (archiver/audit.py). Each round, the one at start too, checks only the
offsets above the clean marks an earlier round left: a crash or a restart of this archiver
writes nothing below its partitions' archive end, so it cannot open a hole or archive an offset
twice below a mark (what can — rows deleted or restored by hand, a thawed second archiver's
stale batch that got past its fence — is for `tally verify --full`).

Two archivers in one group (`tally up --cluster`) never archive the same offsets: on each
assignment an archiver takes its partitions' fences before it reads where the archive ends, and
every insert of a batch keeps only the rows of partitions whose fence is still its own, checked by
the store in the INSERT itself (archiver/fences.py). A thawed archiver whose partitions were
reassigned while it was frozen inserts nothing from the batch it held: it logs `fenced`, commits
no offset and skips those partitions until the group assigns them again.

Malformed messages go to `deadletter` with the reason, and their offsets to the
`archive_deadletters` table; they never block a partition. A copy of an event already archived
(its sender re-sent it with the same event_id) is not archived again: its offset goes to
`archive_duplicates` (archiver/copies.py).
While ClickHouse is down the archiver retries the same batch with backoff and fetches at
most one batch ahead: memory stays bounded by two batches.

Rows go to ClickHouse as JSONEachRow: each message is validated against the event contract
(malformed ones are dead-lettered, never sent), then written as pydantic serialises the
validated event, and ClickHouse parses the JSON natively. Building rows in Python and
serialising them to the Native format cost more than everything else the archiver does.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import orjson
import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import IllegalStateError, KafkaError
from clickhouse_connect.driver.client import Client

from archiver import fences
from archiver.audit import AuditTotals, audit_archive
from archiver.copies import Copy
from archiver.fences import Fence
from archiver.log import GROUP_ID
from archiver.rows import (
    ACCOUNTED_OFFSETS,
    ArchiveRow,
    parse,
    write_batch,
)
from storage import broken_parts
from storage.client import connect
from storage.schema import apply_migrations
from storage.tables import SYNTHETIC_PARTITION
from tally import heartbeat, structured_logging
from tally.settings import Settings

log = structlog.get_logger()
T = TypeVar("T")

#: How long the store may refuse one batch before the archiver stops calling itself healthy.
STUCK_AFTER_S = 300.0
#: The longest wait between two tries of a write (or a question) the store refused; the first
#: is TALLY_ARCHIVER_RETRY_BASE_S, doubled each time.
RETRY_MAX_S = 30.0


@dataclass
class Batch:
    """Records collected for one insert, each partition's a contiguous run of offsets.

    Contiguity is what makes the archive provably gapless: a record is taken only if its
    offset is exactly the partition's next expected one. That relies on `pageviews` having
    contiguous offsets, which holds because its only producer is idempotent and not
    transactional (no commit markers take offsets) and the topic is not compacted
    (cleanup.policy=delete); tests/integration/test_log_contiguity.py checks both. A
    transactional producer or compaction would make the archiver stop at the first missing
    offset — loudly (`offset_jump`), never with a silent hole.
    """

    generation: int = 0  # the archiver's rebalance count when collection began
    rows: dict[int, list[ArchiveRow]] = field(default_factory=dict)  # per partition, in offset order
    dead: dict[int, list[tuple[ConsumerRecord, str]]] = field(default_factory=dict)
    next_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    first_offsets: dict[int, int] = field(default_factory=dict)  # where each run began
    skipped: int = 0

    def add(self, record: ConsumerRecord, next_expected: dict[int, int]) -> Jump | None:
        """Take the record if it is its partition's next offset; a Jump if it lies beyond."""
        expected = next_expected.get(record.partition)
        if expected is None or record.offset < expected:
            # Position not known yet, already archived, or already in this batch: a fetch
            # racing the seek to the archive's position can deliver the same offsets twice.
            self.skipped += 1
            return None
        if record.offset > expected:
            # A fetch that raced a seek (after a rebalance) can deliver records from past the
            # position the archive needs; taking them as progress would leave a hole forever.
            return self._drop_partition(record, expected, next_expected)
        self.first_offsets.setdefault(record.partition, record.offset)
        next_expected[record.partition] = record.offset + 1
        self.next_offsets[TopicPartition(record.topic, record.partition)] = record.offset + 1
        row = parse(record)
        if isinstance(row, str):
            self.dead.setdefault(record.partition, []).append((record, row))
        else:
            self.rows.setdefault(record.partition, []).append(row)
        return None

    def _drop_partition(self, record: ConsumerRecord, expected: int, next_expected: dict[int, int]) -> Jump:
        """Forget what this batch holds from the record's partition; re-read it from its start."""
        self.skipped += 1
        self.rows.pop(record.partition, None)
        self.dead.pop(record.partition, None)
        self.next_offsets.pop(TopicPartition(record.topic, record.partition), None)
        resume = self.first_offsets.pop(record.partition, expected)
        next_expected[record.partition] = resume
        return Jump(TopicPartition(record.topic, record.partition), expected, record.offset, resume)

    def all_rows(self) -> list[ArchiveRow]:
        return [row for rows in self.rows.values() for row in rows]

    def all_dead(self) -> list[tuple[ConsumerRecord, str]]:
        return [letter for letters in self.dead.values() for letter in letters]

    def __len__(self) -> int:
        return sum(map(len, self.rows.values())) + sum(map(len, self.dead.values()))


@dataclass(frozen=True)
class Jump:
    """A record beyond its partition's next expected offset: the batch dropped that partition."""

    partition: TopicPartition
    expected: int
    received: int
    resume: int  # where the partition is re-read from


@dataclass
class StallWatch:
    """Finds partitions the log is ahead of that no collection has moved for a while.

    The archiver takes a partition's records only from its next expected offset; if the
    consumer's fetch position ever disagrees with it without delivering a record past it (CI
    saw a partition stop for good after a rebalance that followed a pause past the session),
    nothing else would move that partition again until a restart. A stalled partition is
    sought to its next expected offset, which drops whatever the fetcher holds for it; on a
    partition that was only slow, that costs one re-fetch.
    """

    interval_s: float = 5.0
    _checked_at: float = field(default_factory=time.monotonic)
    _seen: dict[int, int] = field(default_factory=dict)  # next expected offsets at the last check

    def due(self, now: float) -> bool:
        return now - self._checked_at >= self.interval_s

    def stalled(self, next_expected: dict[int, int], log_ends: dict[int, int], now: float) -> list[int]:
        """Partitions with records in the log past their next expected offset that was the same
        at the previous check too."""
        stalled = [
            partition
            for partition, expected in sorted(next_expected.items())
            if log_ends.get(partition, 0) > expected and self._seen.get(partition) == expected
        ]
        self._seen = dict(next_expected)
        self._checked_at = now
        return stalled


def archived_positions(client: Client, topic_partitions: list[int]) -> dict[int, int]:
    """Next offset to read per partition, according to what the archive already holds."""
    rows = client.query(
        f"SELECT kafka_partition, max(kafka_offset) + 1 FROM ({ACCOUNTED_OFFSETS})"
        " WHERE kafka_partition IN {partitions:Array(UInt16)} GROUP BY kafka_partition",
        parameters={"partitions": topic_partitions, "synthetic": SYNTHETIC_PARTITION},
    ).result_rows
    return {int(partition): int(offset) for partition, offset in rows}


class ResumeFromArchive(ConsumerRebalanceListener):
    """On every assignment, continue each partition where the archive ends.

    `next_expected` is shared with the archiver: records below it are dropped even if the
    fetcher had already started from the (older) committed offset when the seek happened.
    `settle` is awaited first on every rebalance: it lets the insert in flight land and
    drops the batch being collected, so that the archive's end is the whole truth. With a
    `fence`, the assigned partitions' fences are taken before the archive's end is read: from
    then on a previous owner's inserts for them land nothing (archiver/fences.py).
    """

    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        settings: Settings,
        next_expected: dict[int, int],
        settle: Callable[[], Awaitable[None]],
        fence: Fence | None = None,
    ) -> None:
        self._consumer = consumer
        # A client of its own: one clickhouse-connect client runs one query at a time, and
        # the archiver's may be inserting when a rebalance asks where the archive ends.
        self._client = connect(settings)
        self._retry_base_s = settings.archiver_retry_base_s
        self._next_expected = next_expected
        self._settle = settle
        self._fence = fence

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._settle()
        for tp in revoked:
            self._next_expected.pop(tp.partition, None)
            if self._fence:
                self._fence.epochs.pop(tp.partition, None)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        if not assigned:
            return
        # Close the gate before the first await: the fetcher may already be delivering
        # records from the committed offsets while we ask the archive where it ends.
        # Records skipped meanwhile are fetched again after the seeks below.
        for tp in assigned:
            self._next_expected.pop(tp.partition, None)
        await self._settle()
        partitions = [tp.partition for tp in assigned]
        if self._fence:
            # Before the archive's end is read: an insert of the previous owner either landed
            # already (and is below the end read next) or is refused from now on.
            fence = self._fence
            taken = await self._until_answered(
                "fence_take_failed", lambda: fences.take(self._client, fence.topic, fence.owner, partitions)
            )
            fence.epochs.update(taken)
            log.info("fences_taken", epochs=dict(sorted(taken.items())), owner=fence.owner)
        archived = await self._archived_positions(partitions)
        # Nothing archived from a partition: the archive is a copy of the whole log, from its
        # earliest retained offset (retention may have deleted offset 0 long ago).
        earliest = await self._consumer.beginning_offsets(list(assigned))
        positions = {}
        for tp in assigned:
            position = archived.get(tp.partition, earliest[tp])
            if position < earliest[tp]:
                # Retention deleted events the archive never got (an archiver down for longer
                # than the topic keeps them): they are gone; say so, and go on from what is left.
                log.error("log_expired_before_archived", partition=tp.partition, lost=earliest[tp] - position)
                position = earliest[tp]
            self._consumer.seek(tp, position)
            self._next_expected[tp.partition] = positions[tp.partition] = position
        log.info("partitions_assigned", partitions=sorted(partitions), resume=positions)

    async def _archived_positions(self, partitions: list[int]) -> dict[int, int]:
        """Where the archive ends, asked until the store answers: a listener that failed
        would leave the partitions without a position, and every record skipped."""
        return await self._until_answered(
            "archive_position_failed", lambda: archived_positions(self._client, partitions)
        )

    async def _until_answered(self, failure: str, ask: Callable[[], T]) -> T:
        delay_s = self._retry_base_s
        while True:
            try:
                return await asyncio.to_thread(ask)
            except Exception as error:  # the store down or slow: ask again
                log.warning(failure, error=str(error)[:300], retry_in_s=delay_s)
                await set_aside_broken_parts(self._client, error)
                await asyncio.sleep(delay_s)
                delay_s = min(delay_s * 2, RETRY_MAX_S)


async def set_aside_broken_parts(client: Client, error: Exception | None = None) -> list[str]:
    """A part of the store that no longer reads back fails every retry the same way (a write of
    the batch, a read of the archive's end, an audit): it is detached and rebuilt
    (storage/broken_parts.py), and the retry goes on. The parts behind `error`, or without one
    the newest parts that fail CHECK (after a full disk). The tables whose parts were set aside."""
    tables = []
    try:
        if error is None:
            found = await asyncio.to_thread(broken_parts.checked, client)
        else:
            found = await asyncio.to_thread(broken_parts.located, client, error)
        for broken in found:
            table = await asyncio.to_thread(broken_parts.set_aside, client, broken)
            tables += [table] if table else []
    except Exception as failure:  # the store away again: the next failure tries again
        log.warning("broken_part_not_set_aside", error=str(failure)[:300])
    return tables


class Archiver:
    def __init__(
        self, settings: Settings, client: Client, max_rows: int = 10_000, max_wait_s: float = 1.0
    ) -> None:
        self.settings = settings
        self.client = client
        self.max_rows = max_rows
        self.max_wait_s = max_wait_s
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=settings.kafka_bootstrap,
            group_id=GROUP_ID,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=4 * 1024 * 1024,
            isolation_level="read_committed",
            session_timeout_ms=int(settings.archiver_session_timeout_s * 1000),
            heartbeat_interval_ms=int(settings.archiver_session_timeout_s * 1000 / 3),
        )
        self.deadletter = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
        # Per partition, the next offset not yet archived (see Batch.add).
        self.next_expected: dict[int, int] = {}
        self._stopping = asyncio.Event()
        self._archiving: asyncio.Task[None] | None = None  # the batch being inserted
        self._rebalances = 0  # a batch collected across a rebalance is dropped
        self._stall_watch = StallWatch()
        self.audit = AuditTotals()
        # Set when a part of the archive was set aside: the audit runs at once, over every offset.
        self._full_audit_due = asyncio.Event()
        # The fences this archiver holds (archiver/fences.py); None: fencing off (a test's).
        self.fence = (
            Fence(settings.pageviews_topic, fences.new_owner()) if settings.archiver_fencing else None
        )

    async def run(self) -> None:
        await self.deadletter.start()
        self.consumer.subscribe(
            [self.settings.pageviews_topic],
            listener=ResumeFromArchive(
                self.consumer, self.settings, self.next_expected, self._settle, self.fence
            ),
        )
        await self.consumer.start()
        auditing = asyncio.create_task(self._audit_periodically())
        try:
            while not self._stopping.is_set():
                # The next batch is fetched and parsed while the previous one is inserted;
                # batches are archived and committed one after the other, in order.
                batch = await self._collect()
                await self._archived()
                # A batch collected before a rebalance is stale: its partitions were sought
                # to where the archive ends, and its records will be fetched again.
                if len(batch) and batch.generation == self._rebalances:
                    self._archiving = asyncio.create_task(self._archive(batch))
                elif batch.skipped:
                    log.debug("archived", rows=0, copies=0, dead=0, skipped=batch.skipped)
                if len(batch) < self.max_rows and self._stall_watch.due(time.monotonic()):
                    await self._unstall()
                heartbeat.beat(self.settings, "archiver")
            await self._archived()
        finally:
            auditing.cancel()
            await asyncio.gather(auditing, return_exceptions=True)
            await self.consumer.stop()
            await self.deadletter.stop()

    async def _audit_periodically(self) -> None:
        """At start and every archive_audit_interval_s: check the archive against the log and
        archive any hole from it (own client: the run loop's may be inserting)."""
        client = connect(self.settings)
        while True:
            full = self._full_audit_due.is_set()
            self._full_audit_due.clear()
            try:
                # Up to the archive's end only: newest offsets the store lost are re-archived by
                # this archiver itself on its next assignment (it resumes from the archive's end).
                audits = await audit_archive(self.settings, client, full=full, to_commits=False)
            except Exception as error:  # Kafka or the store away: the next round will tell
                log.warning("archive_audit_failed", error=str(error)[:300])
                self._archive_part_set_aside(await set_aside_broken_parts(client, error))
                if full:
                    self._full_audit_due.set()  # not done: the next round is full too
            else:
                self.audit.add(audits)
                self.audit.write(self.settings)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._full_audit_due.wait(), self.settings.archive_audit_interval_s)

    def _archive_part_set_aside(self, tables: list[str]) -> None:
        """After a part of the archive (`events`) was set aside, its offsets are re-read from the
        log by a full audit, at once."""
        if any(table.endswith(".events") for table in tables):
            self._full_audit_due.set()

    def stop(self) -> None:
        self._stopping.set()

    async def _archived(self) -> None:
        """Wait for the batch in flight, if any, to be archived and committed. The task is
        kept, not cleared: the run loop and the rebalance listener may both be waiting."""
        if self._archiving:
            await self._archiving

    async def _settle(self) -> None:
        # Count the rebalance before waiting: whichever of the run loop and the listener
        # wakes first, a batch collected before it is then known to be stale.
        self._rebalances += 1
        await self._archived()

    async def _collect(self) -> Batch:
        """Up to max_rows messages or max_wait_s, whichever comes first; empty if the
        partitions were reassigned meanwhile (its records are fetched again from the
        archive's end)."""
        batch = Batch(generation=self._rebalances)
        deadline = time.monotonic() + self.max_wait_s
        while len(batch) < self.max_rows and not self._stopping.is_set():
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0:
                break
            fetched = await self.consumer.getmany(
                timeout_ms=remaining_ms, max_records=self.max_rows - len(batch)
            )
            if self._rebalances != batch.generation:
                return Batch()
            for records in fetched.values():
                for record in records:
                    jump = batch.add(record, self.next_expected)
                    if jump:
                        self._seek_back(jump)
                        break  # the rest of this partition's records lie beyond too
        return batch

    async def _unstall(self) -> None:
        """Seek every stalled partition (StallWatch) to its next expected offset. Checked only
        after a collection that ended short of a full batch: the fetcher had nothing more."""
        assigned = {tp.partition for tp in self.consumer.assignment()}
        expected = {p: offset for p, offset in self.next_expected.items() if p in assigned}
        partitions = [TopicPartition(self.settings.pageviews_topic, p) for p in expected]
        try:
            ends = await self.consumer.end_offsets(partitions) if partitions else {}
        except KafkaError as error:  # the broker away: the next check will tell
            log.warning("log_end_unknown", error=str(error)[:300])
            return
        log_ends = {tp.partition: offset for tp, offset in ends.items()}
        for partition in self._stall_watch.stalled(expected, log_ends, time.monotonic()):
            # Only if a rebalance has not moved it meanwhile: the listener's seek is newer.
            if self.next_expected.get(partition) != expected[partition]:
                continue
            log.warning(
                "partition_stalled",
                partition=partition,
                next_offset=expected[partition],
                log_end=log_ends[partition],
            )
            try:
                self.consumer.seek(
                    TopicPartition(self.settings.pageviews_topic, partition), expected[partition]
                )
            except IllegalStateError:  # revoked meanwhile: its next owner seeks it
                continue

    def _seek_back(self, jump: Jump) -> None:
        log.warning(
            "offset_jump",
            partition=jump.partition.partition,
            expected=jump.expected,
            received=jump.received,
            resume=jump.resume,
        )
        self.consumer.seek(jump.partition, jump.resume)

    async def _archive(self, batch: Batch) -> None:
        dead = batch.all_dead()
        for record, reason in dead:
            await self._dead_letter(record, reason)
        rows = batch.all_rows()
        # Copies of events already archived are looked up here, in the sequential step: the
        # previous batch is in the archive (and its ids in the index) before this one looks.
        window_s = self.settings.dedup_window_s
        # The fences as they are now: taken on assignment, before any of the batch was collected.
        partitions = set(batch.rows) | set(batch.dead)
        fence = self.fence.of(partitions) if self.fence else None

        def write(client: Client) -> tuple[list[Copy], set[int]]:
            copies = write_batch(client, rows, dead, window_s, fence=fence)
            lost = partitions - fences.held(client, fence) if fence else set()
            return copies, lost

        copies, lost = await self._with_retry(write)
        if fence and lost:
            self._fenced(fence, lost, batch)
            return
        if batch.next_offsets:
            try:
                await self.consumer.commit(batch.next_offsets)
            except KafkaError as error:  # e.g. mid-rebalance: the archive stays the record
                log.warning("offset_commit_failed", error=str(error)[:300])
        if copies:
            log.info("resent_copies_dropped", copies=len(copies))
        archived = len(rows) - len(copies)
        log.debug("archived", rows=archived, copies=len(copies), dead=len(dead), skipped=batch.skipped)

    def _fenced(self, fence: Fence, lost: set[int], batch: Batch) -> None:
        """The batch's partitions in `lost` were taken over while it was being written: the store
        refused their rows. No offset is committed; their records are skipped until the group
        assigns them again (the rebalance that took them is on its way to this consumer too)."""
        for partition in sorted(lost):
            log.warning(
                "fenced",
                partition=partition,
                epoch=fence.epochs.get(partition, 0),
                owner=fence.owner,
                first_offset=batch.first_offsets.get(partition),
                records=len(batch.rows.get(partition, [])) + len(batch.dead.get(partition, [])),
            )
            # Unless the partition was assigned again since (a newer epoch): that tenure goes on.
            if self.fence is not None and self.fence.epochs.get(partition) == fence.epochs.get(partition):
                self.fence.epochs.pop(partition, None)
                self.next_expected.pop(partition, None)

    async def _with_retry(self, write: Callable[[Client], T]) -> T:
        """Write to the store until it takes it: ClickHouse down or slow, keep the batch, back
        off, retry. A retried insert that had landed after all is dropped by the store as a
        duplicate block (migration 0019), and its rows are no copies of themselves.

        The heartbeat goes on while the store refuses the batch for less than STUCK_AFTER_S: a
        store restarting or briefly full is no fault of the archiver's. Past that the archiver
        archives nothing and `tally status` must say so, not call it healthy."""
        delay_s = self.settings.archiver_retry_base_s
        failing_since = time.monotonic()
        disk_was_full = False
        while True:
            try:
                written = await asyncio.to_thread(write, self.client)
            except Exception as error:
                log.warning("archive_insert_failed", error=str(error)[:300], retry_in_s=delay_s)
                disk_was_full = disk_was_full or broken_parts.disk_full(error)
                self._archive_part_set_aside(await set_aside_broken_parts(self.client, error))
                if time.monotonic() - failing_since < STUCK_AFTER_S:
                    heartbeat.beat(self.settings, "archiver")
                await asyncio.sleep(delay_s)
                delay_s = min(delay_s * 2, RETRY_MAX_S)
                continue
            if disk_was_full:
                # A merge writing as the disk filled may have left a part that no read names
                # until it fails: the newest parts are checked once the store writes again.
                self._archive_part_set_aside(await set_aside_broken_parts(self.client))
            return written

    async def _dead_letter(self, record: ConsumerRecord, reason: str) -> None:
        value = orjson.dumps(
            {
                "reason": reason,
                "source": "archiver",
                "topic": record.topic,
                "partition": record.partition,
                "offset": record.offset,
                "value": (record.value or b"").decode("utf-8", errors="replace")[:65536],
            }
        )
        await self.deadletter.send_and_wait(self.settings.deadletter_topic, value, key=record.key)


async def run_archiver(settings: Settings) -> None:
    client = connect(settings)
    archiver = Archiver(settings, client)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, archiver.stop)
    await archiver.run()


def main() -> None:
    structured_logging.configure()
    settings = Settings()
    apply_migrations(settings)
    asyncio.run(run_archiver(settings))
