"""Open-loop sending: page views leave on a fixed schedule whatever the server does, and
latency is measured from the intended send time (no coordinated omission)."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx

from loadgen.traffic import TrafficModel, Visit

MAX_IN_FLIGHT = 2_000


@dataclass
class RunSummary:
    sent: int = 0
    statuses: Counter[int | str] = field(default_factory=Counter)
    latencies_s: list[float] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def accepted(self) -> int:
        return self.statuses[202]

    def percentile(self, fraction: float) -> float:
        if not self.latencies_s:
            return 0.0
        ordered = sorted(self.latencies_s)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class VisitSchedule:
    """Interleaves sessions: the next visit is a due follow-up page view, else a new visitor."""

    def __init__(self, model: TrafficModel, time_scale: float = 1.0) -> None:
        self.model = model
        self.time_scale = time_scale
        self._pending: list[tuple[float, int, Visit, Iterator[Visit]]] = []
        self._order = itertools.count()

    def next_visit(self, now: float) -> Visit:
        if self._pending and self._pending[0][0] <= now:
            _, _, visit, rest = heapq.heappop(self._pending)
        else:
            rest = self.model.session()
            visit = next(rest)
        follow_up = next(rest, None)
        if follow_up is not None:
            due = now + visit.think_time_s * self.time_scale
            heapq.heappush(self._pending, (due, next(self._order), follow_up, rest))
        return visit


async def send_visit(
    client: httpx.AsyncClient, target: str, visit: Visit, intended: float, summary: RunSummary
) -> None:
    headers = {
        "User-Agent": visit.user_agent,
        "X-Forwarded-For": visit.client_ip,
        "Content-Type": "text/plain",
    }
    try:
        response = await client.post(f"{target}/api/event", json=visit.body(), headers=headers)
        summary.statuses[response.status_code] += 1
    except httpx.HTTPError as error:
        summary.statuses[type(error).__name__] += 1
    summary.latencies_s.append(time.monotonic() - intended)


async def run(
    target: str, model: TrafficModel, rate: float, duration_s: float, on_sent: object = None
) -> RunSummary:
    """Send at `rate` page views/s for `duration_s` (0: until cancelled)."""
    summary = RunSummary()
    schedule = VisitSchedule(model)
    in_flight: set[asyncio.Task] = set()
    limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
    async with httpx.AsyncClient(limits=limits, timeout=10) as client:
        start = time.monotonic()
        for sequence in itertools.count():
            intended = start + sequence / rate
            if duration_s and intended - start >= duration_s:
                break
            delay = intended - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if len(in_flight) >= MAX_IN_FLIGHT:  # bounded: never an unbounded backlog of tasks
                await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
            task = asyncio.create_task(
                send_visit(client, target, schedule.next_visit(intended), intended, summary)
            )
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
            summary.sent += 1
            if callable(on_sent):
                on_sent()
        if in_flight:
            await asyncio.wait(in_flight)
        summary.elapsed_s = time.monotonic() - start
    return summary
