"""Sessions from the activity query: gaps, bounces, entry/exit pages, durations, attribution
(the first page view's: source, UTMs, screen size class, language), the distinct pages a visit
viewed in order of first view (`paths`, migration 0063), a late page view that bridges two
sessions (the two rows give way to one, with a tombstone, its paths the union), open sessions
visible before they close, closed ones marked so; with no allowed lateness, a page view behind
the watermark for a closed session is late.

One run of the activity query over one topic; the expected sessions are computed here from
the events produced, by the definition (gaps <= session gap).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from storage import queries
from storage.client import connect
from storage.queries.contract import SCREEN_SIZE_WIDEST, SCREEN_SIZES
from stream_jobs.activity import QUERY_NAME
from stream_jobs.queries import start_queries
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.events import page_view
from tests.fixtures.spark import minutes_ago, produce, site_names, wait_for, wait_for_watermark

pytestmark = pytest.mark.integration

GAP = timedelta(seconds=1800)
# The attribution and client of a visit's first page view, and of a later one, differing in all.
READER_ENTRY = dict(utm_source="hn", utm_content="hero", utm_term="seo", screen_width=400, language="fr")
READER_NEXT = dict(utm_source="x", utm_content="footer", utm_term="ads", screen_width=1600, language="en")
SessionKey = tuple[str, str, datetime]  # site, visitor, start
Session = dict[str, object]


def test_sessions_follow_the_gap_rule_and_close_once_the_watermark_passes(
    spark: SparkSession, stream_settings_without_lateness: Settings, running_queries: list[StreamingQuery]
) -> None:
    # No allowed lateness, so that the last page view (5 h behind) is late: with the default
    # 72 h it would extend the closed session (tests/integration/test_late_events.py).
    stream_settings = stream_settings_without_lateness
    site, other_site, clock_site = site_names(3)
    t = minutes_ago(6 * 60)
    at = lambda minutes, ms=0: t + timedelta(minutes=minutes, milliseconds=ms)  # noqa: E731
    first_round = [
        # one page view: a bounce, duration 0
        page_view(site, "bounce", at(0), path="/landing", referrer_domain="google.com", country="FR"),
        # three page views, gaps of 10 and 29 min: one session; attribution, screen size class
        # and language of the first (migration 0062)
        page_view(site, "reader", at(1), path="/", referrer_domain="news.ycombinator.com", **READER_ENTRY),
        page_view(site, "reader", at(11), path="/blog", referrer_domain="google.com", **READER_NEXT),
        # a gap of exactly the session gap continues the session; 1 ms more starts a new one
        page_view(site, "exact-gap", at(1), path="/a"),
        page_view(site, "exact-gap", at(31), path="/b"),
        page_view(site, "just-over", at(1), path="/a"),
        page_view(site, "just-over", at(31, 1), path="/b"),
        # / then /a then / then /b: paths ['/', '/a', '/b'] (migration 0063)
        page_view(site, "wanderer", at(2), path="/"),
        page_view(site, "wanderer", at(3), path="/a"),
        page_view(site, "wanderer", at(4), path="/"),
        page_view(site, "wanderer", at(5), path="/b"),
        # over 30 min apart: two sessions, until a late page view in between arrives (below);
        # the second views /first again, so the merged visit's paths hold it once, first
        page_view(site, "bridged", at(0), path="/first"),
        page_view(site, "bridged", at(30, 500), path="/first"),
        page_view(site, "bridged", at(31), path="/last"),
        # the same visitor id on another site is another visitor
        page_view(other_site, "reader", at(3), path="/elsewhere", device="mobile"),
    ]
    produce(stream_settings, first_round)
    running_queries.extend(start_queries(spark, stream_settings, [QUERY_NAME]))
    # Newest event time 31:00.001: the watermark (2 min behind) leaves the first "bridged"
    # session (window until 30:00) open.
    wait_for_watermark(
        stream_settings, QUERY_NAME, at(31, 1) - timedelta(seconds=stream_settings.watermark_s)
    )

    # Behind the newest event time, but not behind the watermark: it is merged.
    second_round = [
        page_view(site, "bridged", at(15), path="/middle"),
        page_view(site, "reader", at(40), path="/pricing", screen_width=1000),
        page_view(site, "returning", at(100), path="/"),
        page_view(site, "returning", at(105), path="/docs"),
        page_view(site, "returning", at(200), path="/again"),
    ]
    produce(stream_settings, second_round)
    events = first_round + second_round
    expected = expected_sessions(events)
    assert expected[(site, "wanderer", at(2))]["paths"] == ["/", "/a", "/b"]
    assert expected[(site, "wanderer", at(2))]["journey"] == ["/", "/a", "/", "/b"]
    assert expected[(site, "bridged", at(0))]["paths"] == ["/first", "/middle", "/last"]
    assert expected[(site, "bridged", at(0))]["journey"] == ["/first", "/middle", "/first", "/last"]

    # Spark has closed the sessions that ended more than a gap before its watermark (200 min
    # - 2); the open one ("returning" at 200) is in the table too, not yet closed.
    q = queries.StatsQuery(site, t - timedelta(hours=1), t + timedelta(hours=5))
    site_expected = [s for s in expected.values() if s["site"] == site]
    assert wait_for(lambda: agg_sessions(stream_settings, q), sorted_rows(site_expected)) == sorted_rows(
        site_expected
    )

    assert open_sessions(stream_settings, site) > 0
    # The late page view at 15 merged "bridged"'s two sessions: the second one's row is a
    # tombstone now, so the table holds exactly the expected sessions.
    assert stored_sessions(stream_settings, [site, other_site]) == expected

    # A page view far later closes them all; then they are final.
    produce(stream_settings, [page_view(clock_site, "clock", at(300))])
    assert wait_for(lambda: open_sessions(stream_settings, site), 0) == 0
    assert stored_sessions(stream_settings, [site, other_site]) == expected
    assert agg_sessions(stream_settings, q) == sorted_rows(site_expected)

    # Now a page view behind the watermark for a closed session: counted late, not merged.
    late = page_view(site, "reader", at(20), path="/late")
    produce(stream_settings, [late])
    assert wait_for(lambda: late_sessions_events(stream_settings, site), 1) == 1
    assert stored_sessions(stream_settings, [site, other_site]) == expected


# --- the definition, independently --------------------------------------------------------


def expected_sessions(events: list[PageViewEvent]) -> dict[SessionKey, Session]:
    by_visitor: defaultdict[tuple[str, str], list[PageViewEvent]] = defaultdict(list)
    for e in events:
        by_visitor[(e.site, e.visitor_id)].append(e)
    sessions: dict[SessionKey, Session] = {}
    for (site, visitor), page_views in by_visitor.items():
        ordered = sorted(page_views, key=lambda e: (e.ts, str(e.event_id)))
        current = [ordered[0]]
        for view in ordered[1:]:
            if view.ts - current[-1].ts > GAP:
                sessions.update(_session(site, visitor, current))
                current = []
            current.append(view)
        sessions.update(_session(site, visitor, current))
    return sessions


def _session(site: str, visitor: str, page_views: list[PageViewEvent]) -> dict[SessionKey, Session]:
    first, last = page_views[0], page_views[-1]
    return {
        (site, visitor, first.ts): {
            "site": site,
            "visitor_id": visitor,
            "start": first.ts,
            "end": last.ts,
            "duration_s": (last.ts - first.ts).total_seconds(),
            "pageviews": len(page_views),
            "is_bounce": len(page_views) == 1,
            "entry_path": first.path,
            "exit_path": last.path,
            "referrer_domain": first.referrer_domain,
            "utm_source": first.utm_source,
            "country": first.country,
            "device": first.device,
            "utm_content": first.utm_content,
            "utm_term": first.utm_term,
            "screen_size": screen_size(first.screen_width),
            "language": first.language,
            "paths": list(dict.fromkeys(view.path for view in page_views)),
            "journey": [
                view.path
                for i, view in enumerate(page_views)
                if i == 0 or view.path != page_views[i - 1].path
            ],
        }
    }


def screen_size(width: int) -> str:
    """The class of a screen width, by Plausible's thresholds (stats/catalogue.py SCREEN_SIZES)."""
    if width == 0:
        return ""
    return next((name for name, below in SCREEN_SIZES if width < below), SCREEN_SIZE_WIDEST)


def sorted_rows(sessions: list[Session]) -> list[tuple]:
    return sorted(
        (
            s["visitor_id"],
            s["start"],
            s["end"],
            s["pageviews"],
            s["entry_path"],
            s["exit_path"],
            s["is_bounce"],
        )
        for s in sessions
    )


# --- reading back -------------------------------------------------------------------------


def stored_sessions(settings: Settings, sites: list[str]) -> dict[SessionKey, Session]:
    rows = (
        connect(settings)
        .query(
            "SELECT site, visitor_id, session_start AS start, session_end AS end, duration_s, pageviews, "
            "is_bounce, entry_path, exit_path, referrer_domain, utm_source, country, device, "
            "utm_content, utm_term, screen_size, language, paths, journey "
            "FROM sessions FINAL WHERE site IN {sites:Array(String)} AND NOT is_deleted",
            parameters={"sites": sites},
        )
        .named_results()
    )
    found = {}
    for row in rows:
        row["start"], row["end"] = row["start"].replace(tzinfo=UTC), row["end"].replace(tzinfo=UTC)
        row["is_bounce"] = bool(row["is_bounce"])
        found[(row["site"], row["visitor_id"], row["start"])] = row
    return found


def open_sessions(settings: Settings, site: str) -> int:
    rows = connect(settings).query(
        "SELECT countIf(NOT is_closed) FROM sessions FINAL WHERE site = {site:String} AND NOT is_deleted",
        parameters={"site": site},
    )
    return int(rows.result_rows[0][0])


def agg_sessions(settings: Settings, q: queries.StatsQuery) -> list[tuple]:
    rows = queries.sessions(connect(settings), q, limit=1000, source="agg")
    return sorted(
        (
            r.visitor_id,
            r.start.replace(tzinfo=UTC),
            r.end.replace(tzinfo=UTC),
            r.pageviews,
            r.entry_path,
            r.exit_path,
            bool(r.is_bounce),
        )
        for r in rows
    )


def late_sessions_events(settings: Settings, site: str) -> int:
    rows = (
        connect(settings)
        .query(
            "SELECT sum(events) FROM late_events FINAL "
            "WHERE query_name = {query:String} AND site = {site:String}",
            parameters={"query": QUERY_NAME, "site": site},
        )
        .result_rows
    )
    return int(rows[0][0])
