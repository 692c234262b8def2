"""Issue 29, finding 10b: one site's alert rules delayed every site's alerts.

Delivery took one alert at a time, so 30 alerts of site B whose webhooks fail (each retried
with backoff until its attempts ran out) held site A's alert behind them for minutes. Now each
site's alerts have a queue and a worker of their own (alerts/delivery.py). The test runs the
real delivery process (`python -m alerts.delivery`) on real Kafka with a loopback receiver:
B's 30 alerts come first in the topic, their webhooks answer 500 or hang; A's alert comes last.
What A's owner sees: the alert arrives while B's first alert is still being retried — order of
arrival, not durations. Then, B's webhooks healed and the process restarted, every alert of
both sites is delivered (at-least-once holds with alerts finishing out of the topic's order).
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from uuid import uuid4

import pytest

from storage.alert_rules import DELIVERED, recent_alerts
from storage.client import connect
from tally.settings import Settings
from tally.topics import ensure_topics_sync
from tests.fixtures.clickhouse import Endpoint
from tests.fixtures.kafka import stop_process
from tests.fixtures.spark import isolated_settings, wait_until
from tests.fixtures.webhook import webhook_receiver
from tests.integration.test_alert_delivery import alert, publish, start_delivery

pytestmark = pytest.mark.integration

FAILING, HANGING = 25, 5  # site B's alerts: webhooks answering 500, webhooks never answering


def test_site_a_gets_its_alert_while_site_bs_failing_webhooks_are_still_retried(
    tmp_path: Path, kafka_bootstrap: str, clickhouse_endpoint: Endpoint
) -> None:
    settings: Settings = isolated_settings(
        tmp_path / "home",
        kafka_bootstrap,
        clickhouse_endpoint,
        alerts_topic=f"alerts-{uuid4().hex[:10]}",
        alert_webhook_private=True,  # the receiver is on loopback
        alert_webhook_timeout_s=3,
    )
    ensure_topics_sync(settings)
    tag = uuid4().hex[:8]
    site_a, site_b = f"a-{tag}.example.com", f"b-{tag}.example.com"
    with webhook_receiver() as receiver:
        b_alerts = [alert(f"b-{n}", f"{receiver.url}/b{n}", site_b) for n in range(FAILING + HANGING)]
        for n in range(FAILING):
            receiver.failures[f"/b{n}"] = [500] * settings.alert_delivery_attempts
        for n in range(FAILING, FAILING + HANGING):
            receiver.holds[f"/b{n}"] = 60  # the first POST hangs past the timeout
        a_alert = alert(f"a-{tag}", f"{receiver.url}/a", site_a)
        # One partition, B's alerts first: the order one-at-a-time delivery was stuck behind.
        asyncio.run(publish(settings, [*b_alerts, a_alert]))

        first = start_delivery(settings, tmp_path / "delivery.log")
        try:
            received = wait_until(lambda: receiver.received("/a"), len, 120)
            assert received, "site A's alert was not delivered while site B's were retried"
            arrived = received[0]
            b_first = [r for r in receiver.received("/b0") if r.at <= arrived.at]
            # B's first alert had not used its attempts up when A's was delivered.
            assert len(b_first) < settings.alert_delivery_attempts, len(b_first)
            shown = wait_until(
                lambda: recent_alerts(connect(settings), site_a),
                lambda found: [a.status for a in found] == [DELIVERED],
                60,
            )
            assert [a.alert_id for a in shown] == [f"a-{tag}"]
            assert len(recent_alerts(connect(settings), site_b)) < len(b_alerts)  # B's still going
            first.send_signal(signal.SIGKILL)
            first.wait(30)
        finally:
            stop_process(first)

        # B's webhooks healed; restarted, nothing is lost (B's unfinished alerts come again).
        receiver.failures.clear()
        receiver.holds.clear()
        second = start_delivery(settings, tmp_path / "delivery.log")
        try:
            delivered = wait_until(
                lambda: recent_alerts(connect(settings), site_b),
                lambda found: len(found) == len(b_alerts) and all(a.status == DELIVERED for a in found),
                180,
            )
        finally:
            stop_process(second)
    assert {a.alert_id for a in delivered} == {f"b-{n}" for n in range(FAILING + HANGING)}
    assert [a.status for a in recent_alerts(connect(settings), site_a)] == [DELIVERED]
