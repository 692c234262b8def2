"""An archiver writes a partition's offsets only while it holds the partition's fence (issue 33),
and the store checks it in the insert itself: against the real ClickHouse endpoint, a batch
written with a fence taken over since lands no row in any table the archive accounts with, while
the new owner's lands whole."""

from __future__ import annotations

from uuid import uuid4

import pytest
from aiokafka import ConsumerRecord
from clickhouse_connect.driver.client import Client

from archiver import fences
from archiver.fences import Fence
from archiver.rows import ArchiveRow, archive_row, write_batch
from storage.client import connect
from tally.settings import Settings
from tests.fixtures.events import make_events

pytestmark = pytest.mark.integration

# Partitions the session's `pageviews` does not have, on a topic of the test's own: nothing any
# archiver or audit of the session reads.
# A copy in STALE is of a row in KEPT: of two copies in one batch the lower (partition, offset) is kept.
KEPT, STALE = 900, 901
WINDOW_S = 3600.0


def batch(site: str, partition: int, first_offset: int, count: int) -> list[ArchiveRow]:
    rows = []
    for offset, made in enumerate(make_events(site, count), start=first_offset):
        event = made.model_copy(update={"event_id": uuid4()})  # make_events repeats its ids
        line = archive_row(event, partition, offset)
        rows.append(ArchiveRow(line, partition, offset, event.site, event.event_id, event.received_at))
    return rows


def malformed(partition: int, offset: int) -> tuple[ConsumerRecord, str]:
    value = b"{not json"
    return ConsumerRecord("pageviews", partition, offset, 0, 0, b"k", value, None, 1, len(value), []), "bad"


def accounted(client: Client, site: str, partition: int) -> dict[str, int]:
    """What the archive holds of the partition: rows of the site, dead letters, copies."""

    def count(sql: str, **parameters: object) -> int:
        return int(client.query(sql, parameters={"partition": partition, **parameters}).result_rows[0][0])

    where = "kafka_partition = {partition:UInt16}"
    return {
        "events": count(f"SELECT count() FROM events WHERE {where} AND site = {{site:String}}", site=site),
        "dead": count(f"SELECT count() FROM archive_deadletters FINAL WHERE {where}"),
        "copies": count(
            f"SELECT count() FROM archive_duplicates FINAL WHERE {where} AND site = {{site:String}}",
            site=site,
        ),
    }


def test_a_batch_whose_fence_was_taken_over_lands_nothing(settings: Settings) -> None:
    client = connect(settings)
    topic, site = f"fenced-{uuid4().hex[:8]}", f"fence-{uuid4().hex[:8]}.example.com"
    frozen = Fence(topic, "archiver-frozen")
    frozen.epochs = fences.take(client, topic, frozen.owner, [STALE, KEPT])
    # While `frozen` was stopped, the group gave STALE to another archiver, which took its fence.
    successor = Fence(topic, "archiver-successor")
    successor.epochs = fences.take(client, topic, successor.owner, [STALE])
    assert successor.epochs[STALE] == frozen.epochs[STALE] + 1

    # `frozen`'s batch: rows of both partitions, a dead letter and a copy (of a row of KEPT) in STALE.
    kept_rows = batch(site, KEPT, 0, 5)
    stale_rows = batch(site, STALE, 0, 5)
    copy = stale_rows[-1]
    copy = ArchiveRow(
        copy.line, copy.partition, copy.offset, site, kept_rows[0].event_id, kept_rows[0].received_at
    )
    stale_rows[-1] = copy
    write_batch(client, kept_rows + stale_rows, [malformed(STALE, 5)], WINDOW_S, fence=frozen)

    assert accounted(client, site, STALE) == {"events": 0, "dead": 0, "copies": 0}
    assert accounted(client, site, KEPT) == {"events": 5, "dead": 0, "copies": 0}
    assert fences.held(client, frozen) == {KEPT}

    # The successor archives STALE from where the archive ends (nothing of it): all of it lands.
    write_batch(client, stale_rows, [malformed(STALE, 5)], WINDOW_S, fence=successor.of({STALE}))
    assert accounted(client, site, STALE) == {"events": 4, "dead": 1, "copies": 1}
    assert fences.held(client, successor) == {STALE}


def test_the_latest_fence_holds_even_against_its_own_owners_older_epoch(settings: Settings) -> None:
    """A partition given back to an archiver is a new epoch: a batch of its earlier tenure is stale."""
    client = connect(settings)
    topic, site = f"fenced-{uuid4().hex[:8]}", f"fence-{uuid4().hex[:8]}.example.com"
    first = Fence(topic, "archiver-a", fences.take(client, topic, "archiver-a", [STALE]))
    again = Fence(topic, "archiver-a", fences.take(client, topic, "archiver-a", [STALE]))
    assert again.epochs[STALE] == first.epochs[STALE] + 1

    write_batch(client, batch(site, STALE, 0, 3), [], WINDOW_S, fence=first)
    assert accounted(client, site, STALE)["events"] == 0
    write_batch(client, batch(site, STALE, 0, 3), [], WINDOW_S, fence=again)
    assert accounted(client, site, STALE)["events"] == 3


def test_without_a_fence_every_row_lands(settings: Settings) -> None:
    """The audit's repairs (and fencing switched off) write as before: no fence, no condition."""
    client = connect(settings)
    site = f"fence-{uuid4().hex[:8]}.example.com"
    write_batch(client, batch(site, KEPT, 100, 4), [malformed(KEPT, 104)], WINDOW_S)
    assert accounted(client, site, KEPT)["events"] == 4
