"""Late events (issue 30) on the real collector, Kafka, archiver, stream jobs (Spark) and
ClickHouse: a batch sender posts to POST /api/events events stamped 5 minutes, 2 hours and 30
hours ago, for new visitors and for visitors the stream jobs already counted, after the stream
has moved on (its watermark is 120 s behind the newest event). Within the allowed lateness (72
h) the rollups and session rows count them exactly as the archive does — a late page view
extends a session the live watermark had closed, merges two sessions into one, turns a bounce
into no bounce, opens a session on a day already shown — for every report and breakdown,
sessions and bounce included; the stream jobs restart between the two batches. An event 4 days
old is late: the rollups leave it out, late_events records it, and the default (agg) answer of
the query layer and of /api/v1 and /api/v2 includes it (the archive answers that range:
contract.LATE_EVENTS_RULE). `tally verify --site` lists such a day as explained and exits 0;
a rollup row that is really wrong makes it exit 1.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta
from types import ModuleType

import pytest
from flask.testing import FlaskClient
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery
from starlette.testclient import TestClient

from archiver.audit import LATE, verify
from collector.app import build_app as build_collector
from collector.app import production_parts
from dashboard.app import build_app as build_dashboard
from storage import queries
from storage.client import connect
from storage.queries import agg, raw
from storage.sites import add_site
from stream_jobs.activity import QUERY_NAME
from stream_jobs.app import stop_gracefully
from stream_jobs.queries import start_queries
from tally.clock import utc_now
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.clickhouse import Endpoint
from tests.fixtures.spark import isolated_settings, site_names, wait_for, wait_for_watermark
from tests.integration.test_provenance import archive, auth

pytestmark = pytest.mark.integration

UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36"
PATHS = ("/", "/pricing", "/docs", "/blog/late")
REFERRERS = ("", "https://news.example.org/", "https://search.example.net/?q=late")


@pytest.fixture
def settings(tmp_path: object, kafka_bootstrap: str, clickhouse_endpoint: Endpoint) -> Settings:
    """Isolated settings with the defaults that matter here: 72 h allowed lateness, 30 min gap."""
    found = isolated_settings(tmp_path / "home", kafka_bootstrap, clickhouse_endpoint)
    assert found.allowed_lateness_s == 259_200 and found.watermark_s == 120
    return found


@pytest.fixture
def collector(settings: Settings) -> Iterator[TestClient]:
    with TestClient(
        build_collector(settings, production_parts(settings)), client=("127.0.0.1", 40000)
    ) as client:
        yield client


def event(site: str, ts: datetime, ip: str, path: str = "/", referrer: str = "") -> dict[str, object]:
    """One page view as a server-side sender posts it: its own time and its visitor's IP."""
    return {
        "site": site,
        "url": f"https://{site}{path}",
        "referrer": referrer,
        "ts": ts.isoformat(),
        "ip": ip,
        "user_agent": UA,
        "screen_width": 1280,
    }


def post(collector: TestClient, settings: Settings, batch: list[dict[str, object]]) -> None:
    for start in range(0, len(batch), 250):  # 250-event chunks, as a sender flushing its queue
        chunk = batch[start : start + 250]
        answer = collector.post(
            "/api/events", json=chunk, headers={"Authorization": f"Bearer {settings.resolved_ingest_key()}"}
        )
        assert answer.status_code == 202, answer.text
        assert answer.json()["accepted"] == len(chunk)


def new_visitors(site: str, at: datetime, count: int, prefix: str) -> list[dict[str, object]]:
    """`count` visitors never seen before, 1 to 3 page views each, the newest at `at` or up to 6
    min before, the others 4 min (one session) or 33 min (two) before the one after them, on
    varied pages and referrers."""
    views = []
    for n in range(count):
        ip = f"{prefix}.{n + 1}"
        for k in range(1 + n % 3):
            ts = at - timedelta(minutes=n % 7 + k * (4 if n % 2 else 33), seconds=n)
            views.append(event(site, ts, ip, PATHS[(n + k) % len(PATHS)], REFERRERS[n % len(REFERRERS)]))
    return views


def test_events_up_to_72_hours_late_count_exactly_and_older_ones_are_answered_from_the_archive(
    spark: SparkSession,
    settings: Settings,
    collector: TestClient,
    running_queries: list[StreamingQuery],
) -> None:
    site, old_site = site_names(2)
    client = connect(settings)
    for name in (site, old_site):
        add_site(client, name)
    now = utc_now().replace(microsecond=0)
    ago = lambda **delta: now - timedelta(**delta)  # noqa: E731

    # First batch, on time: the visitors the late page views will come back to.
    known = [
        # Read /a and /b 40 and 35 min ago: closed by the live watermark (35 + 30 > 2 min ago).
        event(site, ago(minutes=40), "10.0.0.1", "/a"),
        event(site, ago(minutes=35), "10.0.0.1", "/b"),
        # Two sessions 40 min apart, 2 h ago; the late page view between them merges them.
        event(site, ago(hours=2, minutes=20), "10.0.0.2", "/m1", REFERRERS[1]),
        event(site, ago(hours=1, minutes=40), "10.0.0.2", "/m2"),
        # A bounce 2 h ago, which a late second page view makes no bounce.
        event(site, ago(hours=2, minutes=5), "10.0.0.3", "/landing", REFERRERS[2]),
        # A session 32 h ago, on a day the dashboard has shown; a late one opens a second.
        event(site, ago(hours=32), "10.0.0.4", "/d1"),
        event(old_site, ago(minutes=1), "10.0.1.1", "/"),
        event(site, ago(seconds=30), "10.0.0.9", "/now"),  # the newest: the watermark follows it
    ]
    post(collector, settings, known)
    [query] = start_queries(spark, settings, [QUERY_NAME])
    running_queries.append(query)
    wait_for_watermark(settings, QUERY_NAME, ago(seconds=30 + settings.watermark_s))
    assert wait_for(lambda: agg.aggregate(client, day_range(site, now, 3))["pageviews"], 7) == 7

    # A restart between the two batches: the state comes back from the checkpoint.
    stop_gracefully(query)
    running_queries.remove(query)

    # Second batch: everything behind the watermark.
    late = [
        event(site, ago(minutes=6), "10.0.0.1", "/c"),  # extends the closed session across the watermark
        event(site, ago(hours=2), "10.0.0.2", "/m3"),  # 20 min after /m1, 20 min before /m2: one session
        event(site, ago(hours=1, minutes=58), "10.0.0.3", "/next"),  # the bounce is none any more
        event(site, ago(hours=30), "10.0.0.4", "/d2"),  # opens a second session 30 h ago
        *new_visitors(site, ago(minutes=5), 12, "10.1.5"),
        *new_visitors(site, ago(hours=2), 12, "10.2.0"),
        *new_visitors(site, ago(hours=30), 12, "10.30.0"),
        event(old_site, ago(days=4), "10.0.1.2", "/four-days-old"),  # older than the allowed lateness
    ]
    post(collector, settings, late)
    running_queries.extend(start_queries(spark, settings, [QUERY_NAME]))
    archive(settings, len(known) + len(late))
    expected = len(known) + len(late) - 2  # old_site's two are not in `site`
    assert wait_for(lambda: agg.aggregate(client, day_range(site, now, 3))["pageviews"], expected) == expected

    # Within the allowed lateness: nothing late, and the rollups themselves equal the archive.
    for q in site_ranges(site, now):
        assert queries.late_pageviews(client, q) == 0
        assert queries.answered_source(client, q, "agg") == "agg"
        assert reports(client, q, agg) == reports(client, q, raw), q
    by_entry = {s.entry_path: s for s in agg.sessions(client, day_range(site, now, 3), 1000)}
    assert (by_entry["/a"].exit_path, by_entry["/a"].pageviews) == ("/c", 3)
    assert "/m2" not in by_entry and (by_entry["/m1"].exit_path, by_entry["/m1"].pageviews) == ("/m2", 3)
    assert (by_entry["/landing"].pageviews, by_entry["/landing"].is_bounce) == (2, False)
    assert by_entry["/d1"].visitor_id == by_entry["/d2"].visitor_id  # a second session on that day

    # Four days old: late, reported per day, left out of the rollups, in every default answer.
    four_days = day_range(old_site, ago(days=4), 1)
    assert wait_for(lambda: queries.late_pageviews(client, four_days), 1) == 1
    assert agg.aggregate(client, four_days)["pageviews"] == 0
    assert queries.answered_source(client, four_days, "agg") == "raw"
    assert queries.aggregate(client, four_days, "agg") == queries.aggregate(client, four_days, "raw")
    assert queries.aggregate(client, four_days, "agg")["pageviews"] == 1
    api = build_dashboard(settings).server.test_client()
    v1 = stats_v1(api, settings, four_days)
    assert (v1["results"]["pageviews"], v1["meta"]["source"]) == (1, "raw")
    late_meta = v1["meta"]["late_events"]
    day = iso(four_days.start)
    assert late_meta["by_day"] == {day: 1} and set(late_meta["recorded_by_day"][day]) == {"first", "last"}
    assert query_v2(api, settings, old_site, four_days.start) == [1, 1]

    # tally verify: the late day is explained, not wrong; a wrong rollup row is wrong.
    report = verify(settings, fix=False, site=old_site)
    assert [(m.explained, m.late_events) for m in report.mismatches] == [(LATE, 1)]
    assert report.ok, report.lines()
    assert cli_verify(settings, old_site).returncode == 0
    assert verify(settings, fix=False, site=site).mismatches == []
    for table, bucket in (
        ("rollup_minute", "toStartOfMinute"),
        ("rollup_hour", "toStartOfHour"),
        ("rollup_day", "toDate"),
    ):
        client.command(
            f"INSERT INTO {table} (site, dimension, bucket, value, pageviews) "
            f"SELECT {{site:String}}, '', {bucket}({{at:DateTime64(3, 'UTC')}}), '', 5",
            parameters={"site": site, "at": ago(minutes=40)},
        )
    wrong = cli_verify(settings, site)
    assert wrong.returncode == 1 and ": wrong" in wrong.stdout, wrong.stdout


# --- helpers ------------------------------------------------------------------------------


def day_range(site: str, moment: datetime, days: int) -> queries.StatsQuery:
    """The `days` UTC days ending with the one holding `moment`."""
    midnight = datetime.combine(moment.date(), time(), UTC)
    return queries.StatsQuery(site, midnight - timedelta(days=days - 1), midnight + timedelta(days=1))


def site_ranges(site: str, now: datetime) -> list[queries.StatsQuery]:
    """The three days the traffic touches, each day of it, and the three hours up to this one."""
    midnight = datetime.combine(now.date(), time(), UTC)
    days = [
        queries.StatsQuery(site, midnight - timedelta(days=n), midnight - timedelta(days=n - 1))
        for n in (0, 1, 2)
    ]
    hour = now.replace(minute=0, second=0)
    return [
        day_range(site, now, 3),
        *days,
        queries.StatsQuery(site, hour - timedelta(hours=2), hour + timedelta(hours=1)),
    ]


def reports(client: object, q: queries.StatsQuery, source: ModuleType) -> dict[str, object]:
    """Every report of one source module (agg: the rollups themselves, whatever would answer)."""
    found: dict[str, object] = {
        "aggregate": source.aggregate(client, q),
        "hours": source.timeseries(client, q, "hour"),
        "days": source.timeseries(client, q, "day"),
        "session hours": source.session_timeseries(client, q, "hour"),
        "sessions": sorted(source.sessions(client, q, 1000), key=lambda s: (s.start, s.visitor_id)),
    }
    if q.end - q.start <= timedelta(hours=3):
        found["minutes"] = source.timeseries(client, q, "minute")
    for by in queries.DIMENSIONS:
        found[f"by {by}"] = source.breakdown(client, q, by, 100)
    for by in queries.SESSION_DIMENSIONS:
        found[f"sessions by {by}"] = source.session_breakdown(client, q, by, 100)
    return found


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def stats_v1(api: FlaskClient, settings: Settings, q: queries.StatsQuery) -> dict:
    """/api/v1/stats/aggregate with meta, the default source."""
    response = api.get(
        "/api/v1/stats/aggregate",
        query_string={"site": q.site, "from": iso(q.start), "to": iso(q.end), "meta": "true"},
        headers=auth(settings),
    )
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def query_v2(api: FlaskClient, settings: Settings, site: str, day: datetime) -> list[int]:
    """Plausible's POST /api/v2/query for one day: [visitors, pageviews]."""
    response = api.post(
        "/api/v2/query",
        json={"site_id": site, "metrics": ["visitors", "pageviews"], "date_range": [f"{day:%Y-%m-%d}"] * 2},
        headers=auth(settings),
    )
    assert response.status_code == 200, response.get_json()
    [row] = response.get_json()["results"]
    return row["metrics"]


def cli_verify(settings: Settings, site: str) -> subprocess.CompletedProcess[str]:
    return run_tally(os.environ | settings.environment(), "verify", "--no-repair", "--site", site)
