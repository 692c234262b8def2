"""Streaming alerts end to end: events on real Kafka → the alerts query on real Spark (counts
and rules in the ClickHouse engine) → the `alerts` topic → the delivery process → a webhook
receiver on 127.0.0.1.

Each test has its own topics, database, sites and rules (tests/fixtures/spark.py), and runs
the delivery loop of alerts/delivery.py in a thread of its own.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from uuid import uuid4

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from alerts.delivery import Delivery
from storage.alert_backtest import backtest
from storage.alert_rules import DELIVERED, AlertRule, add_rule, make_rule, recent_alerts
from storage.client import connect
from storage.goals import add_goal, make_goal
from storage.sites import add_site
from stream_jobs.alerts import QUERY_NAME
from stream_jobs.queries import start_queries
from tally.clock import utc_now
from tally.settings import Settings
from tally.topics import ensure_topics_sync
from tests.fixtures.clickhouse import Endpoint
from tests.fixtures.events import archive_rows, page_view
from tests.fixtures.spark import isolated_settings, produce, read_topic, site_names, wait_for, wait_until
from tests.fixtures.webhook import WebhookReceiver, webhook_receiver

pytestmark = pytest.mark.integration


@pytest.fixture
def alert_settings(tmp_path: Path, kafka_bootstrap: str, clickhouse_endpoint: Endpoint) -> Settings:
    settings = isolated_settings(
        tmp_path / "home",
        kafka_bootstrap,
        clickhouse_endpoint,
        alerts_topic=f"alerts-{uuid4().hex[:10]}",
        # The receiver listens on loopback; quick retries keep the test short.
        alert_webhook_private=True,
        alert_retry_base_s=0.2,
    )
    ensure_topics_sync(settings)
    return settings


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with webhook_receiver() as running:
        yield running


@contextmanager
def running_delivery(settings: Settings) -> Iterator[Delivery]:
    """The delivery process's loop, on an event loop in a thread, stopped on the way out."""
    loop = asyncio.new_event_loop()
    delivery = Delivery(settings, connect(settings))
    thread = threading.Thread(target=loop.run_until_complete, args=(delivery.run(),), daemon=True)
    thread.start()
    try:
        yield delivery
    finally:
        loop.call_soon_threadsafe(delivery.stop)
        thread.join(30)
        loop.close()


def new_site(settings: Settings) -> str:
    [site] = site_names(1)
    add_site(connect(settings), site)
    return site


def new_rule(settings: Settings, **fields: object) -> AlertRule:
    # The receiver is on 127.0.0.1, which the settings allow (TALLY_ALERT_WEBHOOK_PRIVATE).
    return add_rule(connect(settings), make_rule(**fields), private_webhooks=settings.alert_webhook_private)


def alerts_published(settings: Settings) -> list[dict]:
    return [json.loads(value) for _key, value in read_topic(settings, settings.alerts_topic) if value]


def test_pageviews_above_a_threshold_reach_the_webhook_once_and_a_rule_below_it_stays_quiet(
    spark: SparkSession,
    alert_settings: Settings,
    receiver: WebhookReceiver,
    running_queries: list[StreamingQuery],
) -> None:
    site = new_site(alert_settings)
    fired = new_rule(
        alert_settings,
        site=site,
        kind="pageviews_above",
        window_minutes=60,
        threshold=5,
        webhook_url=f"{receiver.url}/busy",
    )
    quiet = new_rule(
        alert_settings,
        site=site,
        kind="pageviews_above",
        window_minutes=60,
        threshold=1000,
        webhook_url=f"{receiver.url}/quiet",
    )
    running_queries.extend(start_queries(spark, alert_settings, [QUERY_NAME]))
    now = utc_now()
    produce(alert_settings, [page_view(site, f"v{i}", now, path="/") for i in range(12)])

    with running_delivery(alert_settings):
        [request] = wait_until(lambda: receiver.received("/busy"), len)
        shown = wait_until(
            lambda: recent_alerts(connect(alert_settings), site), lambda a: a and a[0].status == DELIVERED
        )

    body = request.body
    assert body["rule_id"] == fired.rule_id
    assert body["site"] == site
    assert body["kind"] == "pageviews_above"
    assert 5 < body["observed"] <= 12
    assert body["threshold"] == 5
    assert "webhook_url" not in body
    assert request.headers["idempotency-key"] == body["alert_id"]
    # The window is the current hour (aligned windows of 60 minutes).
    assert datetime.fromisoformat(body["window_start"]) == now.replace(minute=0, second=0, microsecond=0)
    assert [alert.alert_id for alert in shown] == [body["alert_id"]]
    assert shown[0].rule_id == fired.rule_id and shown[0].attempts == 1
    # Evaluated in the same batches as the rule that fired: never above its threshold.
    assert [a["rule_id"] for a in alerts_published(alert_settings)] == [fired.rule_id]
    assert receiver.received("/quiet") == []
    assert quiet.rule_id not in {a.rule_id for a in shown}


def test_a_webhook_failing_twice_gets_the_alert_a_third_time_with_the_same_id(
    spark: SparkSession,
    alert_settings: Settings,
    receiver: WebhookReceiver,
    running_queries: list[StreamingQuery],
) -> None:
    site = new_site(alert_settings)
    receiver.failures["/errors"] = [500, 503]
    rule = new_rule(
        alert_settings,
        site=site,
        kind="event_rate_above",
        event_name="Error",
        threshold=2,
        webhook_url=f"{receiver.url}/errors",
    )
    pages = new_rule(
        alert_settings,
        site=site,
        kind="event_rate_above",
        page_pattern="/500*",
        threshold=2,
        webhook_url=f"{receiver.url}/pages",
    )
    running_queries.extend(start_queries(spark, alert_settings, [QUERY_NAME]))
    now = utc_now()
    errors = [page_view(site, f"v{i}", now, name="Error", path="/app") for i in range(4)]
    error_pages = [page_view(site, f"p{i}", now, path=f"/500/{i}") for i in range(3)]
    produce(alert_settings, errors + error_pages)

    with running_delivery(alert_settings):
        [page_alert] = wait_until(lambda: receiver.received("/pages"), len)
        requests = wait_until(lambda: receiver.received("/errors"), lambda seen: len(seen) >= 3)
        shown = wait_until(
            lambda: recent_alerts(connect(alert_settings), site),
            lambda found: len(found) == 2 and all(a.status == DELIVERED for a in found),
        )

    assert len(requests) == 3
    ids = {request.headers["idempotency-key"] for request in requests}
    assert ids == {request.body["alert_id"] for request in requests}
    assert len(ids) == 1
    assert requests[0].body["rule_id"] == rule.rule_id
    assert requests[0].body["window_start"] == now.replace(second=0, microsecond=0).isoformat()
    assert {(alert.rule_id, alert.status, alert.attempts) for alert in shown} == {
        (rule.rule_id, DELIVERED, 3),
        (pages.rule_id, DELIVERED, 1),
    }
    # Page views of a path pattern count as events of that rule (3 > 2 in the minute).
    assert page_alert.body["rule_id"] == pages.rule_id
    assert page_alert.body["observed"] == 3


def test_a_goal_not_seen_for_its_minutes_fires_with_no_traffic_at_all(
    spark: SparkSession,
    alert_settings: Settings,
    receiver: WebhookReceiver,
    running_queries: list[StreamingQuery],
) -> None:
    site = new_site(alert_settings)
    add_goal(connect(alert_settings), make_goal(site, "Signup"))
    # Created two minutes ago: absent for one minute already.
    created = utc_now() - timedelta(minutes=2)
    rule = new_rule(
        alert_settings,
        site=site,
        kind="goal_absent",
        goal="Signup",
        window_minutes=1,
        webhook_url=f"{receiver.url}/absent",
        created_at=created,
    )
    running_queries.extend(start_queries(spark, alert_settings, [QUERY_NAME]))

    with running_delivery(alert_settings):
        [request] = wait_until(lambda: receiver.received("/absent"), len)

    assert request.body["rule_id"] == rule.rule_id
    assert request.body["kind"] == "goal_absent"
    assert datetime.fromisoformat(request.body["window_start"]) == rule.created_at
    assert request.body["observed"] >= 2  # minutes absent
    # Fired once: every later trigger finds the same absence already recorded.
    assert len(alerts_published(alert_settings)) == 1


def counted(settings: Settings, site: str) -> dict[tuple[datetime, str, str], int]:
    """The alerts query's counts per (minute, name, path) of a site."""
    rows = (
        connect(settings)
        .query(
            "SELECT bucket, name, path, sum(events) FROM alert_counts_minute WHERE site = {site:String} "
            "GROUP BY bucket, name, path",
            parameters={"site": site},
        )
        .result_rows
    )
    return {(bucket.replace(tzinfo=None), name, path): int(n) for bucket, name, path, n in rows}


def test_a_burst_above_k_times_the_trailing_mean_fires_and_a_larger_k_stays_quiet(
    spark: SparkSession,
    alert_settings: Settings,
    receiver: WebhookReceiver,
    running_queries: list[StreamingQuery],
) -> None:
    site = new_site(alert_settings)
    now = utc_now()
    hour = now.replace(minute=0, second=0, microsecond=0)
    # Two page views in each of the 3 hours before this one: a trailing mean of 2 an hour.
    history = [
        page_view(site, f"h{hours}-{i}", hour - timedelta(hours=hours, minutes=-10 * i), path=f"/p{i}")
        for hours in (1, 2, 3)
        for i in range(2)
    ]
    burst = [page_view(site, f"b{i}", now, path="/launch") for i in range(10)]
    hook = f"{receiver.url}/burst"
    fired = new_rule(
        alert_settings,
        site=site,
        kind="pageviews_above",
        window_minutes=60,
        factor=3,
        baseline_windows=3,
        webhook_url=hook,
    )
    new_rule(
        alert_settings,
        site=site,
        kind="pageviews_above",
        window_minutes=60,
        factor=10,
        baseline_windows=3,
        webhook_url=f"{receiver.url}/never",
    )
    running_queries.extend(start_queries(spark, alert_settings, [QUERY_NAME]))
    produce(alert_settings, history)
    expected_history = dict(
        Counter((e.ts.replace(second=0, microsecond=0, tzinfo=None), e.name, e.path) for e in history)
    )
    assert wait_for(lambda: counted(alert_settings, site), expected_history) == expected_history
    produce(alert_settings, burst)

    with running_delivery(alert_settings):
        [request] = wait_until(lambda: receiver.received("/burst"), len)

    assert request.body["rule_id"] == fired.rule_id
    assert request.body["threshold"] == 6  # 3 x the mean of 2
    assert 6 < request.body["observed"] <= 10
    # The counts the rules read are exactly the events produced, per minute, name and path.
    expected = dict(
        Counter((e.ts.replace(second=0, microsecond=0, tzinfo=None), e.name, e.path) for e in history + burst)
    )
    assert wait_for(lambda: counted(alert_settings, site), expected) == expected
    assert [a["rule_id"] for a in alerts_published(alert_settings)] == [fired.rule_id]
    assert receiver.received("/never") == []


def test_the_backtest_fires_for_the_windows_the_stream_fired_for_on_the_same_events(
    spark: SparkSession,
    alert_settings: Settings,
    receiver: WebhookReceiver,
    running_queries: list[StreamingQuery],
) -> None:
    site = new_site(alert_settings)
    fields = {"site": site, "webhook_url": f"{receiver.url}/same"}
    rules = [
        new_rule(alert_settings, kind="pageviews_above", window_minutes=60, threshold=5, **fields),
        new_rule(alert_settings, kind="event_rate_above", event_name="Error", threshold=2, **fields),
        new_rule(alert_settings, kind="pageviews_above", window_minutes=60, threshold=1000, **fields),
    ]
    running_queries.extend(start_queries(spark, alert_settings, [QUERY_NAME]))
    now = utc_now()
    events = [page_view(site, f"v{i}", now, path="/") for i in range(12)]
    events += [page_view(site, f"e{i}", now, name="Error", path="/app") for i in range(4)]
    produce(alert_settings, events)
    published = wait_until(lambda: alerts_published(alert_settings), lambda found: len(found) >= 2)
    # The same events in the archive (as the archiver writes them), then each rule backtested.
    rows, columns = archive_rows(events)
    connect(alert_settings).insert("events", rows, column_names=columns)

    streamed = {(a["rule_id"], datetime.fromisoformat(a["window_start"])) for a in published}
    backtested = {
        (rule.rule_id, firing.window_start)
        for rule in rules
        for firing in backtest(connect(alert_settings), rule, now - timedelta(days=1), utc_now()).firings
    }
    assert backtested == streamed
    assert {rule_id for rule_id, _ in streamed} == {rules[0].rule_id, rules[1].rule_id}
