"""The activity query's rollups, end to end: real Kafka → real Spark → ClickHouse engine.
Page views and visitors per minute and per dimension value, exactly once across a
re-delivered batch and a restart, and (with no allowed lateness) late page views counted as
late, not in the rollups.

Each test has its own topic (the watermark is per query and would otherwise be pushed by
other tests' event times), its own checkpoints, its own database and its own sites. The
expected numbers are computed here, independently, from the events the test produced.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from storage.client import connect
from stream_jobs.activity import QUERY_NAME
from stream_jobs.app import stop_gracefully
from stream_jobs.queries import start_queries
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.events import page_view
from tests.fixtures.spark import (
    malformed_messages,
    messages,
    minutes_ago,
    pageview_events,
    produce,
    site_names,
    wait_for,
    wait_for_watermark,
)

pytestmark = pytest.mark.integration

Counts = dict[tuple[str, datetime], tuple[int, int]]  # (site, minute) → (pageviews, visitors)
# (site, day, dimension, value) → (page views, visitors)
Breakdown = dict[tuple[str, date, str, str], tuple[int, int]]
DIMENSIONS = ("path", "country", "browser", "os", "device", "language", "screen_size")


def dimension_value(event: PageViewEvent, dimension: str) -> str:
    """An event dimension's value, computed here: screen_size classes the width with the
    documented thresholds (Mobile < 576 px, Tablet < 992, Laptop < 1440, Desktop; '' for 0)."""
    if dimension != "screen_size":
        return getattr(event, dimension)
    width = event.screen_width
    if width == 0:
        return ""
    return "Mobile" if width < 576 else "Tablet" if width < 992 else "Laptop" if width < 1440 else "Desktop"


def test_pageviews_and_visitors_per_minute_and_per_dimension_match_the_events_produced(
    spark: SparkSession, stream_settings: Settings, running_queries: list[StreamingQuery]
) -> None:
    sites = site_names(3)
    events = pageview_events(sites, first_minute=minutes_ago(10), minutes=4, per_minute=25)
    noise = custom_events(sites, first_minute=minutes_ago(10))
    produce(stream_settings, [*messages(events + noise), *malformed_messages()])

    running_queries.extend(start_queries(spark, stream_settings, [QUERY_NAME]))

    expected = expected_counts(events)
    assert wait_for(lambda: stored_counts(stream_settings, sites), expected) == expected
    # The day rollups are a later insert of the same batch than the minute ones: waited for too.
    breakdown = expected_breakdown(events)
    assert wait_for(lambda: stored_breakdown(stream_settings, sites), breakdown) == breakdown
    assert all(query.isActive for query in running_queries), "malformed values must not stop the query"


def test_restart_from_checkpoint_and_redelivered_batch_do_not_double_count(
    spark: SparkSession, stream_settings: Settings, running_queries: list[StreamingQuery]
) -> None:
    sites = site_names(2)
    first_minute = minutes_ago(10)
    before = pageview_events(sites, first_minute=first_minute, minutes=4, per_minute=20)
    produce(stream_settings, before)

    [query] = start_queries(spark, stream_settings, [QUERY_NAME])
    running_queries.append(query)
    expected = expected_counts(before)
    assert wait_for(lambda: stored_counts(stream_settings, sites), expected) == expected
    stop_gracefully(query)

    # Forget that the last batch with rows was committed, as if the driver had died right
    # after the sink wrote it: on restart Spark runs that batch again.
    redelivered = last_batch_with_rows(stream_settings)
    uncommit_from(stream_settings.checkpoints_dir / QUERY_NAME, redelivered)
    [query] = start_queries(spark, stream_settings, [QUERY_NAME])
    running_queries.append(query)
    assert wait_for(lambda: times_written(stream_settings, redelivered), 2) == 2
    assert stored_counts(stream_settings, sites) == expected
    breakdown = expected_breakdown(before)
    assert wait_for(lambda: stored_breakdown(stream_settings, sites), breakdown) == breakdown

    # Later events, some in minutes already counted: the restored state carries on from the
    # totals before the restart. Event times stay within the watermark of those seen.
    after = pageview_events(sites, first_minute=first_minute + timedelta(minutes=3), minutes=2, per_minute=15)
    produce(stream_settings, after)
    expected = expected_counts(before + after)
    assert wait_for(lambda: stored_counts(stream_settings, sites), expected) == expected
    breakdown = expected_breakdown(before + after)
    assert wait_for(lambda: stored_breakdown(stream_settings, sites), breakdown) == breakdown


def test_events_behind_the_watermark_are_counted_as_late_not_in_their_closed_minute(
    spark: SparkSession, stream_settings_without_lateness: Settings, running_queries: list[StreamingQuery]
) -> None:
    # No allowed lateness: behind the watermark is late here (with the default 72 h these page
    # views would be counted: tests/integration/test_late_events.py).
    stream_settings = stream_settings_without_lateness
    sites = site_names(2)
    first_minute = minutes_ago(20)
    on_time = pageview_events(sites, first_minute=first_minute, minutes=6, per_minute=10)
    produce(stream_settings, on_time)
    [query] = start_queries(spark, stream_settings, [QUERY_NAME])
    running_queries.append(query)
    watermark = _ms(max(e.ts for e in on_time)) - timedelta(seconds=stream_settings.watermark_s)
    assert wait_for(
        lambda: stored_counts(stream_settings, sites), expected_counts(on_time)
    ) == expected_counts(on_time)
    wait_for_watermark(stream_settings, QUERY_NAME, watermark)

    # Minutes 0-1 ended well before the watermark: closed. The last minute is still open.
    late = [page_view(sites[0], "late-visitor", first_minute + timedelta(seconds=s)) for s in (5, 30, 65)]
    late += [page_view(sites[1], "late-visitor", first_minute + timedelta(seconds=100))]
    still_open = [page_view(sites[1], "on-time-visitor", max(e.ts for e in on_time) - timedelta(seconds=1))]
    produce(stream_settings, late + still_open)

    expected = expected_counts(on_time + still_open)
    assert wait_for(lambda: stored_counts(stream_settings, sites), expected) == expected
    assert wait_for(lambda: stored_late(stream_settings, sites), expected_late(late)) == expected_late(late)


# --- expectations, computed from the events -----------------------------------------------


def custom_events(sites: list[str], *, first_minute: datetime) -> list[PageViewEvent]:
    """Custom events share the topic but are not page views."""
    return [page_view(site, "visitor-custom", first_minute, name="signup") for site in sites]


def minute(ts: datetime) -> datetime:
    return ts.replace(second=0, microsecond=0)


def expected_counts(events: list[PageViewEvent]) -> Counts:
    pageviews: Counter[tuple[str, datetime]] = Counter()
    visitors: defaultdict[tuple[str, datetime], set[str]] = defaultdict(set)
    for e in events:
        key = (e.site, minute(e.ts))
        pageviews[key] += 1
        visitors[key].add(e.visitor_id)
    return {key: (pageviews[key], len(visitors[key])) for key in pageviews}


def expected_breakdown(events: list[PageViewEvent]) -> Breakdown:
    pageviews: Counter[tuple[str, str, str]] = Counter()
    visitors: defaultdict[tuple[str, str, str], set[str]] = defaultdict(set)
    for e in events:
        for dimension in DIMENSIONS:
            key = (e.site, e.ts.date(), dimension, dimension_value(e, dimension))
            pageviews[key] += 1
            visitors[key].add(e.visitor_id)
    return {key: (pageviews[key], len(visitors[key])) for key in pageviews}


def expected_late(events: list[PageViewEvent]) -> dict[tuple[str, datetime], int]:
    return dict(Counter((e.site, minute(e.ts)) for e in events))


def _ms(ts: datetime) -> datetime:
    return ts.replace(microsecond=ts.microsecond // 1000 * 1000)


# --- Spark checkpoint ---------------------------------------------------------------------


def uncommit_from(checkpoint: Path, batch_id: int) -> None:
    """Drop the commit of `batch_id` and every later batch, so that `batch_id` runs again."""
    for folder, first in (("commits", batch_id), ("offsets", batch_id + 1)):
        for path in (checkpoint / folder).iterdir():
            number = path.name.lstrip(".").removesuffix(".crc")
            if number.isdigit() and int(number) >= first:
                path.unlink()


# --- ClickHouse ---------------------------------------------------------------------------


def stored_counts(settings: Settings, sites: list[str]) -> Counts:
    rows = (
        connect(settings)
        .query(
            "SELECT site, bucket, sum(pageviews), sum(visitors) "
            "FROM rollup_minute WHERE site IN {sites:Array(String)} AND dimension = '' "
            "GROUP BY site, bucket HAVING sum(pageviews) != 0 OR sum(visitors) != 0",
            parameters={"sites": sites},
        )
        .result_rows
    )
    return {(site, minute.replace(tzinfo=UTC)): (int(pv), int(v)) for site, minute, pv, v in rows}


def stored_breakdown(settings: Settings, sites: list[str]) -> Breakdown:
    rows = (
        connect(settings)
        .query(
            "SELECT site, bucket, dimension, value, sum(pageviews), sum(visitors) "
            "FROM rollup_day WHERE site IN {sites:Array(String)} AND dimension IN {dimensions:Array(String)} "
            "GROUP BY site, bucket, dimension, value HAVING sum(pageviews) != 0 OR sum(visitors) != 0",
            parameters={"sites": sites, "dimensions": list(DIMENSIONS)},
        )
        .result_rows
    )
    return {(site, day, dimension, value): (int(pv), int(v)) for site, day, dimension, value, pv, v in rows}


def stored_late(settings: Settings, sites: list[str]) -> dict[tuple[str, datetime], int]:
    rows = (
        connect(settings)
        .query(
            "SELECT site, window_start, sum(events) FROM late_events FINAL "
            "WHERE query_name = {query:String} AND site IN {sites:Array(String)} GROUP BY site, window_start",
            parameters={"query": QUERY_NAME, "sites": sites},
        )
        .result_rows
    )
    return {(site, start.replace(tzinfo=UTC)): int(count) for site, start, count in rows}


def last_batch_with_rows(settings: Settings) -> int:
    rows = (
        connect(settings)
        .query(
            "SELECT max(batch_id) FROM stream_batches WHERE query_name = {query:String} AND rows > 0",
            parameters={"query": QUERY_NAME},
        )
        .result_rows
    )
    return int(rows[0][0])


def times_written(settings: Settings, batch_id: int) -> int:
    rows = (
        connect(settings)
        .query(
            "SELECT count() FROM stream_batches "
            "WHERE query_name = {query:String} AND batch_id = {batch:UInt64}",
            parameters={"query": QUERY_NAME, "batch": batch_id},
        )
        .result_rows
    )
    return int(rows[0][0])
