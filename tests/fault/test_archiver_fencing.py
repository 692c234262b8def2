"""Two archivers in one consumer group; one is frozen (SIGSTOP) with a batch in flight, for longer
than its consumer session, while events keep arriving (issue 33). The broker expires it, the
other archiver takes its partitions and archives them from where the archive ends, including
the offsets of the frozen one's batch. Thawed, the frozen archiver's insert reaches the store:
its partitions' fences are no longer its own, so it lands nothing. The archive holds every event
once and accounts for every offset, and the thawed archiver says `fenced`.

The same scenario with fencing switched off shows what the fences prevent: the stale batch lands,
and the archive holds its events twice.

The frozen archiver reaches the store through a proxy of the test's (tests/fixtures/store_proxy.py)
that holds its inserts into `events`: so the freeze lands exactly with a batch in flight. Each run
has a topic and a database of its own, so the duplicates the unfenced run leaves behind are no
other test's business.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from uuid import uuid4

import pytest

from storage.client import connect
from storage.schema import apply_migrations
from tally.event import PageViewEvent
from tally.settings import Settings
from tally.topics import ensure_topics_sync
from tests.fixtures.archive import archived
from tests.fixtures.events import make_events
from tests.fixtures.store_proxy import store_proxy
from tests.integration.test_archiver import produce
from tests.integration.test_archiver_crash import archiver_process, wait_until
from tests.integration.test_archiver_pause import audit, caught_up

pytestmark = pytest.mark.fault

SITE = "fencing.example.com"
FIRST = 10_000  # archived by the first archiver alone
SECOND = 10_000  # shared by both: the frozen one's share is the batch it holds
DURING = 5_000  # produced while it is frozen
TOTAL = FIRST + SECOND + DURING
SESSION_TIMEOUT_S = 6.0  # the broker's minimum
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Outcome:
    settings: Settings
    frozen_log: str  # what the frozen archiver logged, from start to after the thaw


@pytest.fixture
def own_topic_and_store(settings: Settings, tmp_path: Path) -> Settings:
    """The session's Kafka and ClickHouse, with a topic and a database of this test's own."""
    name = uuid4().hex[:8]
    own = settings.model_copy(
        update={
            "pageviews_topic": f"pageviews-fencing-{name}",
            "clickhouse_database": f"fencing_{name}",
            "archiver_session_timeout_s": SESSION_TIMEOUT_S,
            # The audit repairs holes, never duplicates; kept out of the way so that what the
            # archive holds is what the two archivers' batches wrote.
            "archive_audit_interval_s": 3600.0,
        }
    )
    ensure_topics_sync(own)
    apply_migrations(own)
    return own


def archiver_home(settings: Settings, home: Path) -> Settings:
    home.mkdir()
    return settings.model_copy(update={"home": home})


def send(settings: Settings, events: list[PageViewEvent]) -> None:
    asyncio.run(produce(settings, [(e.key, e.to_json()) for e in events]))


@pytest.fixture
def freeze_one_of_two(
    request: pytest.FixtureRequest, own_topic_and_store: Settings, tmp_path: Path
) -> Iterator[Outcome]:
    settings = own_topic_and_store.model_copy(update={"archiver_fencing": request.param})
    events = make_events(SITE, TOTAL)
    send(settings, events[:FIRST])
    with archiver_process(archiver_home(settings, tmp_path / "steady")):
        wait_until(lambda: archived(settings, SITE)[0] >= FIRST, timeout_s=120)
        with store_proxy(settings.clickhouse_url) as proxy:
            proxy.faults.held_table = "events"
            frozen_settings = archiver_home(settings, tmp_path / "frozen")
            with archiver_process(frozen_settings.model_copy(update={"clickhouse_url": proxy.url})) as frozen:
                # It joins the group and takes its share of the partitions; then it collects a
                # batch from them: the batch's insert waits at the proxy, and there it is frozen.
                log_path = frozen_settings.home_dir / "archiver-crash.log"
                wait_until(
                    lambda: "partitions_assigned" in log_path.read_text(errors="replace"), timeout_s=120
                )
                send(settings, events[FIRST : FIRST + SECOND])
                wait_until(lambda: proxy.faults.inserts_held >= 1, timeout_s=120)
                os.kill(frozen.pid, signal.SIGSTOP)
                try:
                    send(settings, events[FIRST + SECOND :])
                    # The broker expires it; the other archiver takes every partition and
                    # archives each to the log's end, the frozen one's batch's offsets too.
                    wait_until(lambda: caught_up(settings), timeout_s=180)
                    assert archived(settings, SITE) == (TOTAL, TOTAL)
                finally:
                    os.kill(frozen.pid, signal.SIGCONT)
                proxy.faults.held_table = ""  # the stale insert goes on to the store
                if settings.archiver_fencing:
                    wait_until(lambda: "fenced" in log_path.read_text(errors="replace"), timeout_s=60)
                else:
                    wait_until(lambda: archived(settings, SITE)[0] > TOTAL, timeout_s=60)
                # It rejoins; the group settles; both archive what comes next.
                wait_until(lambda: caught_up(settings), timeout_s=120)
                yield Outcome(settings, ANSI.sub("", log_path.read_text(errors="replace")))


def rows_per_offset(settings: Settings) -> tuple[int, int]:
    """The site's rows, and the distinct log positions they came from."""
    count, positions = (
        connect(settings)
        .query(
            "SELECT count(), uniqExact(kafka_partition, kafka_offset) FROM events WHERE site = {site:String}",
            parameters={"site": SITE},
        )
        .result_rows[0]
    )
    return int(count), int(positions)


@pytest.mark.parametrize("freeze_one_of_two", [True], indirect=True, ids=["fenced"])
def test_a_thawed_archivers_stale_batch_lands_nothing(freeze_one_of_two: Outcome) -> None:
    settings = freeze_one_of_two.settings
    # Every event once, each from one offset; every offset of the log accounted for, none twice.
    assert archived(settings, SITE) == (TOTAL, TOTAL)
    assert rows_per_offset(settings) == (TOTAL, TOTAL)
    assert [(a.partition, a.holes, a.duplicates) for a in audit(settings) if a.holes or a.duplicates] == []
    # …because the store refused the stale batch, and the thawed archiver said so.
    refused = re.findall(r"\bfenced\b.*\bepoch=(\d+).*\bpartition=(\d+)", freeze_one_of_two.frozen_log)
    assert refused, freeze_one_of_two.frozen_log[-3000:]


@pytest.mark.parametrize("freeze_one_of_two", [False], indirect=True, ids=["unfenced"])
def test_without_fences_the_stale_batch_is_archived_twice(freeze_one_of_two: Outcome) -> None:
    settings = freeze_one_of_two.settings
    count, unique = archived(settings, SITE)
    assert unique == TOTAL and count > TOTAL
    assert sum(a.duplicates for a in audit(settings)) == count - TOTAL
    assert "fenced" not in freeze_one_of_two.frozen_log
