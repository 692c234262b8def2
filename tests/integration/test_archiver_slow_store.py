"""The archiver's store slow, then losing connections mid-insert, while events keep arriving
(issue 19): the archiver process reaches the ClickHouse endpoint through a proxy of the test's
(tests/fixtures/store_proxy.py), and the archive ends with every event once and no hole."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.archive import archived
from tests.fixtures.events import make_events
from tests.fixtures.store_proxy import StoreProxy, store_proxy
from tests.integration.test_archiver import produce
from tests.integration.test_archiver_crash import archiver_process, wait_until
from tests.integration.test_archiver_pause import audit, caught_up

pytestmark = pytest.mark.integration

EVENTS = 20_000
CHUNK = 2_000  # produced every PRODUCE_PAUSE_S: a steady stream while the faults hit
PRODUCE_PAUSE_S = 0.5
SESSION_TIMEOUT_S = 6.0  # the broker's minimum
# Longer than the archiver's consumer session, so a slow insert would cost it its partitions
# if waiting for the store blocked its heartbeats. clickhouse-connect's own read timeout
# (send_receive_timeout, 300 s by default; storage/client.py keeps it) and the consumer's
# max.poll.interval (300 s) are far beyond any delay a test can afford.
STORE_DELAY_S = 7.0
RETRY_BASE_S = 0.05  # the archiver's first retry of a refused insert (TALLY_ARCHIVER_RETRY_BASE_S)


@contextmanager
def producing(settings: Settings, events: list[PageViewEvent]) -> Iterator[None]:
    """Produce `events` in chunks, one every PRODUCE_PAUSE_S, from a thread, until all are sent;
    the block's end waits for the last chunk (and raises what the producer raised)."""
    failures: list[BaseException] = []

    def produce_steadily() -> None:
        try:
            for start in range(0, len(events), CHUNK):
                chunk = events[start : start + CHUNK]
                asyncio.run(produce(settings, [(e.key, e.to_json()) for e in chunk]))
                time.sleep(PRODUCE_PAUSE_S)
        except BaseException as error:  # handed to the test thread below
            failures.append(error)

    producer = threading.Thread(target=produce_steadily, name="steady-producer")
    producer.start()
    try:
        yield
    finally:
        producer.join()
    if failures:
        raise failures[0]


@contextmanager
def archiver_behind_proxy(settings: Settings) -> Iterator[StoreProxy]:
    """The archiver process, reaching the store only through a StoreProxy (no faults yet)."""
    with (
        store_proxy(settings.clickhouse_url) as proxy,
        archiver_process(settings.model_copy(update={"clickhouse_url": proxy.url})),
    ):
        yield proxy


def wait_until_archived(settings: Settings, site: str) -> None:
    """Every event of the site in, and the archive at the end of every partition of the log."""
    wait_until(lambda: archived(settings, site)[0] >= EVENTS and caught_up(settings), timeout_s=180)
    time.sleep(3)  # a duplicate, if any, would land now


def recovered_after_two_slow_inserts(settings: Settings, site: str, proxy: StoreProxy) -> None:
    """Lift the delay once the second slow insert has landed. A slow insert that blocked the
    heartbeats would cost the archiver its partitions during that insert, so two prove what
    slowness to the end did; and every request through the proxy waits (each batch makes
    several), so each slow batch costs several delays. The archiver inserts its batches one
    after the other: when the second slow insert is taken the first batch's rows are in, and
    the second's rows arriving mean its delay is over."""
    wait_until(lambda: proxy.faults.delayed_inserts >= 2, timeout_s=180)
    before_second = archived(settings, site)[0]
    wait_until(lambda: archived(settings, site)[0] > before_second, timeout_s=180)
    proxy.faults.delay_s = 0.0


def damaged_partitions(settings: Settings) -> list[tuple[int, list, int]]:
    return [(a.partition, a.holes, a.duplicates) for a in audit(settings) if a.holes or a.duplicates]


def test_a_store_slower_than_the_consumer_session_archives_each_event_once(settings: Settings) -> None:
    site = "slow-store.example.com"
    # The periodic audit would repair a hole: only the archiver's own path is under test.
    settings = settings.model_copy(
        update={"archiver_session_timeout_s": SESSION_TIMEOUT_S, "archive_audit_interval_s": 3600.0}
    )
    with archiver_behind_proxy(settings) as proxy:
        with producing(settings, make_events(site, EVENTS)):
            # Slow from mid-stream on: batches archived, more arriving.
            wait_until(lambda: archived(settings, site)[0] > 0, timeout_s=120)
            proxy.faults.delay_s = STORE_DELAY_S
        recovered_after_two_slow_inserts(settings, site, proxy)
        wait_until_archived(settings, site)

    assert proxy.faults.delayed_inserts >= 2, "the inserts must be slow for this test to mean anything"
    assert damaged_partitions(settings) == []
    assert archived(settings, site) == (EVENTS, EVENTS)


def test_connections_lost_mid_insert_leave_each_event_archived_once(settings: Settings) -> None:
    """As if the store restarted mid-insert: twice while the rows were being sent (nothing
    written), then three times after the store wrote the batch but before its answer arrived
    (written; the archiver cannot know, and sends the batch again)."""
    site = "lost-insert.example.com"
    # Five failed tries of one batch in a row: at the default first retry of 0.5 s, doubled,
    # 15 s of back-off that prove nothing here.
    settings = settings.model_copy(
        update={"archive_audit_interval_s": 3600.0, "archiver_retry_base_s": RETRY_BASE_S}
    )
    with archiver_behind_proxy(settings) as proxy:
        with producing(settings, make_events(site, EVENTS)):
            wait_until(lambda: archived(settings, site)[0] > 0, timeout_s=120)
            proxy.faults.bodies_to_cut = 2
            proxy.faults.answers_to_lose = 3
        wait_until_archived(settings, site)

    assert (proxy.faults.bodies_cut, proxy.faults.answers_lost) == (2, 3)
    assert damaged_partitions(settings) == []
    assert archived(settings, site) == (EVENTS, EVENTS)
