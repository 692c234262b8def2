"""`tally up --cluster` under load, with instances of its real engines broken on purpose:
a partition leader among three Kafka brokers, the active KRaft controller, one archiver of the
consumer group, one Spark worker of two. Traffic goes to both collectors from the load
generator, with its ground truth; afterwards the archive equals that truth exactly, the
Spark-derived counts equal the archive, and `tally replay` and `tally verify` on the cluster
agree with it."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest
from aiokafka.errors import KafkaError

from archiver.log import log_ranges
from loadgen.__main__ import LoadPlan
from loadgen.ground_truth import GroundTruth
from loadgen.runner import RunSummary
from loadgen.traffic import TrafficMix
from ops.local import supervisor
from ops.local.cluster import layout
from storage.client import connect
from tally.settings import Settings
from tally.topics import topic_config
from tests.fault.scenario import (
    Traffic,
    component_pid,
    healthy,
    inject,
    kill_and_wait_for_recovery,
    sigkill_tree,
    verify_clean,
)
from tests.fixtures.archive import archived, archived_by_path
from tests.fixtures.cluster_stack import (
    BrokerNetwork,
    active_controller,
    can_make_networks,
    partition_leaders,
)
from tests.fixtures.local_stack import LocalStack, eventually
from tests.integration.test_archive_audit import archive_ends

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

RATE_PER_COLLECTOR = 15
#: Traffic before each failover and after it (the traffic also runs throughout it): 60 page
#: views each side, and more before, while the fault looks up its victim (`tally status`).
AROUND_THE_FAULT_S = 2


@dataclass
class BothCollectors:
    """Page views sent to each collector of the cluster at once, with their ground truth: for
    `duration_s`, or (0) until `finish()`."""

    runs: list[Traffic] = field(default_factory=list)

    @classmethod
    def start(cls, stack: LocalStack, site: str, seed: int, duration_s: float = 0) -> BothCollectors:
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
    # Both collectors accept it from the moment `sites add` returns: an event for a site their
    # copy of the registry does not know waits for a re-read (collector/known_sites.py).
    assert added.returncode == 0, added.stdout + added.stderr
    return site


def assert_archive_equals_truth(settings: Settings, site: str, truth: GroundTruth) -> None:
    """Every accepted event archived once, nothing else: per path, exactly the ground truth."""
    accepted = len(truth.counted())
    eventually(lambda: archived(settings, site)[0] >= accepted, "every accepted event archived", 180)
    # The traffic is over: once every offset of the log is accounted for in the archive,
    # nothing more can land in it, an event archived twice included.
    eventually(lambda: archive_holds_the_whole_log(settings), "every offset of the log archived", 60)
    count, unique = archived(settings, site)
    assert count == unique == accepted
    expected = Counter({path: n for (_, path), n in truth.pageviews_by_site_path().items()})
    assert archived_by_path(settings, site) == expected


def archive_holds_the_whole_log(settings: Settings) -> bool:
    """Every partition of `pageviews` accounted for in the archive up to its last offset (the
    archiver takes each partition's offsets in order, without a gap: archiver/consumer.py)."""
    try:
        ends = {partition: end for partition, (_, end) in asyncio.run(log_ranges(settings)).items()}
    except KafkaError:  # a broker restarting: ask again
        return False
    reached = archive_ends(settings)
    return all(reached.get(partition, 0) >= end for partition, end in ends.items())


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
        *("spark-worker-2", "archiver-1", "archiver-2", "spark", "alerts", "jobs", "collector-1"),
        *("collector-2", "dashboard"),
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


def test_killed_partition_leader_costs_latency_not_errors(cluster_stack: LocalStack) -> None:
    """A broker that leads partitions (not the active controller: see the next test) dies.
    Until the controller fences it (broker.session.timeout.ms) the metadata still names it
    leader, and the partitions it follows wait for it under acks=all; the producer retries
    (idempotent, so never twice) and the collector waits up to 30 s on a cluster: every
    event gets its 202, later than usual."""
    stack, settings = cluster_stack, cluster_stack.settings
    site = new_site(stack, "leader-kill")

    def kill_a_leader() -> None:
        partition, leader = eventually(
            lambda: led_by_a_plain_broker(settings), "a leader not the controller", 60
        )
        sigkill_tree(component_pid(stack, f"kafka-{leader}"))
        # The controller fences the dead broker; another in-sync replica leads its partition.
        eventually(
            lambda: (
                partition_leaders(settings.kafka_bootstrap, "pageviews").get(partition, (leader, []))[0]
                not in (leader, -1)
            ),
            f"a new leader for partition {partition}",
            60,
        )

    traffic = BothCollectors.start(stack, site, seed=21)
    inject([kill_a_leader], AROUND_THE_FAULT_S)  # traffic before the kill, through the failover, and after it
    summary, truth = traffic.finish()
    # acks=all is met by the two replicas left: the failover costs latency, not one 503.
    assert summary.statuses == Counter({202: summary.sent}), summary.statuses
    assert_archive_equals_truth(settings, site, truth)
    # supervisord restarted the broker; it caught up and is in sync again everywhere.
    eventually(lambda: in_sync_everywhere(settings), "the restarted broker back in every ISR", 120)
    assert eventually(lambda: healthy(stack), "every instance healthy", 120)


def led_by_a_plain_broker(settings: Settings) -> tuple[int, int] | None:
    """A partition of `pageviews` and its leader, a broker that is not the active controller
    (on a fresh cluster the three brokers lead one partition each)."""
    controller = active_controller(settings)
    leaders = partition_leaders(settings.kafka_bootstrap, "pageviews")
    return next(((p, lead) for p, (lead, _) in sorted(leaders.items()) if lead not in (controller, -1)), None)


def test_killed_active_controller_costs_latency_not_errors(cluster_stack: LocalStack) -> None:
    """The active KRaft controller (also a broker leading partitions) dies: the two other
    voters elect a new one (controller.quorum.fetch.timeout.ms, then a vote), which fences the
    dead broker; only then do its partitions get new leaders. The longest failover there is
    (~10 s at load 16 on 2 cores), still inside the collectors' 30 s wait."""
    stack, settings = cluster_stack, cluster_stack.settings
    site = new_site(stack, "controller-kill")

    def kill_the_controller() -> None:
        controller = active_controller(settings)
        sigkill_tree(component_pid(stack, f"kafka-{controller}"))
        eventually(lambda: active_controller(settings) != controller, "a newly elected active controller", 60)

    traffic = BothCollectors.start(stack, site, seed=25)
    inject([kill_the_controller], AROUND_THE_FAULT_S)
    summary, truth = traffic.finish()
    assert summary.statuses == Counter({202: summary.sent}), summary.statuses
    assert_archive_equals_truth(settings, site, truth)
    eventually(lambda: in_sync_everywhere(settings), "the restarted broker back in every ISR", 120)
    assert eventually(lambda: healthy(stack), "every instance healthy", 120)


def in_sync_everywhere(settings: Settings) -> bool:
    leaders = partition_leaders(settings.kafka_bootstrap, "pageviews")
    return bool(leaders) and all(isr == [1, 2, 3] for _, isr in leaders.values())


def test_killed_archiver_leaves_its_partitions_to_the_other(cluster_stack: LocalStack) -> None:
    stack, settings = cluster_stack, cluster_stack.settings
    rpc = supervisor.rpc(settings)
    site = new_site(stack, "archiver-kill")

    def kill_and_keep_archiver_1_away() -> None:
        before = component_pid(stack, "archiver-1")
        sigkill_tree(before)
        # supervisord restarts it; keep it stopped, so archiver-2 alone holds the group's
        # partitions for the rest of the run.
        eventually(
            lambda: component_pid(stack, "archiver-1") not in (None, before), "archiver-1 restarted", 60
        )
        rpc.supervisor.stopProcess("archiver-1", True)

    traffic = BothCollectors.start(stack, site, seed=22)
    inject([kill_and_keep_archiver_1_away], AROUND_THE_FAULT_S)
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
    traffic = BothCollectors.start(stack, site, seed=23)
    # The worker and its executor at once, in the middle of the 1 s micro-batches; traffic goes
    # on until supervisord has restarted it and every instance is healthy, and a while after.
    inject([lambda: kill_and_wait_for_recovery(stack, "spark-worker-1")], AROUND_THE_FAULT_S)
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
    leader, _ = eventually(
        lambda: partition_leaders(settings.kafka_bootstrap, "pageviews").get(0), "partition 0's leader", 30
    )
    process = component_pid(stack, f"kafka-{leader}")

    def cut_off_a_while() -> None:
        broker_network.cut_off(leader)
        try:
            # Alive but unreachable: fenced by the controllers, out of every ISR, while the
            # other two take the writes it misses.
            eventually(lambda: out_of_every_isr(settings, leader), f"kafka-{leader} out of every ISR", 60)
            time.sleep(AROUND_THE_FAULT_S)  # writes it misses, to catch up on
        finally:
            broker_network.reconnect(leader)

    traffic = BothCollectors.start(stack, site, seed=24)
    inject([cut_off_a_while], AROUND_THE_FAULT_S)
    summary, truth = traffic.finish()
    # It rejoined as the same process (nobody restarted it) and caught up: in sync everywhere.
    eventually(lambda: in_sync_everywhere(settings), f"kafka-{leader} back in every ISR", 180)
    assert component_pid(stack, f"kafka-{leader}") == process
    # Unlike a dead broker (its connections refused at once), a cut-off leader swallows the
    # requests in flight to it: the producer abandons them after 10 s and retries them on the
    # new leader (idempotent: never written twice), inside the collectors' 30 s wait.
    assert summary.statuses == Counter({202: summary.sent}), summary.statuses
    assert_archive_equals_truth(settings, site, truth)
    assert eventually(lambda: healthy(stack), "every instance healthy", 120)


def out_of_every_isr(settings: Settings, broker: int) -> bool:
    leaders = partition_leaders(settings.kafka_bootstrap, "pageviews")
    return bool(leaders) and all(broker not in isr and lead != broker for lead, isr in leaders.values())


def every_minute_raw_and_agg(settings: Settings) -> tuple[dict, dict]:
    """Page views per (site, minute) for every site, from the archive and from Spark's rollup."""
    client = connect(settings)
    raw = dict(
        client.query(
            "SELECT (site, toStartOfMinute(ts)) AS k, count() FROM events WHERE name = 'pageview' GROUP BY k"
        ).result_rows
    )
    agg = dict(
        client.query(
            "SELECT (site, bucket) AS k, sum(pageviews) AS n FROM rollup_minute "
            "WHERE dimension = '' GROUP BY k HAVING n != 0"
        ).result_rows
    )
    return raw, agg


#: A site of the replay's own, so that it has something to rebuild when it runs alone.
REPLAYED_TRAFFIC_S = 4


def test_replay_and_verify_on_the_cluster_agree_with_the_archive(cluster_stack: LocalStack) -> None:
    """`tally replay` and `tally verify` find the cluster from $TALLY_HOME alone (its stored
    layout): the replay runs on the Spark workers, reading the three-broker log, and what it
    rebuilds equals the raw archive for every site the module's faults touched."""
    stack, settings = cluster_stack, cluster_stack.settings
    site = new_site(stack, "replay")
    summary, truth = BothCollectors.start(stack, site, seed=26, duration_s=REPLAYED_TRAFFIC_S).finish()
    assert summary.accepted == summary.sent, summary.statuses
    assert_archive_equals_truth(settings, site, truth)
    # The commands below are not told where the cluster listens: they read it from the home.
    placed_by = {"TALLY_CLUSTER_BASE_PORT", "TALLY_CLUSTER_BROKER_HOSTS", "TALLY_CLUSTER_BROKER_NETNS"}
    unplaced = LocalStack({k: v for k, v in stack.env.items() if k not in placed_by}, settings)
    replayed = unplaced.tally("replay", timeout=900)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    raw, agg = every_minute_raw_and_agg(settings)
    assert raw and agg == raw
    assert eventually(lambda: healthy(unplaced), "the stream jobs running again after the replay", 180)
    verified = eventually(
        lambda: verify_clean(unplaced), "tally verify: archive whole, agg equal to raw", 300
    )
    assert " 0 differ" in verified, verified
