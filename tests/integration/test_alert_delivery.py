"""Alert delivery (alerts/delivery.py) against a real webhook receiver on 127.0.0.1:

* DNS rebinding: the webhook's name is resolved once, that address checked, and the POST sent
  to it — a name answering a refused address on its next lookup still reaches the checked
  address (with the name in the Host header), and a name answering a refused address at the
  check is refused with nothing sent. The name's answers come from a resolver this test
  installs (`socket.getaddrinfo`), the only stand-in here.
* At-least-once across a crash: the delivery process (`python -m alerts.delivery`, a real
  subprocess on real Kafka and the ClickHouse engine) is SIGKILLed while a POST is in flight;
  restarted, it delivers every alert, the interrupted one again with the same id.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from uuid import uuid4

import httpx
import pytest
from aiokafka import AIOKafkaProducer

from alerts.delivery import deliver
from storage.alert_rules import DELIVERED, REFUSED, recent_alerts
from storage.client import connect
from tally.settings import PROJECT_ROOT, Settings
from tally.topics import ensure_topics_sync
from tests.fixtures.clickhouse import Endpoint
from tests.fixtures.kafka import stop_process
from tests.fixtures.spark import isolated_settings, wait_until
from tests.fixtures.webhook import WebhookReceiver, webhook_receiver

pytestmark = pytest.mark.integration

NAME = "hooks.rebind.test"
REFUSED_ADDRESS = "169.254.169.254"  # link-local (cloud metadata): never a webhook


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with webhook_receiver() as running:
        yield running


def resolver(answers: list[list[str]]) -> tuple[Callable[..., list], list[list[str]]]:
    """A getaddrinfo answering NAME with `answers` in turn (the last one from then on) and every
    other name as the system does; and the answers it gave for NAME."""
    real, given = socket.getaddrinfo, []

    def getaddrinfo(host: object, port: object, *args: object, **kwargs: object) -> list:
        if host != NAME:
            return real(host, port, *args, **kwargs)  # type: ignore[arg-type]
        addresses = answers[min(len(given), len(answers) - 1)]
        given.append(addresses)
        return [
            (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (a, int(port))) for a in addresses
        ]  # type: ignore[call-overload]

    return getaddrinfo, given


def alert(alert_id: str, webhook_url: str, site: str = "delivery.example.com") -> dict[str, object]:
    """An alert as the alerts query publishes it (stream_jobs/alerts.py, Alert.message)."""
    return {
        "alert_id": alert_id,
        "rule_id": "rule-1",
        "site": site,
        "kind": "pageviews_above",
        "window_start": "2026-11-24T16:00:00+00:00",
        "observed": 12,
        "threshold": 5,
        "fired_at": "2026-11-24T16:01:00+00:00",
        "summary": "page views in 60 min above 5: 12",
        "webhook_url": webhook_url,
    }


def deliver_once(settings: Settings, sent: dict[str, object]) -> object:
    async def run() -> object:
        async with httpx.AsyncClient(timeout=5, follow_redirects=False, trust_env=False) as http:
            return await deliver(http, settings, sent)

    return asyncio.run(run())


def test_a_name_rebound_after_the_check_is_still_posted_to_the_address_checked(
    tmp_path: Path, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = receiver.url.rsplit(":", 1)[1]
    # 127.0.0.1 when checked (allowed: private webhooks on), the metadata address ever after.
    getaddrinfo, given = resolver([["127.0.0.1"], [REFUSED_ADDRESS]])
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    settings = Settings(home=tmp_path, alert_webhook_private=True, alert_delivery_attempts=2)

    outcome = deliver_once(settings, alert("rebound-1", f"http://{NAME}:{port}/hook?token=s3cret"))

    assert outcome.status == DELIVERED  # type: ignore[attr-defined]
    assert given == [["127.0.0.1"]]  # resolved once: the connection never asked again
    [request] = receiver.received("/hook")
    assert request.headers["host"] == f"{NAME}:{port}"
    assert request.headers["idempotency-key"] == "rebound-1"


@pytest.mark.parametrize("addresses", [[REFUSED_ADDRESS], ["127.0.0.1", REFUSED_ADDRESS], ["10.1.2.3"]])
def test_a_name_resolving_to_a_refused_address_is_refused_and_nothing_is_sent(
    tmp_path: Path, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch, addresses: list[str]
) -> None:
    getaddrinfo, given = resolver([addresses, ["127.0.0.1"]])
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    # Private webhooks off for the 10.x answer; on for the others (link-local is refused anyway).
    settings = Settings(home=tmp_path, alert_webhook_private=addresses != ["10.1.2.3"])
    port = receiver.url.rsplit(":", 1)[1]

    outcome = deliver_once(settings, alert("refused-1", f"http://{NAME}:{port}/hook"))

    assert outcome.status == REFUSED  # type: ignore[attr-defined]
    assert outcome.attempts == 0  # type: ignore[attr-defined]
    assert addresses[-1] in outcome.last_error  # type: ignore[attr-defined]
    assert given == [addresses]  # not asked again, so a later, allowed answer changes nothing
    assert receiver.requests == []


# --- SIGKILL mid-stream ---------------------------------------------------------------------


async def publish(settings: Settings, alerts: list[dict[str, object]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
    await producer.start()
    try:
        for sent in alerts:  # one key: one partition, in order (the stream keys by rule id)
            await producer.send_and_wait(settings.alerts_topic, json.dumps(sent).encode(), key=b"rule-1")
    finally:
        await producer.stop()


def start_delivery(settings: Settings, log: Path) -> subprocess.Popen:
    environment = os.environ | settings.environment()
    with log.open("ab") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "alerts.delivery"],
            cwd=PROJECT_ROOT,
            env=environment,
            stdout=output,
            stderr=subprocess.STDOUT,
        )


def test_a_delivery_killed_mid_post_delivers_every_alert_after_restart_with_the_same_ids(
    tmp_path: Path, kafka_bootstrap: str, clickhouse_endpoint: Endpoint, receiver: WebhookReceiver
) -> None:
    settings = isolated_settings(
        tmp_path / "home",
        kafka_bootstrap,
        clickhouse_endpoint,
        alerts_topic=f"alerts-{uuid4().hex[:10]}",
        alert_webhook_private=True,
        alert_webhook_timeout_s=120,  # the held POST waits for its answer until the kill
    )
    ensure_topics_sync(settings)
    site = f"kill-{uuid4().hex[:8]}.example.com"
    alerts = [alert(f"kill-{n}", f"{receiver.url}/a{n}", site) for n in range(1, 6)]
    receiver.holds["/a3"] = 60  # the third alert's first POST never gets its answer
    asyncio.run(publish(settings, alerts))
    log = tmp_path / "delivery.log"

    first = start_delivery(settings, log)
    try:
        wait_until(lambda: receiver.received("/a3"), len, 120)
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    finally:
        stop_process(first)
    assert first.returncode == -signal.SIGKILL
    assert [r.path for r in receiver.requests] == ["/a1", "/a2", "/a3"]

    second = start_delivery(settings, log)
    try:
        shown = wait_until(
            lambda: recent_alerts(connect(settings), site),
            lambda found: len(found) == 5 and all(a.status == DELIVERED for a in found),
            180,
        )
    finally:
        stop_process(second)

    ids = {n: [r.headers["idempotency-key"] for r in receiver.received(f"/a{n}")] for n in range(1, 6)}
    # Committed before the kill: once. In flight at the kill: again, with the same id. Then the rest.
    assert ids == {1: ["kill-1"], 2: ["kill-2"], 3: ["kill-3", "kill-3"], 4: ["kill-4"], 5: ["kill-5"]}
    assert all(r.body["alert_id"] == r.headers["idempotency-key"] for r in receiver.requests)
    assert {a.alert_id for a in shown} == {f"kill-{n}" for n in range(1, 6)}
