"""Numbers that show their work (issue 21): the stats APIs' `meta` says what an answer is made
of, and it is checked here against what the test itself wrote to Kafka, on the real broker,
the real archiver, the real stream jobs (Spark) and the real ClickHouse engine.

- which partitions and offsets the range's events came from (the producer's own record of
  where each event landed), and how far the stream jobs read each partition (the end of the
  log: every event was processed);
- before the stream jobs ran: the events are there but pending, agreement "not checked";
- the stream jobs' watermark as they published it;
- late events (no allowed lateness here): the page views sent behind the watermark, counted in
  raw, not in the rollups; the default answer for their day comes from the archive;
- agreement: "agree" for a site without late events; "disagree" naming the day for the site
  with late events (the difference is theirs) and, after a rollup row is deleted, for the
  site that agreed.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from datetime import UTC, datetime, time, timedelta
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from flask.testing import FlaskClient
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from archiver.consumer import Archiver
from dashboard.app import build_app
from storage import queries
from storage.client import connect
from storage.sites import add_site
from stream_jobs.activity import QUERY_NAME
from stream_jobs.queries import start_queries
from tally.clock import utc_now
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.events import PATHS, page_view
from tests.fixtures.spark import published_watermark, site_names, wait_for, wait_for_watermark

pytestmark = pytest.mark.integration

Landed = tuple[PageViewEvent, int, int]  # the event, its partition, its offset


def test_meta_names_the_log_range_late_events_and_agreement(
    spark: SparkSession, stream_settings_without_lateness: Settings, running_queries: list[StreamingQuery]
) -> None:
    # No allowed lateness: the stragglers below, 3 h behind, are late (with the default 72 h
    # they would be counted: tests/integration/test_late_events.py).
    settings = stream_settings_without_lateness
    calm, late_site, clock_site = site_names(3)
    day = datetime.combine(utc_now().date(), time(), UTC) - timedelta(days=1)
    t0 = day + timedelta(hours=9)
    traffic = visits([calm, late_site], t0)
    landed = produce(settings, traffic)
    archive(settings, len(landed))
    api = build_app(settings).server.test_client()
    whole_day = {"from": iso(day), "to": iso(day + timedelta(days=1))}

    # Archived, not yet read by the stream jobs: in raw, pending for agg, nothing compared.
    meta = stats(api, settings, "/stats/aggregate", site=calm, **whole_day)["meta"]
    assert partitions(meta) == expected_partitions(landed, calm, processed=None)
    assert meta["agreement"]["status"] == "not checked"
    assert "no progress" in meta["agreement"]["reason"]

    running_queries.extend(start_queries(spark, settings, [QUERY_NAME]))
    clock = t0 + timedelta(hours=3)  # closes every session of the traffic
    landed += produce(settings, [page_view(clock_site, "clock", clock)])
    wait_for_watermark(settings, QUERY_NAME, clock - timedelta(seconds=settings.watermark_s))
    # Behind the watermark, from visitors the stream jobs hold no state for: late.
    stragglers = [page_view(late_site, f"straggler-{n}", t0 + timedelta(minutes=n)) for n in range(3)]
    landed += produce(settings, stragglers)
    client = connect(settings)
    late_q = queries.StatsQuery(late_site, day, day + timedelta(days=1))
    assert wait_for(lambda: queries.late_pageviews(client, late_q), len(stragglers)) == len(stragglers)
    archive(settings, len(landed))
    log_end = end_offsets(landed)
    assert wait_for(lambda: processed(client), log_end) == log_end

    # The site without late events: every figure accounted for, agg and raw agree.
    answer = stats(api, settings, "/stats/aggregate", site=calm, source="agg", **whole_day)
    meta = answer["meta"]
    assert meta["source"] == "agg"
    assert answer["results"]["pageviews"] == len([e for e in traffic if e.site == calm])
    assert partitions(meta) == expected_partitions(landed, calm, processed=log_end)
    assert meta["log"]["processed_to"] == {str(p): end for p, end in log_end.items()}
    assert meta["watermark"] == iso(published_watermark(settings, QUERY_NAME))
    assert meta["late_events"]["count"] == 0
    assert meta["late_events"]["counted_in"] == ["raw"] and meta["late_events"]["not_counted_in"] == ["agg"]
    assert meta["agreement"]["status"] == "agree" and meta["agreement"]["checked_days"] == 1
    assert meta["definitions"]["session_gap_s"] == settings.session_gap_s
    assert meta["definitions_fingerprint"]
    assert "definitions_version" in meta  # the stored version's number (test_whatif.py)

    # The site with late events: they are named, and the day they make differ is shown; the
    # archive answers that day (contract.LATE_EVENTS_RULE), so the answer counts them.
    answer = stats(api, settings, "/stats/aggregate", site=late_site, **whole_day)
    meta = answer["meta"]
    assert meta["source"] == "raw"
    late_site_views = [e for e in traffic if e.site == late_site] + stragglers
    assert answer["results"]["pageviews"] == len(late_site_views)
    assert meta["late_events"]["count"] == len(stragglers)
    assert list(meta["late_events"]["recorded_by_day"]) == [iso(day)]
    assert meta["late_events"]["by_day"] == {iso(day): len(stragglers)}
    assert partitions(meta) == expected_partitions(landed, late_site, processed=log_end)
    assert meta["agreement"]["status"] == "disagree"
    [differing] = meta["agreement"]["days"]
    assert differing["day"] == iso(day) and differing["late_events"] == len(stragglers)
    assert differing["raw"]["pageviews"] - differing["agg"]["pageviews"] == len(stragglers)

    # Every endpoint carries it when asked; a list answer inside {"results", "meta"}.
    for path, extra in [("/stats/timeseries", {}), ("/stats/breakdown", {"by": "path"}), ("/sessions", {}),
                        ("/stats/goals", {})]:  # fmt: skip
        answer = stats(api, settings, path, site=calm, source="raw", **whole_day, **extra)
        assert isinstance(answer["results"], list) and answer["meta"]["source"] == "raw", path
        assert partitions(answer["meta"]) == expected_partitions(landed, calm, processed=log_end), path
    assert "meta" not in plain(api, settings, "/stats/aggregate", site=calm, **whole_day)
    for path, extra in [("/stats/aggregate", {}), ("/stats/realtime", {"breakdown": "path"})]:
        # the live breakdown's answer carries no meta: junk there is refused all the same
        refused = api.get(
            f"/api/v1{path}", query_string={"site": calm, "meta": "maybe", **extra}, headers=auth(settings)
        )
        assert refused.status_code == 400 and refused.get_json()["error"].startswith("meta:"), path

    # Plausible's v2 query: the same fields inside its own meta, its shape otherwise unchanged.
    add_site(client, calm)  # Plausible's API answers for registered sites
    body = {"site_id": calm, "metrics": ["pageviews"], "date_range": [str(day.date()), str(day.date())]}
    v2 = api.post("/api/v2/query", json=body, headers=auth(settings)).get_json()
    assert "results" in v2, v2
    assert v2["results"] == [{"metrics": [len([e for e in traffic if e.site == calm])], "dimensions": []}]
    assert v2["meta"]["agreement"]["status"] == "agree"
    assert partitions(v2["meta"]) == expected_partitions(landed, calm, processed=log_end)

    # A rollup row lost: the answer says so, and names the day.
    client.command(
        "ALTER TABLE rollup_day DELETE WHERE site = {site:String} AND bucket = {day:Date} "
        "SETTINGS mutations_sync = 2",
        parameters={"site": calm, "day": day.date()},
    )
    meta = stats(api, settings, "/stats/aggregate", site=calm, **whole_day)["meta"]
    assert meta["agreement"]["status"] == "disagree"
    [differing] = meta["agreement"]["days"]
    calm_views = [e for e in traffic if e.site == calm]
    assert differing == {
        "day": iso(day),
        "raw": {"pageviews": len(calm_views), "visitors": len({e.visitor_id for e in calm_views})},
        "agg": {"pageviews": 0, "visitors": 0},
        "late_events": 0,
    }


# --- traffic, Kafka, the archive --------------------------------------------------------------


def visits(sites: list[str], t0: datetime) -> list[PageViewEvent]:
    """A few visitors per site over an hour, in event-time order."""
    events = []
    for s, site in enumerate(sites):
        for v in range(6):
            for n in range(1 + v % 3):
                ts = t0 + timedelta(minutes=7 * v + 3 * n + s, seconds=v)
                events.append(page_view(site, f"visitor-{v}", ts, path=PATHS[(v + n) % len(PATHS)]))
    return sorted(events, key=lambda e: e.ts)


def produce(settings: Settings, events: list[PageViewEvent]) -> list[Landed]:
    """Send in order; where each event landed, as the broker acknowledged it."""
    return asyncio.run(_produce(settings, events))


async def _produce(settings: Settings, events: list[PageViewEvent]) -> list[Landed]:
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap, acks="all", enable_idempotence=True
    )
    await producer.start()
    try:
        landed = []
        for event in events:
            record = await (await producer.send(settings.pageviews_topic, event.to_json(), key=event.key))
            landed.append((event, record.partition, record.offset))
        return landed
    finally:
        await producer.stop()


def archive(settings: Settings, expected: int) -> None:
    """Run the archiver until the archive holds `expected` events of this test's topic."""
    asyncio.run(_archive(settings, expected))


async def _archive(settings: Settings, expected: int, timeout_s: float = 180) -> None:
    archiver = Archiver(settings, connect(settings))
    task = asyncio.create_task(archiver.run())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while total_archived(settings) < expected and loop.time() < deadline:
        await asyncio.sleep(0.5)
    archiver.stop()
    await task
    assert total_archived(settings) == expected


def total_archived(settings: Settings) -> int:
    return int(connect(settings).query("SELECT count() FROM events").result_rows[0][0])


def end_offsets(landed: list[Landed]) -> dict[int, int]:
    ends: dict[int, int] = {}
    for _, partition, offset in landed:
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    return ends


def processed(client: Any) -> dict[int, int]:
    rows = client.query("SELECT partition, end_offset FROM stream_offsets FINAL").result_rows
    return {int(p): int(end) for p, end in rows}


def expected_partitions(landed: list[Landed], site: str, processed: dict[int, int] | None) -> list[dict]:
    """What `meta.log.partitions` must say of `site`'s events, from the producer's record."""
    offsets: dict[int, list[int]] = defaultdict(list)
    for event, partition, offset in landed:
        if event.site == site:
            offsets[partition].append(offset)
    return [
        {
            "partition": partition,
            "from_log": True,
            "events": len(found),
            "first_offset": min(found),
            "last_offset": max(found),
            "processed_to": None if processed is None else processed[partition],
            "pending": len(found) if processed is None else sum(o >= processed[partition] for o in found),
        }
        for partition, found in sorted(offsets.items())
    ]


# --- the API -----------------------------------------------------------------------------------


def auth(settings: Settings) -> dict[str, str]:
    return {"Authorization": f"Bearer {settings.resolved_api_key()}"}


def stats(api: FlaskClient, settings: Settings, path: str, **params: str) -> dict:
    response = api.get(f"/api/v1{path}", query_string={**params, "meta": "true"}, headers=auth(settings))
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def plain(api: FlaskClient, settings: Settings, path: str, **params: str) -> dict:
    return api.get(f"/api/v1{path}", query_string=params, headers=auth(settings)).get_json()


def partitions(meta: dict) -> list[dict]:
    return meta["log"]["partitions"]


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
