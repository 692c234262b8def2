"""`tally up --cluster` under load, with instances of its real engines broken on purpose:
the partition leader among three Kafka brokers, one archiver of the consumer group, one Spark
worker of two. Traffic goes to both collectors from the load generator, with its ground
truth; afterwards the archive equals that truth exactly and the Spark-derived counts equal
the archive."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from loadgen.__main__ import LoadPlan
from loadgen.ground_truth import GroundTruth
from loadgen.runner import RunSummary
from loadgen.traffic import TrafficMix
from ops.local import supervisor
from ops.local.cluster import layout
from storage.client import connect
from tally.settings import Settings
from tally.topics import topic_config
from tests.fault.scenario import Traffic, component_pid, healthy, sigkill_tree
from tests.fixtures.archive import archived
from tests.fixtures.cluster_stack import BrokerNetwork, can_make_networks, partition_leaders
from tests.fixtures.local_stack import LocalStack, eventually

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

RATE_PER_COLLECTOR = 15


@dataclass
class BothCollectors:
    """Page views sent to each collector of the cluster at once, with their ground truth."""

    runs: list[Traffic] = field(default_factory=list)

    @classmethod
    def start(cls, stack: LocalStack, site: str, duration_s: float, seed: int) -> BothCollectors:
        settings = stack.settings
        traffic = cls()
        for n, port in enumerate(layout(settings).collector_ports(settings)):
            plan = LoadPlan(
                f"http://127.0.0.1:{port}",
                RATE_PER_COLLECTOR,
                duration_s,
                [site],
                0,
                TrafficMix(bot_fraction=0.0),
                0,
                seed * 10 + n,
                settings.resolved_ingest_key(),
            )
            run = Traffic(plan)
            run._thread.start()
            traffic.runs.append(run)
        return traffic

    def finish(self) -> tuple[RunSummary, GroundTruth]:
        summary, truth = RunSummary(), GroundTruth()
        for run in self.runs:
            one_summary, one_truth = run.finish()
            summary.merge(one_summary)
            truth.merge(one_truth)
        return summary, truth


def new_site(stack: LocalStack, name: str) -> str:
    site = f"{name}.cluster.example"
    added = stack.tally("sites", "add", site)
    assert added.returncode == 0, added.stdout + added.stderr
    time.sleep(3)  # both collectors refresh their copy of the registry
    return site


def archived_by_path(settings: Settings, site: str) -> Counter[str]:
    rows = (
        connect(settings)
        .query(
            "SELECT path, count() FROM events WHERE site = {site:String} GROUP BY path",
            parameters={"site": site},
        )
        .result_rows
    )
    return Counter(dict(rows))


def assert_archive_equals_truth(settings: Settings, site: str, truth: GroundTruth) -> None:
    """Every accepted event archived once, nothing else: per path, exactly the ground truth."""
    accepted = len(truth.counted())
    eventually(lambda: archived(settings, site)[0] >= accepted, "every accepted event archived", 180)
    time.sleep(3)  # anything archived twice would land by now
    count, unique = archived(settings, site)
    assert count == unique == accepted
    expected = Counter({path: n for (_, path), n in truth.pageviews_by_site_path().items()})
    assert archived_by_path(settings, site) == expected


def assert_no_accepted_event_lost(settings: Settings, site: str, truth: GroundTruth, sent: int) -> None:
    """Every 202 archived once; events answered 503 may be there too (the log may have taken
    them after all: DESIGN allows a 503 for a written event, never a 202 for an unwritten one)."""
    accepted = len(truth.counted())
    eventually(lambda: archived(settings, site)[0] >= accepted, "every accepted event archived", 180)
    time.sleep(3)
    count, unique = archived(settings, site)
    assert count == unique
    assert accepted <= count <= sent
    in_archive = archived_by_path(settings, site)
    missing = {
        path: n - in_archive[path]
        for (_, path), n in truth.pageviews_by_site_path().items()
        if in_archive[path] < n
    }
    assert missing == {}


def minutes_raw_and_agg(settings: Settings, site: str) -> tuple[dict, dict]:
    """Page views per minute, from the archive (raw) and from Spark's minute rollup (agg)."""
    client = connect(settings)
    raw = dict(
        client.query(
            "SELECT toStartOfMinute(ts) AS t, count() FROM events WHERE site = {site:String} "
            "AND name = 'pageview' GROUP BY t",
            parameters={"site": site},
        ).result_rows
    )
    agg = dict(
        client.query(
            "SELECT bucket AS t, sum(pageviews) AS n FROM rollup_minute "
            "WHERE site = {site:String} AND dimension = '' GROUP BY t HAVING n != 0",
            parameters={"site": site},
        ).result_rows
    )
    return raw, agg


def test_status_lists_every_instance_and_pageviews_is_replicated(cluster_stack: LocalStack) -> None:
    stack = cluster_stack
    statuses = json.loads(stack.tally("status", "--json").stdout)
    assert [s["name"] for s in statuses] == [
        *("kafka-1", "kafka-2", "kafka-3", "clickhouse", "spark-master", "spark-worker-1"),
        *("spark-worker-2", "archiver-1", "archiver-2", "spark", "alerts", "collector-1", "collector-2"),
        "dashboard",
    ]
    assert all(s["healthy"] for s in statuses), statuses
    assert len({s["pid"] for s in statuses}) == len(statuses)
    leaders = partition_leaders(stack.settings.kafka_bootstrap, "pageviews")
    assert len(leaders) == stack.settings.pageviews_partitions
    assert all(isr == [1, 2, 3] for _, isr in leaders.values()), leaders
    config = topic_config_sync(stack.settings, "pageviews")
    assert config["min.insync.replicas"] == "2"


def topic_config_sync(settings: Settings, topic: str) -> dict[str, str]:
    return asyncio.run(topic_config(settings, topic))


def test_killed_partition_leader_costs_no_accepted_event(cluster_stack: LocalStack) -> None:
    stack, settings = cluster_stack, cluster_stack.settings
    site = new_site(stack, "leader-kill")
    traffic = BothCollectors.start(stack, site, duration_s=40, seed=21)
    time.sleep(10)
    leader, _ = eventually(
        lambda: partition_leaders(settings.kafka_bootstrap, "pageviews").get(0), "partition 0's leader", 30
    )
    sigkill_tree(component_pid(stack, f"kafka-{leader}"))
    killed_at = datetime.now(UTC)
    # The controller fences the dead broker; another in-sync replica leads partition 0.
    eventually(
        lambda: (
            partition_leaders(settings.kafka_bootstrap, "pageviews").get(0, (leader, []))[0]
            not in (leader, -1)
        ),
        "a new leader for partition 0",
        60,
    )
    summary, truth = traffic.finish()
    # acks=all is met by the two replicas left. The collectors never answer 202 for an event
    # not written; while the controllers fence the dead broker (4 s, more on a loaded
    # machine), a write can wait past the 10 s send timeout and is answered 503.
    assert set(summary.statuses) <= {202, 503, "ReadTimeout"}, summary.statuses
    # ...and they keep answering 202: most events, and events sent well after the kill.
    assert summary.accepted > summary.sent * 0.75, summary.statuses
    assert any(e.sent_at > killed_at + timedelta(seconds=15) for e in truth.counted())
    if summary.accepted == summary.sent:
        assert_archive_equals_truth(settings, site, truth)
    else:
        assert_no_accepted_event_lost(settings, site, truth, sent=summary.sent)
    # supervisord restarted the broker; it caught up and is in sync again everywhere.
    eventually(
        lambda: in_sync_everywhere(settings),
        "the restarted broker back in every ISR",
        120,
    )
    assert eventually(lambda: healthy(stack), "every instance healthy", 120)


def in_sync_everywhere(settings: Settings) -> bool:
    leaders = partition_leaders(settings.kafka_bootstrap, "pageviews")
    return bool(leaders) and all(isr == [1, 2, 3] for _, isr in leaders.values())


def test_killed_archiver_leaves_its_partitions_to_the_other(cluster_stack: LocalStack) -> None:
    stack, settings = cluster_stack, cluster_stack.settings
    rpc = supervisor.rpc(settings)
    site = new_site(stack, "archiver-kill")
    traffic = BothCollectors.start(stack, site, duration_s=30, seed=22)
    time.sleep(8)
    before = component_pid(stack, "archiver-1")
    sigkill_tree(before)
    # supervisord restarts it; keep it stopped, so archiver-2 alone holds the group's
    # partitions for the rest of the run.
    eventually(lambda: component_pid(stack, "archiver-1") not in (None, before), "archiver-1 restarted", 60)
    rpc.supervisor.stopProcess("archiver-1", True)
    try:
        summary, truth = traffic.finish()
        assert summary.accepted == summary.sent, summary.statuses
        assert_archive_equals_truth(settings, site, truth)
    finally:
        rpc.supervisor.startProcess("archiver-1", True)
    assert eventually(lambda: healthy(stack), "every instance healthy", 120)


def test_killed_spark_worker_leaves_the_stream_jobs_to_the_other(cluster_stack: LocalStack) -> None:
    stack, settings = cluster_stack, cluster_stack.settings
    driver = component_pid(stack, "spark")
    site = new_site(stack, "worker-kill")
    traffic = BothCollectors.start(stack, site, duration_s=40, seed=23)
    time.sleep(15)
    # The worker and its executor at once, in the middle of the 1 s micro-batches.
    sigkill_tree(component_pid(stack, "spark-worker-1"))
    summary, truth = traffic.finish()
    assert summary.accepted == summary.sent, summary.statuses
    assert_archive_equals_truth(settings, site, truth)

    def agree() -> dict:
        raw, agg = minutes_raw_and_agg(settings, site)
        return raw if raw and raw == agg else {}

    per_minute = eventually(agree, "Spark's page views per minute equal the archive's", 180)
    assert sum(per_minute.values()) == len(truth.counted())
    # The driver went on (its tasks moved to the other worker's executor): never restarted.
    assert component_pid(stack, "spark") == driver
    assert eventually(lambda: healthy(stack), "every instance healthy", 120)


def test_cut_off_broker_rejoins_and_catches_up(
    cluster_stack: LocalStack, broker_network: BrokerNetwork | None
) -> None:
    if broker_network is None:
        pytest.skip(f"brokers run without namespaces here: {can_make_networks()}")
    stack, settings = cluster_stack, cluster_stack.settings
    site = new_site(stack, "cut-off")
    traffic = BothCollectors.start(stack, site, duration_s=45, seed=24)
    time.sleep(8)
    leader, _ = eventually(
        lambda: partition_leaders(settings.kafka_bootstrap, "pageviews").get(0), "partition 0's leader", 30
    )
    process = component_pid(stack, f"kafka-{leader}")
    broker_network.cut_off(leader)
    try:
        # Alive but unreachable: fenced by the controllers, out of every ISR, while the
        # other two take the writes it misses.
        eventually(lambda: out_of_every_isr(settings, leader), f"kafka-{leader} out of every ISR", 60)
        time.sleep(5)
    finally:
        broker_network.reconnect(leader)
    summary, truth = traffic.finish()
    # It rejoined as the same process (nobody restarted it) and caught up: in sync everywhere.
    eventually(lambda: in_sync_everywhere(settings), f"kafka-{leader} back in every ISR", 180)
    assert component_pid(stack, f"kafka-{leader}") == process
    # Unlike a dead broker (its connections refused at once), a cut-off leader swallows the
    # requests in flight to it until the collector's 10 s send timeout: those events are
    # answered 503 (never 202 unwritten), and a retry would be taken by the new leader.
    assert set(summary.statuses) <= {202, 503, "ReadTimeout"}, summary.statuses
    assert_no_accepted_event_lost(settings, site, truth, sent=summary.sent)
    assert eventually(lambda: healthy(stack), "every instance healthy", 120)


def out_of_every_isr(settings: Settings, broker: int) -> bool:
    leaders = partition_leaders(settings.kafka_bootstrap, "pageviews")
    return bool(leaders) and all(broker not in isr and lead != broker for lead, isr in leaders.values())
