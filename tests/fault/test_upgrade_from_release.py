"""Upgrading keeps every number. An earlier release of this repository (tests/fixtures/release.py,
its own checkout and jar) runs the whole stack as its users ran it and counts a week of history;
retention then expires the log's head, as Kafka does after 7 days; this checkout's `tally up` and
`tally upgrade` take over the same TALLY_HOME (its migrations, and every derived table rebuilt:
the expired days from the archive, the rest from the log). Every day's reports, from the
aggregates and from the archive, and the Plausible v2 answers over the sessions' pages, are then
what the release answered, and `tally verify` finds the archive whole.

The stack's own tests share one stack (tests/fault/conftest.py); this one needs two releases of
it on one home, so it runs its own."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest

from storage.client import connect
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.events import page_view
from tests.fixtures.local_stack import eventually, stack_environment, stack_settings
from tests.fixtures.release import RELEASE, release_tally, release_tree
from tests.integration.test_provenance import produce, visits
from tests.integration.test_replay_expired_log import delete_records, first_offsets_from
from tests.integration.test_stream_agg_equals_raw import last_midnight

pytestmark = pytest.mark.integration

SITE = "upgraded.example.com"
CLOCK_SITE = "upgrade-clock.example.com"  # its last page view closes every session of SITE
DAYS = 7
#: Migrations of this checkout that the release did not have: its store is changed on the way.
NEWER_MIGRATIONS = {"0074_session_paths_low_cardinality", "0075_archive_offsets_day"}
#: The day-by-day reports compared, each from both sources (the API's `source`).
REPORTS = {
    "aggregate": {},
    "breakdown": {"by": "path"},
    "breakdown-entry": {"by": "entry_path"},
    "breakdown-source": {"by": "referrer_domain"},
}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("upgrade-home")


@pytest.fixture(scope="module")
def settings(home: Path) -> Settings:
    return stack_settings(home)


@pytest.fixture(scope="module")
def env(settings: Settings) -> Iterator[dict[str, str]]:
    environment = stack_environment(settings)
    yield environment
    run_tally(environment, "down")  # whichever release's stack is still up


def test_an_upgrade_from_the_previous_release_keeps_every_days_numbers(
    tmp_path_factory: pytest.TempPathFactory, settings: Settings, env: dict[str, str]
) -> None:
    tree = release_tree(tmp_path_factory.mktemp("release"))
    up = release_tally(tree, env, "up", "-d")
    assert up.returncode == 0, f"the release's `tally up` failed ({RELEASE}):\n{up.stdout}\n{up.stderr}"
    for site in (SITE, CLOCK_SITE):
        added = release_tally(tree, env, "sites", "add", site)
        assert added.returncode == 0, added.stderr

    days = [last_midnight() - timedelta(days=n) for n in range(DAYS, 0, -1)]
    traffic = sorted(
        (event for day in days for event in visits([SITE], day + timedelta(hours=9))), key=lambda e: e.ts
    )
    clock = page_view(CLOCK_SITE, "clock", days[-1] + timedelta(hours=14))
    landed = produce(settings, [*traffic, clock])
    week = {"from": days[0].isoformat(), "to": (days[-1] + timedelta(days=1)).isoformat()}
    counted = "the release counting the history from both sources"
    eventually(lambda: week_counted(settings, week) == [len(traffic)] * 2, counted, 300)
    # The release's own agreement (its sessions closed), without which the comparison proves less.
    before = eventually(lambda: agreed(answers(settings, days), days), "the release's agg equal to raw", 120)

    assert NEWER_MIGRATIONS.isdisjoint(migrations(settings))  # an upgrade that changes the schema

    # Kafka's retention deletes the log's head: every day but the last is in the archive only.
    delete_records(settings, first_offsets_from(landed, days[-1]))
    down = release_tally(tree, env, "down")
    assert down.returncode == 0, down.stderr

    up = run_tally(env, "up", "-d", timeout=600)
    assert up.returncode == 0, f"`tally up` on the release's home failed:\n{up.stdout}\n{up.stderr}"
    upgraded = run_tally(env, "upgrade", timeout=900)
    assert upgraded.returncode == 0, f"`tally upgrade` failed:\n{upgraded.stdout}\n{upgraded.stderr}"
    assert "days before" in upgraded.stdout  # the expired days were rebuilt from the archive

    assert migrations(settings) >= NEWER_MIGRATIONS
    after = answers(settings, days)
    assert after == before
    verified = run_tally(env, "verify", "--no-repair", timeout=300)
    assert verified.returncode == 0, verified.stdout


def migrations(settings: Settings) -> set[str]:
    """The migrations the store records as applied."""
    client = connect(settings)
    try:
        return {str(row[0]) for row in client.query("SELECT version FROM schema_migrations").result_rows}
    finally:
        client.close()


def week_counted(settings: Settings, week: dict[str, str]) -> list[int]:
    """The page views of the week from the aggregates and from the archive."""
    found = []
    for source in ("agg", "raw"):
        answer = httpx.get(
            f"http://127.0.0.1:{settings.dashboard_port}/api/v1/stats/aggregate",
            params={"site": SITE, **week, "source": source},
            headers={"Authorization": f"Bearer {settings.resolved_api_key()}"},
            timeout=60,
        )
        found.append(answer.json()["pageviews"] if answer.status_code == 200 else -1)
    return found


def agreed(found: dict[str, object], days: list[datetime]) -> dict[str, object] | None:
    """`found` if each day's reports are the same from the aggregates as from the archive."""
    for day in days:
        for report in REPORTS:
            if found[f"{day:%F} {report} agg"] != found[f"{day:%F} {report} raw"]:
                return None
    return found


def answers(settings: Settings, days: list[datetime]) -> dict[str, object]:
    """What the stats API and the Plausible v2 API answer for each day, without `meta`."""
    base = f"http://127.0.0.1:{settings.dashboard_port}/api"
    headers = {"Authorization": f"Bearer {settings.resolved_api_key()}"}
    found: dict[str, object] = {}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as api:
        for day in days:
            span = {"site": SITE, "from": day.isoformat(), "to": (day + timedelta(days=1)).isoformat()}
            for report, params in REPORTS.items():
                path = "/v1/stats/" + report.split("-")[0]
                for source in ("agg", "raw"):
                    answer = api.get(path, params={**span, **params, "source": source})
                    assert answer.status_code == 200, answer.text
                    found[f"{day:%F} {report} {source}"] = answer.json()
            query = {
                "site_id": SITE,
                "metrics": ["visitors", "visits", "bounce_rate", "visit_duration"],
                "dimensions": ["event:page"],
                "date_range": [f"{day:%F}", f"{day:%F}"],
            }
            answer = api.post("/v2/query", json=query)
            assert answer.status_code == 200, answer.text
            found[f"{day:%F} v2 by page"] = answer.json()["results"]
    return found
