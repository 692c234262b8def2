"""For closed windows the `agg` source (Spark-derived tables) answers every report exactly as
the `raw` source (the archive) does: aggregate, timeseries, breakdowns, sessions.

Generated traffic: several sites; visitors with several sessions each, crossing minute and
hour boundaries; page views arriving out of order across micro-batches (behind the newest
event time, within the watermark); and, on one site, page views arriving behind the
watermark, which the derived tables count as late instead. The same events go to the raw
archive (`events`) as the archiver writes them.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from storage import queries
from storage.archiver import EVENT_COLUMNS
from storage.client import connect
from stream_jobs.app import start_queries
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.events import PATHS, page_view, visitor_attributes
from tests.fixtures.spark import minutes_ago, produce, site_names, wait_for, wait_for_watermark

pytestmark = pytest.mark.integration

QUERIES = ("pageview_counts", "sessions")
ROUND = timedelta(minutes=40)
RANGE = timedelta(hours=2)


def test_agg_equals_raw_for_closed_windows(
    spark: SparkSession, stream_settings: Settings, running_queries: list[StreamingQuery]
) -> None:
    settings = stream_settings
    *sites, late_site, clock_site = site_names(5)
    t0 = minutes_ago(4 * 60)
    events = visits([*sites, late_site], t0)
    running_queries.extend(start_queries(spark, settings, QUERIES))
    held_back: list[PageViewEvent] = []
    out_of_order = 0
    for n in range(3):
        start = t0 + n * ROUND
        this_round = [e for e in events if start <= e.ts < start + ROUND]
        # Every third page view of the round's last 90 s is held back to the next round: it
        # then arrives behind the newest event time, in a later micro-batch, but within the
        # watermark (120 s).
        stragglers = [e for e in this_round if e.ts >= start + ROUND - timedelta(seconds=90)][::3]
        send(settings, held_back)
        send(settings, [e for e in this_round if e not in stragglers])
        held_back = stragglers
        out_of_order += len(stragglers)
        wait_for_queries(settings, max(e.ts for e in this_round if e not in stragglers))
        if n == 1:
            # Long after their minute closed: behind the watermark.
            send(
                settings,
                [page_view(late_site, f"late-{i}", t0 + timedelta(minutes=10, seconds=i)) for i in range(4)],
            )
    send(settings, held_back)
    assert out_of_order > 0
    client = connect(settings)
    whole = queries.StatsQuery(sites[0], t0, t0 + RANGE)
    expected_pageviews = len([e for e in events if e.site in sites])
    assert wait_for(lambda: total_agg_pageviews(client, sites, t0), expected_pageviews) == expected_pageviews

    # Every page view is read; sessions still open are stitched from the per-visitor minutes.
    assert open_sessions(client, sites, t0) > 0
    for site in sites:
        for q in ranges(site, t0):
            assert agg_reports(client, q) == raw_reports(client, q), q
    assert any(not s.is_bounce for s in queries.sessions(client, whole, 1000, "agg"))

    # A page view much later closes every session: then they come from `sessions`.
    send(settings, [page_view(clock_site, "clock", t0 + RANGE + timedelta(minutes=40))])
    wait_for_queries(settings, t0 + RANGE + timedelta(minutes=38))
    assert open_sessions(client, sites, t0) == 0
    for site in sites:
        for q in ranges(site, t0):
            assert agg_reports(client, q) == raw_reports(client, q), q

    # The late page views are in the archive, not in the derived tables: reported as late.
    q = queries.StatsQuery(late_site, t0, t0 + RANGE)
    raw, agg = queries.aggregate(client, q, "raw"), queries.aggregate(client, q, "agg")
    assert queries.late_pageviews(client, q) == 4
    assert agg["pageviews"] + 4 == raw["pageviews"]


# --- traffic ------------------------------------------------------------------------------


def visits(sites: list[str], t0: datetime) -> list[PageViewEvent]:
    """Visitors coming back in sessions: think times from seconds to beyond the session gap."""
    rng = random.Random(t0.timestamp())
    events = []
    for site in sites:
        for n in range(12):
            visitor, attributes = f"visitor-{n}", visitor_attributes(rng)
            ts = t0 + timedelta(seconds=rng.uniform(0, 100 * 60))
            while ts < t0 + RANGE:
                attributes["referrer_domain"] = rng.choice(["", "google.com", attributes["referrer_domain"]])
                events.append(page_view(site, visitor, ts, path=rng.choice(PATHS), **attributes))
                think = rng.choices([(5, 180), (300, 1500), (1860, 3000)], weights=[6, 3, 1])[0]
                if rng.random() < 0.25:
                    break
                ts += timedelta(seconds=rng.uniform(*think))
    return sorted(events, key=lambda e: e.ts)


def send(settings: Settings, events: list[PageViewEvent]) -> None:
    """To the log, and to the raw archive as the archiver writes them."""
    if not events:
        return
    produce(settings, events)
    rows = [[getattr(e, column) for column in EVENT_COLUMNS] + [0, 0] for e in events]
    connect(settings).insert("events", rows, column_names=[*EVENT_COLUMNS, "kafka_partition", "kafka_offset"])


def wait_for_queries(settings: Settings, newest: datetime) -> None:
    """Until both queries have read up to the event time `newest` (their watermark shows it)."""
    watermark = newest.replace(microsecond=newest.microsecond // 1000 * 1000) - timedelta(
        seconds=settings.watermark_s
    )
    for name in QUERIES:
        assert wait_for_watermark(settings, name, watermark) >= watermark, name


# --- the reports --------------------------------------------------------------------------


def ranges(site: str, t0: datetime) -> list[queries.StatsQuery]:
    """The whole traffic, and one hour in its middle (sessions crossing both of its ends)."""
    return [
        queries.StatsQuery(site, t0, t0 + RANGE),
        queries.StatsQuery(site, t0 + timedelta(minutes=30), t0 + timedelta(minutes=90)),
    ]


def reports(client: object, q: queries.StatsQuery, source: queries.Source) -> dict[str, object]:
    found: dict[str, object] = {
        "aggregate": queries.aggregate(client, q, source),
        "minutes": queries.timeseries(client, q, "minute", source),
        "hours": queries.timeseries(client, q, "hour", source),
        "sessions": queries.sessions(client, q, 1000, source),
    }
    for by in queries.DIMENSIONS:
        found[f"by {by}"] = queries.breakdown(client, q, by, 100, source)
    return found


def agg_reports(client: object, q: queries.StatsQuery) -> dict[str, object]:
    return reports(client, q, "agg")


def raw_reports(client: object, q: queries.StatsQuery) -> dict[str, object]:
    return reports(client, q, "raw")


def total_agg_pageviews(client: object, sites: list[str], t0: datetime) -> int:
    return sum(
        queries.aggregate(client, queries.StatsQuery(s, t0, t0 + RANGE), "agg")["pageviews"] for s in sites
    )


def open_sessions(client: object, sites: list[str], t0: datetime) -> int:
    """Sessions of the range not yet in `sessions` (still open for the sessions query)."""
    stored = client.query(
        "SELECT count() FROM sessions FINAL WHERE site IN {sites:Array(String)}", parameters={"sites": sites}
    ).result_rows[0][0]
    total = sum(
        queries.aggregate(client, queries.StatsQuery(s, t0, t0 + RANGE), "agg")["sessions"] for s in sites
    )
    return total - int(stored)
