"""`tally whatif` (issue 21) on real Kafka, Spark and ClickHouse: a proposed definitions
version replayed from the log into side tables gives the numbers the raw archive gives with
those definitions; swapping it in changes what the stats API answers (and the version in its
meta), and a rollback brings the old numbers back. Beyond the log's retention the rebuild
is split as a replay's is: the expired days from the archive, the rest from the log, and the
version can be swapped in (`--from-archive` builds the range's days alone, for comparing).

Traffic: visitors whose page views are 2 to 45 minutes apart, so a 20-minute session gap cuts
sessions the 30-minute default keeps whole (more visits, more bounces, other entry pages).
"""

from __future__ import annotations

import asyncio
import random
import threading
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from flask.testing import FlaskClient
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from archiver.rows import archive_row, insert_rows
from dashboard.app import build_app
from ops.local import whatif
from storage import definitions, queries
from storage import goals as goal_store
from storage.client import connect
from storage.definitions import DefinitionsError, side_suffix
from storage.queries import StatsQuery, agg
from storage.queries.whatif import compare, side_tables_exist
from storage.sites import add_site
from storage.tables import SYNTHETIC_PARTITION
from stream_jobs.activity import QUERY_NAME
from stream_jobs.app import run, stop_gracefully
from stream_jobs.definition_requests import DefinitionRequests
from stream_jobs.queries import start_queries
from tally.clock import utc_now
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.clickhouse import Endpoint
from tests.fixtures.events import PATHS, page_view
from tests.fixtures.spark import isolated_settings, produce, site_names, wait_for

pytestmark = pytest.mark.integration

PROPOSED_GAP_S = 20 * 60
GAPS = [timedelta(minutes=m) for m in (2, 5, 15, 22, 25, 28, 45)]


def yesterday() -> datetime:
    return datetime.combine(utc_now().date() - timedelta(days=1), time(), UTC)


def visits(site: str, day: datetime, visitors: int = 12, seed: int = 7) -> list[PageViewEvent]:
    """Each visitor's page views from 08:00 on, 2 to 45 minutes apart (never past 20:00)."""
    rng = random.Random(seed)
    events = []
    for n in range(visitors):
        ts = day + timedelta(hours=8, minutes=rng.randrange(0, 120))
        for _ in range(rng.randrange(2, 9)):
            events.append(page_view(site, f"visitor-{n}", ts, path=rng.choice(PATHS)))
            ts += rng.choice(GAPS)
    return sorted(events, key=lambda e: e.ts)


def archive(settings: Settings, events: list[PageViewEvent], partition: int = SYNTHETIC_PARTITION) -> None:
    insert_rows(connect(settings), [archive_row(e, partition, i) for i, e in enumerate(events)])


def raw_numbers(settings: Settings, q: StatsQuery, gap_s: int) -> dict[str, float]:
    return queries.aggregate(connect(settings), StatsQuery(q.site, q.start, q.end, session_gap_s=gap_s))


def raw_breakdown(settings: Settings, q: StatsQuery, gap_s: int, by: str = "entry_path") -> list[Any]:
    q = StatsQuery(q.site, q.start, q.end, session_gap_s=gap_s)
    return queries.session_breakdown(connect(settings), q, by, limit=5)


@pytest.fixture
def whatif_settings(tmp_path: Path, kafka_bootstrap: str, clickhouse_endpoint: Endpoint) -> Settings:
    return isolated_settings(tmp_path / "home", kafka_bootstrap, clickhouse_endpoint)


def run_live_until_caught_up(
    spark: SparkSession, settings: Settings, q: StatsQuery, running: list[StreamingQuery]
) -> None:
    """The live activity query (version 1's definitions) until agg equals raw, then stopped:
    a swap needs the live queries stopped."""
    live = start_queries(spark, settings, [QUERY_NAME])
    running.extend(live)
    expected = raw_numbers(settings, q, settings.session_gap_s)
    assert wait_for(lambda: queries.aggregate(connect(settings), q, source="agg"), expected) == expected
    for query in live:
        stop_gracefully(query)


def stats(api: FlaskClient, settings: Settings, q: StatsQuery, source: str) -> dict[str, Any]:
    params = {
        "site": q.site,
        "from": q.start.isoformat(),
        "to": q.end.isoformat(),
        "source": source,
        "meta": "true",
    }
    response = api.get(
        "/api/v1/stats/aggregate", query_string=params,
        headers={"Authorization": f"Bearer {settings.resolved_api_key()}"},
    )  # fmt: skip
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def answer(api: FlaskClient, settings: Settings, q: StatsQuery, source: str) -> tuple[int, dict[str, Any]]:
    body = stats(api, settings, q, source)
    return body["meta"]["definitions_version"], body["results"]


def test_whatif_equals_raw_with_the_proposed_gap_and_swaps_in_and_back(
    spark: SparkSession, whatif_settings: Settings, running_queries: list[StreamingQuery]
) -> None:
    settings = whatif_settings
    (site,) = site_names(1)
    day = yesterday()
    q = StatsQuery(site, day, day + timedelta(days=1))
    events = visits(site, day)
    produce(settings, events)
    archive(settings, events)
    client = connect(settings)
    assert definitions.current(client, settings).number == 1  # from the environment: 30 min
    run_live_until_caught_up(spark, settings, q, running_queries)
    old = raw_numbers(settings, q, settings.session_gap_s)
    new = raw_numbers(settings, q, PROPOSED_GAP_S)
    assert new["sessions"] > old["sessions"], "the traffic has gaps between 20 and 30 minutes"

    current, proposed = whatif.propose(settings, {"session_gap_s": PROPOSED_GAP_S}, "20-minute visits")
    assert (current.number, proposed.number) == (1, 2)
    whatif.build(settings, proposed, q.start, q.end, progress=print, spark=spark)
    comparison = compare(client, q, current, proposed)
    assert comparison.current.totals == old
    assert comparison.proposed.totals == new
    assert comparison.proposed.rows == raw_breakdown(settings, q, PROPOSED_GAP_S)
    assert comparison.current.rows == raw_breakdown(settings, q, settings.session_gap_s)
    exits = compare(client, q, current, proposed, by="exit_path")  # any session breakdown
    assert exits.proposed.rows == raw_breakdown(settings, q, PROPOSED_GAP_S, "exit_path")
    assert exits.current.rows == raw_breakdown(settings, q, settings.session_gap_s, "exit_path")

    api = build_app(settings).server.test_client()
    assert answer(api, settings, q, "agg") == (1, old)
    # A goal added meanwhile is a version of its own (3: version 1's gap with the goal); the
    # swap keeps it in force, recorded as version 4: version 2's gap with the goal.
    add_site(client, site)
    goal_store.add_goal(client, goal_store.make_goal(site, page_pattern="/late"))
    assert definitions.current(client, settings).number == 3
    whatif.swap_to(settings, proposed.number, progress=print)
    swapped = definitions.current(client, settings)
    assert (swapped.number, swapped.definitions.session_gap_s) == (4, PROPOSED_GAP_S)
    assert [goal.name for goal in goal_store.list_goals(client, site)] == ["Visit /late"]
    assert side_tables_exist(client, 3) and not side_tables_exist(client, 2)
    # The API re-reads the current version within seconds; both sources follow it.
    assert wait_for(lambda: answer(api, settings, q, "agg"), (4, new)) == (4, new)
    assert answer(api, settings, q, "raw") == (4, new)

    assert whatif.rollback(settings, progress=print) == 3  # the whole swap undone, the goal kept
    assert wait_for(lambda: answer(api, settings, q, "agg"), (3, old)) == (3, old)
    assert answer(api, settings, q, "raw") == (3, old)
    assert [goal.name for goal in goal_store.list_goals(client, site)] == ["Visit /late"]
    # The rolled-back tables resume from their own checkpoint: the live run carries on.
    more = [page_view(site, "visitor-late", day + timedelta(hours=21), path="/late")]
    produce(settings, more)
    archive(settings, more)
    running_queries.extend(start_queries(spark, settings, [QUERY_NAME]))
    expected = raw_numbers(settings, q, settings.session_gap_s)
    assert expected["pageviews"] == old["pageviews"] + 1
    assert wait_for(lambda: queries.aggregate(client, q, source="agg"), expected) == expected

    whatif.discard_version(settings, 4)
    assert not side_tables_exist(client, 4)
    with pytest.raises(DefinitionsError, match="current"):
        whatif.discard_version(settings, 3)


def test_a_swap_asked_for_in_the_dashboard_is_carried_out_by_the_running_stream_jobs(
    spark: SparkSession, whatif_settings: Settings
) -> None:
    """The live application's loop (stream_jobs.app.run) with the dashboard's requests: the
    what-if is built beside it, the swap happens between two batches, and the live run carries
    on with the new gap; a request that cannot be carried out is refused with the reason."""
    settings = whatif_settings
    (site,) = site_names(1)
    day = yesterday()
    q = StatsQuery(site, day, day + timedelta(days=1))
    events = visits(site, day, seed=5)
    produce(settings, events)
    archive(settings, events)
    client = connect(settings)
    definitions.current(client, settings)
    requests = DefinitionRequests(
        settings, lambda now: start_queries(spark, now, [QUERY_NAME]), stop_gracefully
    )
    stop = threading.Event()
    live = threading.Thread(target=run, args=(spark, settings, stop, requests), daemon=True)
    live.start()
    try:
        old = raw_numbers(settings, q, settings.session_gap_s)
        assert wait_for(lambda: queries.aggregate(client, q, source="agg"), old) == old
        _, proposed = whatif.propose(settings, {"session_gap_s": PROPOSED_GAP_S}, "asked in the dashboard")
        whatif.build(settings, proposed, q.start, q.end, progress=print, spark=spark)

        swap = definitions.ask(client, proposed.number, "swap", "owner@example.com")
        assert wait_for(lambda: request_state(client, swap.id), "done") == "done"
        assert definitions.current(client, settings).number == proposed.number
        more = [page_view(site, "visitor-after-swap", day + timedelta(hours=22), path="/after")]
        produce(settings, more)
        archive(settings, more)
        new = raw_numbers(settings, q, PROPOSED_GAP_S)
        assert wait_for(lambda: queries.aggregate(client, q, source="agg"), new) == new

        refused = definitions.ask(client, proposed.number, "swap", "owner@example.com")
        assert wait_for(lambda: request_state(client, refused.id), "refused") == "refused"
        assert "already current" in request_outcome(client, refused.id)
    finally:
        stop.set()
        live.join()


def request_state(client: Any, request_id: object) -> str:
    return next((r.state for r in definitions.recent_requests(client, 50) if r.id == request_id), "")


def request_outcome(client: Any, request_id: object) -> str:
    return next((r.outcome for r in definitions.recent_requests(client, 50) if r.id == request_id), "")


def test_beyond_the_logs_retention_the_archive_rebuilds_the_proposed_version(
    spark: SparkSession, whatif_settings: Settings
) -> None:
    settings = whatif_settings
    (site,) = site_names(1)
    day = yesterday()
    q = StatsQuery(site, day, day + timedelta(days=1))
    events = visits(site, day, seed=11)
    produce(settings, events)
    # The log has expired every event it held (as retention does); the archive kept them.
    expired = asyncio.run(expire_everything(settings))
    partition = max(expired, key=lambda p: expired[p])
    archive(settings, events, partition=partition)
    current, proposed = whatif.propose(settings, {"session_gap_s": PROPOSED_GAP_S}, "from the archive")

    # --from-archive: the range's days from the archive alone, for comparing only.
    whatif.build(settings, proposed, q.start, q.end, progress=print, from_archive=True)
    comparison = compare(connect(settings), q, current, proposed)
    assert comparison.proposed.totals == raw_numbers(settings, q, PROPOSED_GAP_S)
    assert comparison.proposed.rows == raw_breakdown(settings, q, PROPOSED_GAP_S)
    with pytest.raises(DefinitionsError, match="built from the archive"):
        whatif.swap_to(settings, proposed.number, progress=print)
    assert side_tables_exist(connect(settings), proposed.number)
    assert side_suffix(proposed.number) == "_v2"

    # The default build splits history as a replay does: the expired days from the archive, the
    # log from the cut on. The version is whole, with checkpoints: it can be swapped in.
    # (The suite's Spark session: a session of build's own would be that one, stopped after.)
    whatif.build(settings, proposed, q.start, q.end, progress=print, spark=spark)
    comparison = compare(connect(settings), q, current, proposed)
    assert comparison.proposed.totals == raw_numbers(settings, q, PROPOSED_GAP_S)
    assert comparison.proposed.rows == raw_breakdown(settings, q, PROPOSED_GAP_S)
    whatif.swap_to(settings, proposed.number, progress=print)
    client = connect(settings)
    assert definitions.current(client, settings).number == proposed.number
    swapped = StatsQuery(q.site, q.start, q.end, session_gap_s=PROPOSED_GAP_S)
    assert agg.aggregate(client, swapped) == raw_numbers(settings, q, PROPOSED_GAP_S)  # the live tables
    assert expired[partition] > 0


async def expire_everything(settings: Settings) -> dict[int, int]:
    """Advance every partition's log start to its end (Kafka's DeleteRecords); returns the ends."""
    topic = settings.pageviews_topic
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=settings.kafka_bootstrap)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or set()]
        ends = await consumer.end_offsets(partitions)
        assert ends, f"no partitions of {topic}"
    finally:
        await consumer.stop()
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        await admin.delete_records({tp: RecordsToDelete(end) for tp, end in ends.items() if end})
    finally:
        await admin.close()
    return {tp.partition: end for tp, end in ends.items() if end}
