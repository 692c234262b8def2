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

One alert at a time, in the topic's order: alerts are rare (once per rule and window), and a
failing webhook delays the others by at most its retries.
"""

from __future__ import annotations

import asyncio
import json
import signal
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import httpx
import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRecord
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


async def deliver(http: httpx.AsyncClient, settings: Settings, alert: dict[str, object]) -> Outcome:
    """POST the alert until a 2xx answer or the attempts run out, every attempt to the one
    address checked (resolved once)."""
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


class Delivery:
    """The consumer loop: one alert at a time, committed after its outcome is recorded."""

    def __init__(self, settings: Settings, client: Client) -> None:
        self.settings = settings
        self.client = client
        self._stopping = asyncio.Event()

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
                    batches = await consumer.getmany(timeout_ms=POLL_TIMEOUT_MS, max_records=10)
                    for partition, records in batches.items():
                        for record in records:
                            await self.handle(http, record)
                            # This record only (the position is past the whole fetch).
                            await consumer.commit({partition: record.offset + 1})
        finally:
            await consumer.stop()

    async def handle(self, http: httpx.AsyncClient, record: ConsumerRecord) -> None:
        try:
            alert = json.loads(record.value)
        except (TypeError, ValueError):
            log.error("alert_unreadable", offset=record.offset)
            return
        outcome = await deliver(http, self.settings, alert)
        log.info(
            "alert_delivery", alert_id=alert["alert_id"], status=outcome.status, attempts=outcome.attempts
        )
        await asyncio.to_thread(
            record_outcome, self.client, alert, outcome.status, outcome.attempts, outcome.last_error
        )


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
