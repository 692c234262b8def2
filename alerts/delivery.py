"""Alert delivery: the Kafka topic `alerts` → each alert POSTed to its rule's webhook.

At-least-once: an alert's offset is committed only after its delivery ended — delivered
(a 2xx answer) or given up after TALLY_ALERT_DELIVERY_ATTEMPTS tries — and that outcome is
recorded in ClickHouse `alerts` (stage 1: delivered, failed or refused, with the attempts and
the last error), where the dashboard and `GET /api/v1/alerts` show it. A crash before the
commit delivers the alert again, with the same id: the body's `alert_id` and the
`Idempotency-Key` header let the receiver drop the copy.

Retries: exponential backoff from TALLY_ALERT_RETRY_BASE_S, doubled per attempt, capped at
TALLY_ALERT_RETRY_MAX_S; a timeout per POST (TALLY_ALERT_WEBHOOK_TIMEOUT_S). Redirects are
never followed (a 3xx is a failed attempt): a webhook cannot bounce the request elsewhere.
Before an alert's first POST the host is resolved, once, and the alert refused (no retry) unless
every address passes the allow-list of tally/webhook_targets.py (globally routable; loopback and
private networks only with TALLY_ALERT_WEBHOOK_PRIVATE; never a metadata service). Every attempt then
connects to that checked address, never resolving the name again (`pinned`: the URL names the
address; the Host header, TLS's SNI and the certificate check name the host): a DNS answer
that changes between the check and the connection (rebinding) cannot send the POST elsewhere.

Fair across sites: each site's alerts wait in a queue of their own and are delivered one at a
time, in the topic's order, by that site's worker; every site's worker runs at once, with at
most MAX_CONCURRENT_POSTS POSTs in flight over all of them (a backoff's sleep holds none). A
site whose webhooks fail or hang delays only its own alerts: when delivery was one alert at a
time, 30 failing webhooks on one site held another site's alert for minutes.
At most MAX_UNFINISHED alerts are read and not yet finished; the consumer stops fetching until
some finish, so memory is bounded whatever the topic holds.

Alerts now finish out of the topic's order, while Kafka's committed offset means "everything
before this is done": a partition's offset is committed up to its first unfinished alert
(`Progress`), each time an alert's outcome is recorded. A crash delivers again the unfinished
alerts and those finished after the first unfinished one, with their ids.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections import deque
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import httpx
import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError
from clickhouse_connect.driver.client import Client

from storage.alert_rules import DELIVERED, FAILED, REFUSED, record_outcome
from storage.client import connect
from storage.schema import apply_migrations
from tally import heartbeat, structured_logging
from tally.settings import Settings
from tally.webhook_targets import RefusedDestination, checked_addresses

__all__ = ["Delivery", "RefusedDestination", "check_destination", "deliver", "pinned"]

log = structlog.get_logger()

GROUP_ID = "tally-alerts"
# The component name `tally status` checks (ops/local/components.py).
HEARTBEAT = "alerts"
POLL_TIMEOUT_MS = 1000
USER_AGENT = "Tally-Alerts/1"
# POSTs in flight over all sites: one site's worker holds at most one, so a site with hanging
# webhooks cannot take them all.
MAX_CONCURRENT_POSTS = 16
# Alerts read and not yet finished, over all sites (each a few hundred bytes).
MAX_UNFINISHED = 10_000


@dataclass(frozen=True)
class Outcome:
    status: str  # delivered, failed, refused
    attempts: int
    last_error: str = ""


def check_destination(url: str, allow_private: bool) -> str:
    """The one address the webhook's host resolves to that alerts will connect to, once every
    address it resolves to passed the SSRF policy (tally/webhook_targets.py); RefusedDestination
    otherwise."""
    return str(checked_addresses(url, allow_private)[0])


@dataclass(frozen=True)
class PinnedRequest:
    """A POST to the checked address, as if to the webhook's host: the URL names the address
    (so the connection never resolves the name again: no DNS rebinding between check and
    connect), the Host header and TLS's SNI and certificate check name the host."""

    url: str
    host_header: str
    extensions: dict[str, object]


def pinned(url: str, address: str) -> PinnedRequest:
    parts = urlsplit(url)
    literal = f"[{address}]" if ":" in address else address
    netloc = f"{literal}:{parts.port}" if parts.port else literal
    host = parts.netloc.rpartition("@")[2]  # no credentials in a webhook URL, but never send them on
    extensions: dict[str, object] = {"sni_hostname": parts.hostname} if parts.scheme == "https" else {}
    return PinnedRequest(urlunsplit(parts._replace(netloc=netloc)), host, extensions)


def backoff_s(settings: Settings, attempt: int) -> float:
    """The delay after failed attempt `attempt` (1-based): base * 2^(attempt-1), capped."""
    return min(settings.alert_retry_max_s, settings.alert_retry_base_s * 2 ** (attempt - 1))


def webhook_body(alert: dict[str, object]) -> dict[str, object]:
    """What the receiver gets: the alert without its webhook URL (which may hold a secret)."""
    return {key: value for key, value in alert.items() if key != "webhook_url"}


async def deliver(
    http: httpx.AsyncClient,
    settings: Settings,
    alert: dict[str, object],
    posts: asyncio.Semaphore | None = None,
) -> Outcome:
    """POST the alert until a 2xx answer or the attempts run out, every attempt to the one
    address checked (resolved once); each POST takes one of `posts` while it is in flight."""
    posts = posts or asyncio.Semaphore(1)
    url = str(alert["webhook_url"])
    try:
        address = await asyncio.to_thread(check_destination, url, settings.alert_webhook_private)
    except RefusedDestination as refused:
        return Outcome(REFUSED, 0, str(refused))
    request = pinned(url, address)
    headers = {
        "Host": request.host_header,
        "Idempotency-Key": str(alert["alert_id"]),
        "User-Agent": USER_AGENT,
        # No connection kept for another webhook whose host resolves to the same address.
        "Connection": "close",
    }
    last_error = ""
    for attempt in range(1, settings.alert_delivery_attempts + 1):
        try:
            async with posts:
                response = await http.post(
                    request.url, json=webhook_body(alert), headers=headers, extensions=request.extensions
                )
            if 200 <= response.status_code < 300:
                return Outcome(DELIVERED, attempt)
            last_error = f"HTTP {response.status_code}"
        except httpx.HTTPError as error:
            last_error = f"{type(error).__name__}: {error}"[:300]
        log.warning("alert_delivery_retry", alert_id=alert["alert_id"], attempt=attempt, error=last_error)
        if attempt < settings.alert_delivery_attempts:
            await asyncio.sleep(backoff_s(settings, attempt))
    return Outcome(FAILED, settings.alert_delivery_attempts, last_error)


@dataclass
class Progress:
    """One partition's alerts read and not yet finished, and the offset committed so far."""

    unfinished: set[int] = field(default_factory=set)
    next_offset: int = 0  # past the last record read
    committed: int = -1

    def read(self, offset: int) -> None:
        self.unfinished.add(offset)
        self.next_offset = max(self.next_offset, offset + 1)

    def finish(self, offset: int) -> int | None:
        """The offset to commit now that `offset` is done (None: nothing new to commit)."""
        self.unfinished.discard(offset)
        done_up_to = min(self.unfinished) if self.unfinished else self.next_offset
        if done_up_to <= self.committed:
            return None
        self.committed = done_up_to
        return done_up_to


class Delivery:
    """The consumer loop: reads alerts into per-site queues, each site's worker delivers its
    own in order, and each partition is committed up to its first unfinished alert."""

    def __init__(self, settings: Settings, client: Client) -> None:
        self.settings = settings
        self.client = client
        self._stopping = asyncio.Event()
        self._queues: dict[str, deque[tuple[TopicPartition, ConsumerRecord]]] = {}
        self._workers: set[asyncio.Task[None]] = set()
        self._progress: dict[TopicPartition, Progress] = {}
        self._unfinished = 0
        self._room = asyncio.Event()  # set while fewer than MAX_UNFINISHED alerts are unfinished
        self._room.set()
        self._commits = asyncio.Lock()  # one commit at a time: offsets only move forward
        self._posts = asyncio.Semaphore(MAX_CONCURRENT_POSTS)
        self._failure: Exception | None = None  # what stopped a worker, raised by run()
        self._records = asyncio.Lock()  # the store's client runs one query at a time

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        consumer = AIOKafkaConsumer(
            self.settings.alerts_topic,
            bootstrap_servers=self.settings.kafka_bootstrap,
            group_id=GROUP_ID,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        timeout = httpx.Timeout(self.settings.alert_webhook_timeout_s)
        try:
            async with httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False) as http:
                while not self._stopping.is_set():
                    heartbeat.beat(self.settings, HEARTBEAT)
                    if not self._room.is_set():  # full: wait for some to finish, still beating
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self._room.wait(), POLL_TIMEOUT_MS / 1000)
                        continue
                    room = MAX_UNFINISHED - self._unfinished
                    batches = await consumer.getmany(timeout_ms=POLL_TIMEOUT_MS, max_records=min(room, 100))
                    for partition, records in batches.items():
                        for record in records:
                            self.enqueue(http, consumer, partition, record)
        finally:
            for worker in list(self._workers):  # unfinished alerts stay uncommitted: redelivered
                worker.cancel()
            await asyncio.gather(*self._workers, return_exceptions=True)
            await consumer.stop()
        if self._failure is not None:
            raise self._failure

    def enqueue(
        self,
        http: httpx.AsyncClient,
        consumer: AIOKafkaConsumer,
        partition: TopicPartition,
        record: ConsumerRecord,
    ) -> None:
        """Queue the record behind its site's earlier alerts; start the site's worker if idle."""
        self._progress.setdefault(partition, Progress()).read(record.offset)
        self._unfinished += 1
        if self._unfinished >= MAX_UNFINISHED:
            self._room.clear()
        site = site_of(record)
        queue = self._queues.get(site)
        if queue is None:
            queue = self._queues[site] = deque()
            worker = asyncio.create_task(self.work(http, consumer, site, queue))
            self._workers.add(worker)
            worker.add_done_callback(self._workers.discard)
        queue.append((partition, record))

    async def work(
        self,
        http: httpx.AsyncClient,
        consumer: AIOKafkaConsumer,
        site: str,
        queue: deque[tuple[TopicPartition, ConsumerRecord]],
    ) -> None:
        """Deliver one site's alerts, one at a time, until its queue is empty."""
        try:
            while queue:
                partition, record = queue[0]
                await self.handle(http, record)
                queue.popleft()
                await self.finished(consumer, partition, record.offset)
        except Exception as error:  # the store is down, say: stop, as one loop did; a restart redelivers
            self._failure = error
            self.stop()
            raise
        del self._queues[site]  # no await since the check: nothing was queued in between

    async def finished(self, consumer: AIOKafkaConsumer, partition: TopicPartition, offset: int) -> None:
        self._unfinished -= 1
        self._room.set()
        async with self._commits:
            position = self._progress[partition].finish(offset)
            if position is None:
                return
            try:
                await consumer.commit({partition: position})
            except KafkaError as error:  # a rebalance took the partition: its new owner redelivers
                log.warning("alert_commit_failed", partition=partition.partition, error=str(error))

    async def handle(self, http: httpx.AsyncClient, record: ConsumerRecord) -> None:
        try:
            alert = json.loads(record.value)
        except (TypeError, ValueError):
            alert = None
        if not isinstance(alert, dict):
            log.error("alert_unreadable", offset=record.offset)
            return
        outcome = await deliver(http, self.settings, alert, self._posts)
        log.info(
            "alert_delivery", alert_id=alert["alert_id"], status=outcome.status, attempts=outcome.attempts
        )
        async with self._records:
            await asyncio.to_thread(
                record_outcome, self.client, alert, outcome.status, outcome.attempts, outcome.last_error
            )


def site_of(record: ConsumerRecord) -> str:
    """The site an alert is of: its queue (an unreadable record goes to its own, '')."""
    try:
        alert = json.loads(record.value)
    except (TypeError, ValueError):
        return ""
    return str(alert.get("site", "")) if isinstance(alert, dict) else ""


async def run_delivery(settings: Settings) -> None:
    delivery = Delivery(settings, connect(settings))
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, delivery.stop)
    await delivery.run()


def main() -> None:
    structured_logging.configure()
    settings = Settings()
    apply_migrations(settings)
    asyncio.run(run_delivery(settings))


if __name__ == "__main__":
    main()
