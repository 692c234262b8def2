"""Open-loop sending: requests leave on a fixed schedule whatever the server does, and
latency is measured from the intended send time (no coordinated omission)."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from loadgen.ground_truth import GroundTruth, late_ts
from loadgen.traffic import Kind, TrafficModel, Visit
from loadgen.wire import Answer, Pool, SendError

# Requests in flight at once, and the keep-alive connections to carry them. The wait for a free
# slot counts in the latency, which is measured from the intended send time: a backlog shows.
MAX_IN_FLIGHT = 256
# How long one answer may take: longer than the longest a collector waits for Kafka before
# its 503 (30 s on a cluster, Settings.collector_send_timeout_s), so that a slow 202 during
# a broker failover is counted as the 202 it is, not as a timeout.
ANSWER_TIMEOUT_S = 60.0


def percentile(ordered: list[float], fraction: float) -> float:
    """The value below which `fraction` of the (sorted) values lie; 0 for none."""
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


@dataclass
class RunSummary:
    sent: int = 0
    statuses: Counter[int | str] = field(default_factory=Counter)
    # From each accepted (202) request's intended send time to its answer: a refusal (400, 429,
    # 503) or a failed send answers at its own speed and would bend the collector's figures.
    latencies_s: list[float] = field(default_factory=list)
    elapsed_s: float = 0.0
    # The collector's message for the first 400: the run stops there, since every later event
    # would be refused alike (typically: a site that is not registered).
    refusal: str | None = None

    @property
    def accepted(self) -> int:
        return self.statuses[202]

    @property
    def rejected(self) -> int:
        return sum(count for status, count in self.statuses.items() if status != 202)

    def percentile(self, fraction: float) -> float:
        return percentile(sorted(self.latencies_s), fraction)

    def merge(self, other: RunSummary) -> None:
        self.sent += other.sent
        self.statuses.update(other.statuses)
        self.latencies_s += other.latencies_s
        self.elapsed_s = max(self.elapsed_s, other.elapsed_s)
        self.refusal = self.refusal or other.refusal


class VisitSchedule:
    """The next visit: a one-off (bot, scraper, late), a due follow-up page view of an
    open session, or the first page view of a new session."""

    def __init__(self, model: TrafficModel) -> None:
        self.model = model
        self._pending: list[tuple[float, int, Visit, Iterator[Visit]]] = []
        self._order = itertools.count()

    def next_visit(self, now: float) -> Visit:
        if one_off := self.model.one_off():
            return one_off
        if self._pending and self._pending[0][0] <= now:
            _, _, visit, rest = heapq.heappop(self._pending)
        else:
            rest = self.model.session()
            visit = next(rest)
        follow_up = next(rest, None)
        if follow_up is not None:
            heapq.heappush(self._pending, (now + visit.think_time_s, next(self._order), follow_up, rest))
        return visit


@dataclass
class Sender:
    client: Pool
    target: str
    ingest_key: str
    summary: RunSummary
    truth: GroundTruth
    on_answer: Callable[[RunSummary], None] | None = None

    async def send_group(self, visits: list[Visit], intended: float, batch: bool) -> None:
        """In batch mode people's page views travel together; bots, scrapers and late events
        always go one per request, so each 202 or 429 is known to be theirs."""
        people = [visit for visit in visits if batch and visit.kind is Kind.BROWSER]
        singles = [visit for visit in visits if not (batch and visit.kind is Kind.BROWSER)]
        sends = [self.send([visit], intended, batch=visit.kind is Kind.LATE) for visit in singles]
        if people:
            sends.append(self.send(people, intended, batch=True))
        if len(sends) == 1:  # the usual case, one page view per request: no gather, no task more
            await sends[0]
        else:
            await asyncio.gather(*sends)

    async def send(self, visits: list[Visit], intended: float, batch: bool) -> None:
        sent_at = datetime.now(UTC)
        try:
            if batch:
                ts = [late_ts(sent_at, visit) if visit.kind is Kind.LATE else sent_at for visit in visits]
                response = await self._post_batch(visits, ts)
            else:
                response, ts = await self._post_beacon(visits[0]), [None]
            status: int | str = response.status_code
        except SendError as error:
            status, ts = error.kind, []
        acked_at = datetime.now(UTC)
        if status == 400 and self.summary.refusal is None:
            self.summary.refusal = refusal_message(response)
        self.summary.statuses[status] += len(visits)
        if self.on_answer:
            self.on_answer(self.summary)
        if status == 202:
            self.summary.latencies_s.append(time.monotonic() - intended)
            for visit, event_ts in zip(visits, ts, strict=True):
                self.truth.record(visit, sent_at, acked_at, event_ts)

    async def _post_beacon(self, visit: Visit) -> Answer:
        headers = {
            "User-Agent": visit.user_agent,
            "X-Forwarded-For": visit.client_ip,
            "Content-Type": "text/plain",
        }
        if visit.accept_language:
            headers["Accept-Language"] = visit.accept_language
        return await self.client.post("/api/event", visit.body(), headers)

    async def _post_batch(self, visits: list[Visit], ts: list[datetime]) -> Answer:
        body = [visit.batch_item(event_ts) for visit, event_ts in zip(visits, ts, strict=True)]
        headers = {"Authorization": f"Bearer {self.ingest_key}"}
        headers["Content-Type"] = "application/json"
        return await self.client.post("/api/events", body, headers)


def refusal_message(response: Answer) -> str:
    try:
        return str(response.json()["error"])
    except (ValueError, KeyError, TypeError):
        return response.text[:200]


async def run(
    target: str,
    model: TrafficModel,
    rate: float,
    duration_s: float,
    ingest_key: str = "",
    batch_size: int = 0,
    truth: GroundTruth | None = None,
    on_progress: Callable[[RunSummary], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> tuple[RunSummary, GroundTruth]:
    """Send `rate` page views/s for `duration_s` (0: until cancelled, or until `stop()` says
    so: a caller that ends the run when something else has happened); batches of
    `batch_size` through /api/events when it is set. Stops early at the first 400
    (`summary.refusal`). Answers still due when it stops are awaited and counted."""
    summary, truth = RunSummary(), truth or GroundTruth()
    schedule = VisitSchedule(model)
    per_request = max(1, batch_size)
    in_flight: set[asyncio.Task] = set()
    client = Pool(target, MAX_IN_FLIGHT, ANSWER_TIMEOUT_S)
    try:
        sender = Sender(client, target, ingest_key, summary, truth, on_answer=on_progress)
        start = time.monotonic()
        for sequence in itertools.count():
            intended = start + sequence * per_request / rate
            if (duration_s and intended - start >= duration_s) or summary.refusal or (stop and stop()):
                break
            if (delay := intended - time.monotonic()) > 0:
                await asyncio.sleep(delay)
            if len(in_flight) >= MAX_IN_FLIGHT:  # bounded: never an unbounded backlog of tasks
                await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
            visits = [schedule.next_visit(intended - start) for _ in range(per_request)]
            task = asyncio.create_task(sender.send_group(visits, intended, batch=batch_size > 0))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
            summary.sent += per_request
            if on_progress:
                on_progress(summary)
        if in_flight:
            await asyncio.wait(in_flight)
        summary.elapsed_s = time.monotonic() - start
    finally:
        client.close()
    return summary, truth
