"""Once the activity query has read every event, the `agg` source (the rollups and sessions
Spark derives) answers every report exactly as the `raw` source (the archive) does — while
sessions are still open, and again once the watermark has closed them all; and Spark writes
the same rollup and session rows as the SQL backfill (storage/rollup_backfill.py) builds from
the archive.

Traffic: visitors with several sessions each, crossing minute, hour and UTC-midnight
boundaries; gaps of exactly gap - 1 s and gap + 1 s; page views arriving out of order across
micro-batches (behind the newest event time, within the watermark); on one site, page views of
new visitors arriving behind the watermark, which agg counts too (within the allowed lateness,
issue 30; before, they were late); and (second test) a session
gap below one minute. The same events go to the raw archive (`events`) as the archiver writes
them. Ranges: whole days, a day's head and tail, an hour, a segment inside a day, and one that
straddles midnight. Third test: events re-sent with the same event_id (issue 15), in the same
micro-batch and in a later one; the archive holds the first copy of each, and agg must agree.
Engagement events (issue 16) ride along: after page views, from a second to past the session
gap, a few reaching the 10 s that make a one-page session no bounce; one site has the known
answers of tests/fixtures/events.py's engaged_bounce_visits; a re-sent engagement event
counts once. They must change no page view, visitor, session or rate-limit count.
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, time, timedelta
from types import ModuleType

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from archiver.rows import archive_row, insert_rows
from storage import queries
from storage.client import connect
from storage.queries import agg, raw
from storage.rollup_backfill import backfill_rollups
from storage.tables import ROLLUP_DAY, ROLLUP_HOUR, ROLLUP_MINUTE, SYNTHETIC_PARTITION
from stream_jobs.activity import QUERY_NAME, SESSION_ATTRIBUTES, SESSION_JOURNEY, SESSION_PATHS
from stream_jobs.app import stop_gracefully
from stream_jobs.queries import start_queries
from tally.clock import utc_now
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.clickhouse import Endpoint
from tests.fixtures.events import (
    ENGAGED_BOUNCE_ANSWER,
    PATHS,
    engaged_bounce_visits,
    engagement_event,
    page_view,
    visitor_attributes,
)
from tests.fixtures.spark import isolated_settings, produce, site_names, wait_for, wait_for_watermark

pytestmark = pytest.mark.integration

ROUND = timedelta(minutes=40)
RANGE = timedelta(hours=2)


def last_midnight() -> datetime:
    return datetime.combine(utc_now().date(), time(), UTC)


def test_agg_equals_raw_open_and_closed_and_spark_equals_backfill(
    spark: SparkSession, stream_settings: Settings, running_queries: list[StreamingQuery]
) -> None:
    settings = stream_settings
    *sites, known_site, late_site, clock_site = site_names(5)
    # The traffic straddles yesterday's midnight (UTC): t0 = 23:00 the day before.
    t0 = last_midnight() - timedelta(days=1, hours=1)
    gap = timedelta(seconds=settings.session_gap_s)
    events = visits([*sites, late_site], t0, RANGE, engaged=True) + edge_cases(sites[0], t0, gap)
    events += engaged_bounce_visits(known_site, t0 + timedelta(minutes=5), gap)
    # In event-time order, as a round is produced: a micro-batch may end anywhere in a round,
    # and events produced after it must not be behind the watermark it leaves (late).
    events.sort(key=lambda e: e.ts)
    sites.append(known_site)
    running_queries.extend(start_queries(spark, settings, [QUERY_NAME]))
    out_of_order = send_in_rounds(settings, events, t0, RANGE, late_site)
    assert out_of_order > 0
    client = connect(settings)
    expected = len([e for e in events if e.site in sites and e.name == "pageview"])
    assert wait_for(lambda: total_agg_pageviews(client, sites, t0), expected) == expected

    # Every page view is read; some sessions are still open (not closed by the watermark).
    assert open_sessions(client, sites) > 0
    for site in sites:
        for q in ranges(site, t0):
            assert reports(client, q, "agg") == reports(client, q, "raw"), q
    assert_engaged_bounces_known(client, known_site, t0)

    # A page view much later closes every session: the numbers do not move.
    send(settings, [page_view(clock_site, "clock", t0 + RANGE + gap + timedelta(minutes=10))])
    wait_for_watermark(settings, QUERY_NAME, t0 + RANGE + gap)
    assert wait_for(lambda: open_sessions(client, sites), 0) == 0
    for site in sites:
        for q in ranges(site, t0):
            assert reports(client, q, "agg") == reports(client, q, "raw"), q
    assert_engaged_bounces_known(client, known_site, t0)
    engaged = {site: s for site, s in bounce_rates(client, sites, t0).items() if s[0] != s[1]}
    assert engaged, "engagement events turned some one-page sessions into no bounces"

    # The page views behind the watermark, from visitors with no state, are within the allowed
    # lateness: in the rollups themselves as in the archive, none late.
    for q in ranges(late_site, t0):
        assert queries.late_pageviews(client, q) == 0
        assert reports_of(client, q, agg) == reports_of(client, q, raw), q

    # Spark's rollup rows are the backfill's, row for row.
    assert_spark_equals_backfill(settings, sites, t0)


def test_agg_equals_raw_with_a_session_gap_below_one_minute(
    spark: SparkSession,
    tmp_path: object,
    kafka_bootstrap: str,
    clickhouse_endpoint: Endpoint,
    running_queries: list[StreamingQuery],
) -> None:
    settings = isolated_settings(tmp_path / "home", kafka_bootstrap, clickhouse_endpoint, session_gap_s=30)
    site, clock_site = site_names(2)
    t0 = last_midnight() - timedelta(hours=3)
    gap = timedelta(seconds=30)
    rng = random.Random(7)
    events = edge_cases(site, t0, gap)
    for n in range(6):  # bursts of clicks seconds apart, pauses around the 30 s gap
        ts = t0 + timedelta(minutes=rng.uniform(0, 20))
        for _ in range(8):
            events.append(page_view(site, f"clicker-{n}", ts, path=rng.choice(PATHS)))
            ts += timedelta(seconds=rng.choice([2, 10, 29, 30, 31, 45, 90]))
    running_queries.extend(start_queries(spark, settings, [QUERY_NAME]))
    send(settings, sorted(events, key=lambda e: e.ts))
    client = connect(settings)
    whole = queries.StatsQuery(site, t0, t0 + timedelta(hours=1), session_gap_s=30)
    expected = len(events)
    assert wait_for(lambda: queries.aggregate(client, whole, "agg")["pageviews"], expected) == expected
    for q in [whole, queries.StatsQuery(site, t0, t0 + timedelta(minutes=10), session_gap_s=30)]:
        assert reports(client, q, "agg") == reports(client, q, "raw"), q
    assert queries.aggregate(client, whole, "raw")["sessions"] > 6
    send(settings, [page_view(clock_site, "clock", t0 + timedelta(hours=2))])
    wait_for_watermark(settings, QUERY_NAME, t0 + timedelta(hours=1))
    assert reports(client, whole, "agg") == reports(client, whole, "raw")
    assert_spark_equals_backfill(settings, [site], t0, session_gap_s=30)


def test_a_resent_event_counts_once_as_its_first_copy_in_agg_as_in_raw(
    spark: SparkSession, stream_settings: Settings, running_queries: list[StreamingQuery]
) -> None:
    settings = stream_settings
    site, late_site, clock_site = site_names(3)
    t0 = last_midnight() - timedelta(hours=5)
    at = lambda minutes, seconds=0: t0 + timedelta(minutes=minutes, seconds=seconds)  # noqa: E731
    reader = [page_view(site, "reader", at(0), path="/a"), page_view(site, "reader", at(3), path="/b")]
    thrice = page_view(site, "thrice", at(5), path="/docs")
    # 6 s of engaged time, sent three times: counted once, thrice's one page view still bounces.
    thrice_read = engagement_event(site, "thrice", at(5, 30), "/docs", 6_000)
    bounce = page_view(site, "bounce", at(20), path="/landing")
    # Ahead of the watermark after the first round (< 30 min), as a new visitor must be.
    bounce_later = page_view(site, "bounce-later", at(38), path="/landing")
    # The copy later in the log has the earlier ts: the first copy (7:50) counts, so the session
    # runs 7:30-7:50 from /y to /x, not 7:10-7:30 from /x to /y.
    reordered = [
        page_view(site, "reordered", at(7, 50), path="/x"),
        page_view(site, "reordered", at(7, 30), path="/y"),
    ]
    late = page_view(late_site, "late", at(1))
    # First round, one micro-batch: copies next to their originals.
    first_round = [
        *visits([site], t0, timedelta(minutes=30)),
        reader[0],
        reader[1],
        resent(reader[1]),  # a server-side sender's retry: same ts
        thrice,
        resent(thrice),
        thrice_read,
        resent(thrice_read),
        bounce,
        resent(bounce, later=timedelta(seconds=40)),  # a browser's retry: ts = its receive time
        *reordered,
        resent(reordered[0], later=-timedelta(seconds=40)),
    ]
    # Second round, after a restart (so, one micro-batch on the state restored from the
    # checkpoint): copies of page views counted in the first, a new page view, and a page view
    # behind the watermark twice (counted once, not twice).
    second_round = [
        resent(reader[0]),
        resent(thrice),
        resent(thrice_read),
        page_view(site, "reader", at(40), path="/c"),
        bounce_later,  # new, with its copy behind it in the same batch ...
        resent(bounce_later, later=timedelta(seconds=40)),
        resent(bounce, later=timedelta(seconds=40)),  # ... and a copy of a counted one
        late,
        resent(late),
    ]
    truth = first_copies(first_round + second_round)
    assert len(truth) < len(first_round) + len(second_round)
    archive(settings, truth)

    produce(settings, first_round)
    [query] = start_queries(spark, settings, [QUERY_NAME])
    running_queries.append(query)
    wait_for_activity(settings, max(e.ts for e in first_round))
    stop_gracefully(query)
    produce(settings, second_round)
    running_queries.extend(start_queries(spark, settings, [QUERY_NAME]))
    wait_for_activity(settings, max(e.ts for e in second_round))

    client = connect(settings)
    q = queries.StatsQuery(site, t0, t0 + RANGE)
    distinct = len([e for e in truth if e.site == site and e.name == "pageview"])
    assert queries.aggregate(client, q, "agg")["pageviews"] == distinct
    assert queries.aggregate(client, q, "raw")["pageviews"] == distinct
    # Page views only: an engagement event is no page view for the rate limits either.
    per_client = Counter(e.ip_hash for e in truth if e.site == site and e.name == "pageview")
    assert panes(settings, {e.ip_hash for e in truth}) == dict(per_client)
    bounces = [
        s for s in queries.sessions(client, q, 1000, "agg") if s.visitor_id.startswith(("bounce", "thrice"))
    ]
    assert [(s.pageviews, s.duration_s, s.is_bounce) for s in bounces] == [(1, 0.0, True)] * 3
    [session] = [s for s in queries.sessions(client, q, 1000, "agg") if s.visitor_id == "reordered"]
    assert (session.start.replace(tzinfo=UTC), session.entry_path, session.exit_path) == (
        at(7, 30),
        "/y",
        "/x",
    )
    for q in ranges(site, t0):
        assert reports(client, q, "agg") == reports(client, q, "raw"), q

    # The page view behind the watermark (within the allowed lateness) is in the archive once
    # and in the rollups once: its copy is dropped, nothing is late.
    q_late = queries.StatsQuery(late_site, t0, t0 + RANGE)
    assert queries.late_pageviews(client, q_late) == 0
    assert queries.aggregate(client, q_late, "raw")["pageviews"] == 1
    assert agg.aggregate(client, q_late)["pageviews"] == 1

    # Once the watermark has closed every session, the numbers still agree.
    send(settings, [page_view(clock_site, "clock", t0 + RANGE + timedelta(hours=1))])
    wait_for_watermark(settings, QUERY_NAME, t0 + RANGE)
    assert wait_for(lambda: open_sessions(client, [site]), 0) == 0
    for q in ranges(site, t0):
        assert reports(client, q, "agg") == reports(client, q, "raw"), q


# --- traffic ------------------------------------------------------------------------------


def visits(sites: list[str], t0: datetime, span: timedelta, engaged: bool = False) -> list[PageViewEvent]:
    """Visitors coming back in sessions: think times from seconds to beyond the session gap;
    `engaged`: after most page views, engagement events on it, from a second to 35 minutes
    later (past the 30 min session gap sometimes) but within the span, of 0 to 40 s each."""
    rng = random.Random(t0.timestamp())
    events = []
    for site in sites:
        for n in range(12):
            visitor, attributes = f"visitor-{n}", visitor_attributes(rng)
            ts = t0 + timedelta(seconds=rng.uniform(0, span.total_seconds() - 1200))
            while ts < t0 + span:
                attributes["referrer_domain"] = rng.choice(["", "google.com", attributes["referrer_domain"]])
                # Session dimensions take the first page view's value, event dimensions each one's.
                attributes["utm_content"] = rng.choice(["", "banner", attributes["utm_content"]])
                attributes["language"] = rng.choice(["en-US", attributes["language"]])
                attributes["screen_width"] = rng.choice([0, 800, attributes["screen_width"]])
                path = rng.choice(PATHS)
                events.append(page_view(site, visitor, ts, path=path, **attributes))
                for _ in range(rng.choice([0, 1, 1, 2]) if engaged else 0):
                    later = timedelta(
                        seconds=rng.choice([1, 5, 60, 600, 1790, 2100]), milliseconds=rng.randrange(999)
                    )
                    engaged_ms = rng.choice([0, 3_000, 6_000, 9_999, 10_000, 40_000])
                    # Within the span: an engagement event moves the watermark as any event
                    # does, and one past the span would close every session before the test
                    # looks at open ones.
                    if ts + later < t0 + span:
                        events.append(engagement_event(site, visitor, ts + later, path, engaged_ms))
                think = rng.choices([(5, 180), (300, 1500), (1860, 3000)], weights=[6, 3, 1])[0]
                if rng.random() < 0.25:
                    break
                ts += timedelta(seconds=rng.uniform(*think))
    return sorted(events, key=lambda e: e.ts)


def edge_cases(site: str, t0: datetime, gap: timedelta) -> list[PageViewEvent]:
    """Gaps of gap - 1 s (one session) and gap + 1 s (two); two page views in one millisecond;
    a session that crosses midnight when t0 is an hour before one; screen widths past UInt16."""
    second = timedelta(seconds=1)
    at = t0 + timedelta(minutes=5)
    views = [
        page_view(site, "gap-minus", at, path="/a"),
        page_view(site, "gap-minus", at + gap - second, path="/b"),
        page_view(site, "gap-plus", at, path="/a"),
        page_view(site, "gap-plus", at + gap + second, path="/b"),
        page_view(site, "same-ms", at, path="/one"),
        page_view(site, "same-ms", at, path="/two"),
        # Widths past UInt16 (the collector takes up to 100,000): classed as the archive keeps them.
        page_view(site, "wide", at, path="/wide", screen_width=66_000),
        page_view(site, "wide", at + second, path="/wide", screen_width=100_000),
    ]
    midnight = datetime.combine((t0 + timedelta(hours=1)).date(), time(), UTC)
    if timedelta(0) < midnight - t0 <= timedelta(hours=1):
        views += [
            page_view(site, "night-owl", midnight - timedelta(minutes=3), path="/before"),
            page_view(site, "night-owl", midnight + timedelta(minutes=2), path="/after"),
        ]
    return views


def send_in_rounds(
    settings: Settings, events: list[PageViewEvent], t0: datetime, span: timedelta, late_site: str
) -> int:
    """In rounds of event time; every third page view of a round's last 90 s is held back to the
    next round (out of order, within the watermark); in the second round, page views far behind
    the watermark for `late_site`. Returns how many were held back."""
    held_back: list[PageViewEvent] = []
    out_of_order = 0
    rounds = int(span / ROUND) + 1
    for n in range(rounds):
        start = t0 + n * ROUND
        this_round = [e for e in events if start <= e.ts < start + ROUND]
        stragglers = [e for e in this_round if e.ts >= start + ROUND - timedelta(seconds=90)][::3]
        send(settings, held_back)
        on_time = [e for e in this_round if e not in stragglers]
        send(settings, on_time)
        held_back = stragglers
        out_of_order += len(stragglers)
        if on_time:
            wait_for_activity(settings, max(e.ts for e in on_time))
        if n == 1:
            late = [
                page_view(late_site, f"late-{i}", t0 + timedelta(minutes=10, seconds=i)) for i in range(4)
            ]
            send(settings, late)
    send(settings, held_back)
    return out_of_order


def send(settings: Settings, events: list[PageViewEvent]) -> None:
    """To the log, and to the raw archive as the archiver writes them."""
    if not events:
        return
    produce(settings, events)
    archive(settings, events)


def archive(settings: Settings, events: list[PageViewEvent]) -> None:
    """As the archiver writes them (JSONEachRow lines), so values the archive's column types
    change (a screen width past UInt16) are stored as the archiver stores them."""
    insert_rows(connect(settings), [archive_row(e, SYNTHETIC_PARTITION, i) for i, e in enumerate(events)])


def resent(event: PageViewEvent, later: timedelta = timedelta(0)) -> PageViewEvent:
    """A copy of `event` sent again (same event_id); a browser's copy has a later ts, its
    receive time."""
    return event.model_copy(update={"ts": event.ts + later, "received_at": event.received_at + later})


def first_copies(log: list[PageViewEvent]) -> list[PageViewEvent]:
    """What the archive keeps of a log: the first copy of each event_id."""
    first: dict[object, PageViewEvent] = {}
    for event in log:
        first.setdefault(event.event_id, event)
    return list(first.values())


def wait_for_activity(settings: Settings, newest: datetime) -> None:
    """Until the query has read up to the event time `newest` (its watermark shows it)."""
    watermark = newest.replace(microsecond=newest.microsecond // 1000 * 1000) - timedelta(
        seconds=settings.watermark_s
    )
    assert wait_for_watermark(settings, QUERY_NAME, watermark) >= watermark


# --- the reports --------------------------------------------------------------------------


def ranges(site: str, t0: datetime) -> list[queries.StatsQuery]:
    """t0 is 23:00: the whole traffic (a day's tail and the next day's head), the two whole
    days, one hour, a segment inside the first hour, and an hour straddling midnight."""
    day = datetime.combine(t0.date(), time(), UTC)
    return [
        queries.StatsQuery(site, t0, t0 + RANGE),
        queries.StatsQuery(site, day, day + timedelta(days=2)),
        queries.StatsQuery(site, t0, t0 + timedelta(hours=1)),
        queries.StatsQuery(site, t0 + timedelta(minutes=10), t0 + timedelta(minutes=50)),
        queries.StatsQuery(site, t0 + timedelta(minutes=30), t0 + timedelta(minutes=90)),
    ]


def reports_of(client: object, q: queries.StatsQuery, source: ModuleType) -> dict[str, object]:
    """The reports of one source module, without the query layer's choice (agg: the rollups)."""
    found: dict[str, object] = {
        "aggregate": source.aggregate(client, q),
        "minutes": source.timeseries(client, q, "minute"),
        "hours": source.timeseries(client, q, "hour"),
        "days": source.timeseries(client, q, "day"),
        "sessions": source.sessions(client, q, 1000),
    }
    for by in queries.DIMENSIONS:
        found[f"by {by}"] = source.breakdown(client, q, by, 100)
    return found


def reports(client: object, q: queries.StatsQuery, source: queries.Source) -> dict[str, object]:
    found: dict[str, object] = {
        "aggregate": queries.aggregate(client, q, source),
        "minutes": queries.timeseries(client, q, "minute", source),
        "hours": queries.timeseries(client, q, "hour", source),
        "days": queries.timeseries(client, q, "day", source),
        "sessions": queries.sessions(client, q, 1000, source),
    }
    for by in queries.DIMENSIONS:
        found[f"by {by}"] = queries.breakdown(client, q, by, 100, source)
    return found


def assert_engaged_bounces_known(client: object, site: str, t0: datetime) -> None:
    """engaged_bounce_visits' sessions and bounces, on both sources; the engaged ms written."""
    q = queries.StatsQuery(site, t0, t0 + RANGE)
    answer = ENGAGED_BOUNCE_ANSWER
    for source in ("agg", "raw"):
        found = queries.aggregate(client, q, source)
        assert (found["pageviews"], found["visitors"], found["sessions"]) == (
            answer["pageviews"],
            answer["sessions"],
            answer["sessions"],
        ), source
        assert found["bounce_rate"] == round(answer["bounces"] / answer["sessions"], 4), source
    engaged = client.query(
        "SELECT visitor_id, engaged_ms FROM sessions FINAL WHERE site = {site:String} AND NOT is_deleted",
        parameters={"site": site},
    ).result_rows
    assert dict(engaged)["read-6s-twice"] == 12_000
    assert dict(engaged)["read-after-the-end"] == 0


def bounce_rates(client: object, sites: list[str], t0: datetime) -> dict[str, tuple[float, float]]:
    """Per site: (the bounce rate, the share of its sessions with one page view)."""
    rates = {}
    for site in sites:
        q = queries.StatsQuery(site, t0, t0 + RANGE)
        sessions = queries.sessions(client, q, 1000, "agg")
        one_page = sum(s.pageviews == 1 for s in sessions) / len(sessions)
        rates[site] = (queries.aggregate(client, q, "agg")["bounce_rate"], round(one_page, 4))
    return rates


def total_agg_pageviews(client: object, sites: list[str], t0: datetime) -> int:
    return sum(
        queries.aggregate(client, queries.StatsQuery(s, t0, t0 + RANGE), "agg")["pageviews"] for s in sites
    )


def panes(settings: Settings, ip_hashes: set[str]) -> dict[str, int]:
    """Page views per client in the rate-limit panes."""
    rows = connect(settings).query(
        "SELECT ip_hash, sum(pageviews) FROM rate_limit_counters "
        "WHERE ip_hash IN {ip_hashes:Array(String)} GROUP BY ip_hash HAVING sum(pageviews) != 0",
        parameters={"ip_hashes": sorted(ip_hashes)},
    )
    return {ip_hash: int(count) for ip_hash, count in rows.result_rows}


def open_sessions(client: object, sites: list[str]) -> int:
    """Sessions the watermark has not closed yet (newest version of each, tombstones aside)."""
    rows = client.query(
        "SELECT countIf(NOT is_closed) FROM sessions FINAL "
        "WHERE site IN {sites:Array(String)} AND NOT is_deleted",
        parameters={"sites": sites},
    )
    return int(rows.result_rows[0][0])


# --- Spark against the backfill -----------------------------------------------------------

_ROLLUP_ROWS = """
SELECT site, dimension, bucket, value, {sums}
FROM {table} WHERE site IN {{sites:Array(String)}}
GROUP BY site, dimension, bucket, value
HAVING {nonzero}
ORDER BY site, dimension, bucket, value
"""
_METRICS = {
    ROLLUP_MINUTE: (
        "pageviews",
        "visitors",
        "hour_first_visitors",
        "day_first_visitors",
        "day_last_visitors",
    ),
    ROLLUP_HOUR: ("pageviews", "visitors", "day_first_visitors", "day_last_visitors"),
    ROLLUP_DAY: ("pageviews", "visitors"),
}
_SESSION_METRICS = ("sessions", "bounces", "duration_ms")


def rollup_rows(settings: Settings, table: str, sites: list[str]) -> list[tuple]:
    metrics = (*_METRICS[table], *_SESSION_METRICS)
    sql = _ROLLUP_ROWS.format(
        table=table,
        sums=", ".join(f"sum({m})" for m in metrics),
        nonzero=" OR ".join(f"sum({m}) != 0" for m in metrics),
    )
    return connect(settings).query(sql, parameters={"sites": sites}).result_rows


def assert_spark_equals_backfill(
    settings: Settings, sites: list[str], t0: datetime, session_gap_s: int | None = None
) -> None:
    """Backfill the same sites from the archive into a database of their own; compare."""
    backfilled = settings.model_copy(
        update={"clickhouse_database": settings.clickhouse_database + "_backfill"}
    )
    client = connect(settings)
    client.command(f"CREATE DATABASE {backfilled.clickhouse_database}")
    for table in (ROLLUP_MINUTE, ROLLUP_HOUR, ROLLUP_DAY, "sessions", "events"):
        client.command(f"CREATE TABLE {backfilled.clickhouse_database}.{table} AS {table}")
    client.command(f"INSERT INTO {backfilled.clickhouse_database}.events SELECT * FROM events")
    into = connect(backfilled)
    first_day = t0.date() - timedelta(days=1)
    for site in sites:
        backfill_rollups(
            into, site, first_day, first_day + timedelta(days=4),
            session_gap_s=session_gap_s or settings.session_gap_s,
        )  # fmt: skip
    for table in (ROLLUP_MINUTE, ROLLUP_HOUR, ROLLUP_DAY):
        spark_rows = rollup_rows(settings, table, sites)
        assert spark_rows, table
        assert spark_rows == rollup_rows(backfilled, table, sites), table
    # And its sessions, column for column: the entry page view's UTMs, screen size class and
    # language too (migration 0062), which the traffic varies within a session, and the pages
    # each viewed in order of first view (migration 0063), sessions revisiting a page included,
    # and each one's journey, consecutive repeats folded (migration 0071).
    spark_sessions = session_rows(settings, sites)
    assert spark_sessions, "sessions"
    assert spark_sessions == session_rows(backfilled, sites)


_SESSION_COLUMNS = (
    "site", "session_start", "visitor_id", "session_end", "duration_s", "pageviews", "is_bounce",
    "engaged_ms", *SESSION_ATTRIBUTES, SESSION_PATHS, SESSION_JOURNEY,
)  # fmt: skip


def session_rows(settings: Settings, sites: list[str]) -> list[tuple]:
    """Each session's newest version (tombstones aside), every column the two writers fill."""
    sql = (
        f"SELECT {', '.join(_SESSION_COLUMNS)} FROM sessions FINAL "
        "WHERE site IN {sites:Array(String)} AND NOT is_deleted ORDER BY site, session_start, visitor_id"
    )
    return connect(settings).query(sql, parameters={"sites": sites}).result_rows
