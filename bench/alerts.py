"""`tally bench --only alerts`: alert latency on the local stack.

Rounds of one alert each: a rule `event_rate_above` (a custom event of its own, above 1 a
minute) with a webhook on a receiver this process runs on 127.0.0.1; two such events POSTed
to the collector; the second one's 202 ("event accepted") starts the clock. Measured per
round: accepted → the alert's record on the Kafka topic `alerts` (the record's timestamp,
stamped by the Spark driver's producer as it sends), and accepted → the webhook received it
(the delivery process, alerts/delivery.py). The rules are added before the first round and
the rounds wait out the alerts query's rule refresh (stream_jobs/alerts.py).

A warm-up round comes first, reported apart: on a stack just started, the Spark application's
first micro-batches take seconds each (12.5 s measured for the first), and its first alert
pays for the Kafka producer Spark creates on first use.

The stack's delivery process must be allowed to reach loopback: start the stack (or this
bench) with TALLY_ALERT_WEBHOOK_PRIVATE=1.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
from aiokafka import AIOKafkaConsumer

from loadgen.runner import percentile
from storage.alert_rules import add_rule, make_rule
from storage.client import connect
from storage.sites import add_site
from stream_jobs.alerts import RULES_REFRESH_S
from tally.settings import Settings

ALERTS_SITE = "alerts.bench.example.com"
ROUND_TIMEOUT_S = 60.0
HEADERS = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64)", "Content-Type": "text/plain"}


@contextmanager
def webhook_receiver() -> Iterator[tuple[str, dict[str, float]]]:
    """A receiver on a free loopback port: (its URL, alert_id → time.time() received)."""
    received: dict[str, float] = {}

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            received.setdefault(body["alert_id"], time.time())
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    finally:
        server.shutdown()


def bench_alerts(settings: Settings, rounds: int = 10) -> dict[str, object]:
    client = connect(settings)
    add_site(client, ALERTS_SITE)
    run = uuid.uuid4().hex[:6]
    names = [f"BenchAlert-{run}-{i}" for i in range(rounds + 1)]  # the first: warm-up
    with webhook_receiver() as (url, received):
        rules = {
            add_rule(
                client,
                make_rule(
                    site=ALERTS_SITE, kind="event_rate_above", event_name=name, threshold=1, webhook_url=url
                ),
                private_webhooks=settings.alert_webhook_private,  # its receiver is on loopback
            ).rule_id: name
            for name in names
        }
        time.sleep(RULES_REFRESH_S + 3)  # the query sees the new rules; the collector the site
        accepted: dict[str, float] = {}  # rule_id → when its triggering event was accepted
        with httpx.Client(timeout=10) as http:
            for rule_id, name in rules.items():
                for index in range(2):
                    body = {"d": ALERTS_SITE, "n": name, "u": f"https://{ALERTS_SITE}/"}
                    headers = HEADERS | {"X-Forwarded-For": f"10.77.{index}.{len(accepted) + 1}"}
                    answer = http.post(
                        f"http://127.0.0.1:{settings.collector_port}/api/event", json=body, headers=headers
                    )
                    answer.raise_for_status()
                accepted[rule_id] = time.time()
                deadline = time.monotonic() + ROUND_TIMEOUT_S
                while len(received) < len(accepted) and time.monotonic() < deadline:
                    time.sleep(0.05)
            published = asyncio.run(alert_records(settings, set(rules)))
    warmup, *measured = list(rules)
    to_topic, to_webhook = latencies(measured, accepted, published, received)
    warm_topic, warm_webhook = latencies([warmup], accepted, published, received)
    return {
        "warmup_to_topic_s": round(warm_topic[0], 3) if warm_topic else None,
        "warmup_to_webhook_s": round(warm_webhook[0], 3) if warm_webhook else None,
        "rounds": rounds,
        "on_topic": len(to_topic),
        "delivered": len(to_webhook),
        "to_topic_p50_s": round(percentile(to_topic, 0.5), 3) if to_topic else None,
        "to_topic_max_s": round(max(to_topic), 3) if to_topic else None,
        "to_webhook_p50_s": round(percentile(to_webhook, 0.5), 3) if to_webhook else None,
        "to_webhook_max_s": round(max(to_webhook), 3) if to_webhook else None,
        # Every measured round's figure, sorted.
        "to_topic_s": [round(value, 3) for value in to_topic],
        "to_webhook_s": [round(value, 3) for value in to_webhook],
    }


def latencies(
    rule_ids: list[str], accepted: dict[str, float], published: dict[str, dict], received: dict[str, float]
) -> tuple[list[float], list[float]]:
    """Sorted seconds from each rule's triggering event accepted to its alert on the topic, and
    to its alert at the webhook."""
    to_topic = sorted(published[r]["at"] - accepted[r] for r in rule_ids if r in published and r in accepted)
    to_webhook = sorted(
        received[published[r]["alert_id"]] - accepted[r]
        for r in rule_ids
        if r in published and r in accepted and published[r]["alert_id"] in received
    )
    return to_topic, to_webhook


async def alert_records(settings: Settings, rule_ids: set[str]) -> dict[str, dict]:
    """The first alert of each rule on the `alerts` topic: its id and the record's timestamp."""
    consumer = AIOKafkaConsumer(
        settings.alerts_topic, bootstrap_servers=settings.kafka_bootstrap, auto_offset_reset="earliest"
    )
    await consumer.start()
    found: dict[str, dict] = {}
    try:
        while batches := await consumer.getmany(timeout_ms=2000):
            for records in batches.values():
                for record in records:
                    alert = json.loads(record.value)
                    if alert["rule_id"] in rule_ids and alert["rule_id"] not in found:
                        found[alert["rule_id"]] = {
                            "alert_id": alert["alert_id"],
                            "at": record.timestamp / 1000,
                        }
    finally:
        await consumer.stop()
    return found
