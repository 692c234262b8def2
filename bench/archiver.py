"""The archiver's throughput: a backlog on the log, the archiver started, time to archive it all.

Run by `tally bench` (bench/report.py) on the local stack, with the stream jobs paused.
"""

from __future__ import annotations

import asyncio
import time
from uuid import uuid4

from aiokafka import AIOKafkaProducer

from loadgen.traffic import bulk_events
from ops.local import supervisor
from storage import queries
from storage.client import connect
from tally.event import PageViewEvent
from tally.settings import Settings


async def _produce(settings: Settings, events: list[PageViewEvent]) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap, acks="all", linger_ms=20, max_batch_size=512 * 1024
    )
    await producer.start()
    try:
        sends = [await producer.send(settings.pageviews_topic, e.to_json(), key=e.key) for e in events]
        await asyncio.gather(*sends)
    finally:
        await producer.stop()


def bench_archiver(settings: Settings, count: int = 200_000) -> dict[str, float]:
    """The archiver stopped, a backlog produced, the archiver started: time to archive all."""
    site = f"archiver-{uuid4().hex[:8]}.bench.example.com"
    rpc = supervisor.rpc(settings)
    rpc.supervisor.stopProcess("archiver", True)
    try:
        asyncio.run(_produce(settings, bulk_events(site, count)))
    finally:
        started = time.monotonic()
        rpc.supervisor.startProcess("archiver", False)
    client = connect(settings)
    # bulk_events are all page views: the site's page-view count is what has been archived.
    while queries.total_pageviews(client, site) < count:
        time.sleep(0.2)
    elapsed = time.monotonic() - started
    return {"events": count, "seconds": round(elapsed, 2), "events_per_s": round(count / elapsed)}
