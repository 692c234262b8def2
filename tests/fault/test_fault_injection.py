"""Break things on purpose while traffic flows: SIGKILL the collector, the archiver and the
Spark driver (the two consumers of the log at one moment: neither needs the other), and the
Kafka broker in turn, and take the ClickHouse endpoint away for a while.
Afterwards every event that got a 202 is in the archive exactly once, the Spark-derived
counts equal the archive for every minute and equal what `tally replay` rebuilds from the
log, and every component is healthy again — supervisord restarted them; nobody repaired
anything by hand."""

from __future__ import annotations

import time

import pytest

from ops.local import supervisor
from storage.client import connect
from tally.settings import Settings
from tests.fault.scenario import (
    Fault,
    Traffic,
    component_pid,
    inject,
    kill_and_wait_for_recovery,
    recovered,
    sigkill_tree,
    statuses,
    verify_clean,
)
from tests.fixtures.archive import archived, archived_by_path
from tests.fixtures.local_stack import LocalStack, eventually

pytestmark = pytest.mark.fault

SITE = "fault.example.com"
RATE = 40


#: How long the store is away: many times every interval at which a component touches it (the
#: archiver's flush and Spark's trigger, 1 s; the collector's registry refresh, 2 s), so each
#: meets it gone, retries or fails and is restarted. (It was 30 s: what the test checks after it
#: is the same, and the restarts after a longer outage only wait longer.)
CLICKHOUSE_AWAY_S = 10


def clickhouse_away(stack: LocalStack, seconds: float) -> None:
    rpc = supervisor.rpc(stack.settings)
    rpc.supervisor.stopProcess("clickhouse", True)
    time.sleep(seconds)
    rpc.supervisor.startProcess("clickhouse", True)
    recovered(stack, "every component healthy after ClickHouse came back", 240)


def kill_together_and_wait_for_recovery(stack: LocalStack, *names: str) -> None:
    """SIGKILL components that do not depend on each other at one moment (supervisord restarts
    each); wait until each runs as a new process and every component is healthy. One wait for
    their restarts instead of one after the other."""
    before = {name: pid for name in names if (pid := component_pid(stack, name)) is not None}
    assert list(before) == list(names), f"not running: {set(names) - set(before)}"
    for pid in before.values():
        sigkill_tree(pid)

    def restarted_and_healthy() -> bool:
        now = statuses(stack)
        renewed = all(now[name].pid not in (None, pid) for name, pid in before.items())
        return renewed and all(status.healthy for status in now.values())

    eventually(restarted_and_healthy, f"{' and '.join(names)} back", 180)


# The site's derived rows, as the dashboard reads them: the minute rollups' deltas summed per
# key. Traffic has stopped when they are compared, so every minute is complete, closed or not.
DERIVED_ROWS = {
    # The site's totals per minute.
    "totals": (
        "SELECT bucket, sum(pageviews) AS n, sum(visitors) FROM rollup_minute "
        "WHERE site = {site:String} AND dimension = '' GROUP BY bucket HAVING n != 0"
    ),
    # Breakdowns by the event dimensions (page views with that value in the minute).
    "breakdowns": (
        "SELECT dimension, bucket, value, sum(pageviews) AS n, sum(visitors) FROM rollup_minute "
        "WHERE site = {site:String} AND dimension IN ('path', 'country', 'browser', 'os', 'device') "
        "GROUP BY dimension, bucket, value HAVING n != 0"
    ),
}


def all_minutes_agree(settings: Settings) -> bool:
    """Spark's page views per minute equal the archive's for every minute, the open ones too:
    once traffic has stopped, the moment the stream jobs have caught up with the log."""
    client = connect(settings)
    raw = client.query(
        "SELECT toStartOfMinute(ts) AS t, count() FROM events WHERE site = {site:String} "
        "AND name = 'pageview' GROUP BY t ORDER BY t",
        parameters={"site": SITE},
    ).result_rows
    agg = client.query(
        "SELECT bucket AS t, sum(pageviews) AS n FROM rollup_minute WHERE site = {site:String} "
        "AND dimension = '' GROUP BY t HAVING n != 0 ORDER BY t",
        parameters={"site": SITE},
    ).result_rows
    return bool(raw) and raw == agg


def derived_rows(settings: Settings) -> dict[str, list[tuple]]:
    client = connect(settings)
    return {
        table: sorted(client.query(select, parameters={"site": SITE}).result_rows)
        for table, select in DERIVED_ROWS.items()
    }


def test_accepted_events_survive_a_crash_of_each_component(local_stack: LocalStack) -> None:
    stack, settings = local_stack, local_stack.settings
    # Accepted from the moment `sites add` returns (collector/known_sites.py): no wait.
    assert stack.tally("sites", "add", SITE).returncode == 0
    traffic = Traffic.start(stack, SITE, RATE, seed=11)
    faults: list[Fault] = [
        lambda: kill_and_wait_for_recovery(stack, "collector"),
        lambda: kill_together_and_wait_for_recovery(stack, "archiver", "spark"),
        lambda: kill_and_wait_for_recovery(stack, "kafka"),
        lambda: clickhouse_away(stack, CLICKHOUSE_AWAY_S),
    ]
    inject(faults)
    summary, truth = traffic.finish()
    accepted = len(truth.counted())
    # The faults were survived, not the traffic stopped: most of what was sent got its 202. (The
    # sender runs behind its rate while answers are slow, so what it sent is the measure.)
    assert summary.refusal is None and accepted > summary.sent * 0.5, summary.statuses
    eventually(lambda: archived(settings, SITE)[0] >= accepted, "every accepted event archived", 240)
    time.sleep(3)
    count, unique = archived(settings, SITE)
    # Exactly once: no event twice. Every 202 is there (per path, none missing). Events the
    # log took while the client was told 503 or timed out may be there too (DESIGN allows a
    # 503 for a written event, never a 202 for an unwritten one), but nothing never sent.
    assert count == unique
    expected_by_path = {path: n for (_, path), n in truth.pageviews_by_site_path().items()}
    in_archive = archived_by_path(settings, SITE)
    missing = {path: n - in_archive[path] for path, n in expected_by_path.items() if in_archive[path] < n}
    assert missing == {}
    assert accepted <= count <= summary.sent
    # Every component healthy again by itself (supervisord restarts what exits): in time, not at
    # this very moment (a full run at load 15-30 found one component not yet healthy here).
    recovered(stack, "every component healthy after the faults", 180)

    # Spark's counts equal the archive's for every minute, closed (past the watermark) or not,
    # once it has caught up with the whole log (a restarted driver on a busy machine may still
    # be working through the last minutes' events). The derived tables are a cache of the log:
    # rebuilt from it, they hold the same rows.
    eventually(lambda: all_minutes_agree(settings), "Spark's counts equal the archive's every minute", 300)
    live = derived_rows(settings)
    replayed = stack.tally("replay", timeout=600)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert all(live.values()), live
    assert derived_rows(settings) == live
    recovered(stack, "the stream jobs running again after the replay", 180)
    # The archive has no hole after the crashes, and every day's agg equals raw.
    verified = eventually(lambda: verify_clean(stack), "tally verify: archive whole, agg equal to raw", 300)
    assert " 0 differ" in str(verified), verified
