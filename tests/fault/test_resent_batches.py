"""A server-side sender that retries (issue 15), against the whole local stack: batches of 50
events, each with the sender's own event_id, posted to the real collector while it is
SIGKILLed — and, in the second test, while the Kafka broker is. Every batch not answered 202
(connection refused or reset, 5xx, timeout) is sent again with the same ids until it is; and
some batches that were answered 202 are sent once more (a sender that lost the answer), so
that the log surely holds copies. Afterwards the archive holds every event_id exactly once,
the copies' offsets are accounted for, and the numbers the dashboard shows from the derived
tables (agg) equal those from the archive (raw) — each re-sent event counted once."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import httpx
import orjson
import pytest

from loadgen.traffic import USER_AGENTS
from storage import queries
from storage.client import connect
from tally.settings import Settings
from tests.fault.scenario import kill_and_wait_for_recovery, verify_clean
from tests.fixtures.archive import archived
from tests.fixtures.local_stack import LocalStack, eventually

pytestmark = pytest.mark.fault

SENDERS = 4
BATCHES = 30  # per sender
BATCH_SIZE = 50
PACE_S = 0.2  # between one sender's batches: about 1,000 events/s in all
RESEND_EVERY = 6  # every 6th batch answered 202 is sent once more
SEND_DEADLINE_S = 150
PATHS = ["/", "/pricing", "/docs", "/blog", "/signup"]


@dataclass
class RetryingSender:
    """Posts batches to /api/events; a batch not answered 202 is posted again, the same ids."""

    collector: str
    ingest_key: str
    site: str
    rng: random.Random
    sent: list[UUID] = field(default_factory=list)
    answers: Counter[str] = field(default_factory=Counter)
    resent_after_202: int = 0

    def run(self, deadline: float) -> None:
        with httpx.Client(timeout=5) as client:
            for number in range(1, BATCHES + 1):
                ids, body = self.batch()
                self.post_until_accepted(client, body, deadline)
                self.sent += ids
                if number % RESEND_EVERY == 0:
                    self.post_until_accepted(client, body, deadline)
                    self.resent_after_202 += 1
                time.sleep(PACE_S)

    def batch(self) -> tuple[list[UUID], bytes]:
        now = datetime.now(UTC).isoformat()
        ids = [uuid4() for _ in range(BATCH_SIZE)]
        events = [
            {
                "event_id": str(event_id),
                "site": self.site,
                "url": f"https://{self.site}{self.rng.choice(PATHS)}",
                "ts": now,
                # Many clients: each stays far below the rate limit (100 page views an hour).
                "ip": f"10.{self.rng.randrange(16)}.{self.rng.randrange(256)}.{self.rng.randrange(1, 255)}",
                "user_agent": self.rng.choice(USER_AGENTS)[0],
            }
            for event_id in ids
        ]
        return ids, orjson.dumps(events)

    def post_until_accepted(self, client: httpx.Client, body: bytes, deadline: float) -> None:
        headers = {"Authorization": f"Bearer {self.ingest_key}", "Content-Type": "application/json"}
        while time.monotonic() < deadline:
            try:
                answer = client.post(f"{self.collector}/api/events", content=body, headers=headers)
            except httpx.TransportError as error:  # refused, reset, timed out
                self.answers[type(error).__name__] += 1
            else:
                self.answers[str(answer.status_code)] += 1
                if answer.status_code == 202:
                    assert answer.json()["dropped"] == {}, answer.text
                    return
                assert answer.status_code >= 500 or answer.status_code == 408, answer.text
            time.sleep(0.25)
        raise AssertionError(f"a batch was not accepted within {SEND_DEADLINE_S}s: {self.answers}")


def send_through(stack: LocalStack, site: str, fault: str, seed: int) -> list[RetryingSender]:
    """SENDERS senders at once; `fault` SIGKILLed three seconds in, and supervisord restarts it."""
    settings = stack.settings
    collector = f"http://127.0.0.1:{settings.collector_port}"
    deadline = time.monotonic() + SEND_DEADLINE_S
    senders = [
        RetryingSender(collector, settings.resolved_ingest_key(), site, random.Random(seed * 100 + n))
        for n in range(SENDERS)
    ]
    failures: list[BaseException] = []

    def run(sender: RetryingSender) -> None:
        try:
            sender.run(deadline)
        except BaseException as error:  # reported by the test thread
            failures.append(error)

    threads = [threading.Thread(target=run, args=(sender,), daemon=True) for sender in senders]
    for thread in threads:
        thread.start()
    time.sleep(3)
    kill_and_wait_for_recovery(stack, fault)
    for thread in threads:
        thread.join(SEND_DEADLINE_S)
    assert not failures, failures
    assert not any(thread.is_alive() for thread in threads), "a sender did not finish"
    return senders


def archived_ids(settings: Settings, site: str) -> set[UUID]:
    rows = connect(settings).query(
        "SELECT DISTINCT event_id FROM events WHERE site = {site:String}", parameters={"site": site}
    )
    return {row[0] for row in rows.result_rows}


def copies_recorded(settings: Settings, site: str) -> int:
    rows = connect(settings).query(
        "SELECT count() FROM archive_duplicates FINAL WHERE site = {site:String}", parameters={"site": site}
    )
    return int(rows.result_rows[0][0])


def what_users_see(settings: Settings, q: queries.StatsQuery, source: queries.Source) -> dict[str, object]:
    """The site's reports, as the dashboard and the stats API read them."""
    client = connect(settings)
    seen: dict[str, object] = {
        "aggregate": queries.aggregate(client, q, source),
        "minutes": queries.timeseries(client, q, "minute", source),
    }
    for by in queries.DIMENSIONS:
        seen[f"by {by}"] = queries.breakdown(client, q, by, 100, source)
    return seen


def agg_pageviews(settings: Settings, q: queries.StatsQuery) -> int:
    return int(queries.aggregate(connect(settings), q, "agg")["pageviews"])


def assert_each_event_archived_and_counted_once(
    stack: LocalStack, site: str, senders: list[RetryingSender]
) -> None:
    settings = stack.settings
    sent = [event_id for sender in senders for event_id in sender.sent]
    resent = sum(sender.resent_after_202 for sender in senders)
    assert len(sent) == len(set(sent)) == SENDERS * BATCHES * BATCH_SIZE
    eventually(lambda: archived(settings, site)[0] >= len(sent), "every sent event archived", 180)
    time.sleep(3)  # a copy still on its way would land now

    # The archive: every event once, nothing never sent, every copy's offset accounted for.
    assert archived(settings, site) == (len(sent), len(sent))
    assert archived_ids(settings, site) == set(sent)
    assert copies_recorded(settings, site) >= resent * BATCH_SIZE

    # The derived tables: every event counted once, as the archive holds it. The events' times
    # are their first sending's, all within the last few minutes.
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    q = queries.StatsQuery(site, now - timedelta(minutes=15), now + timedelta(minutes=2))
    eventually(lambda: agg_pageviews(settings, q) >= len(sent), "Spark caught up", 180)
    time.sleep(3)
    assert what_users_see(settings, q, "agg") == what_users_see(settings, q, "raw")
    assert agg_pageviews(settings, q) == len(sent)
    verified = eventually(lambda: verify_clean(stack), "tally verify: archive whole, agg equal to raw", 180)
    assert "more than once within the dedup window: 0" in str(verified), verified


@pytest.mark.parametrize(("victim", "seed"), [("collector", 15), ("kafka", 16)])
def test_batches_resent_across_a_crash_are_archived_and_counted_once(
    local_stack: LocalStack, victim: str, seed: int
) -> None:
    site = f"resent-{victim}.example.com"
    assert local_stack.tally("sites", "add", site).returncode == 0
    senders = send_through(local_stack, site, victim, seed=seed)
    # The crash was felt: some batches had to be sent again.
    answers = sum((sender.answers for sender in senders), Counter())
    assert set(answers) - {"202"}, answers
    assert_each_event_archived_and_counted_once(local_stack, site, senders)
