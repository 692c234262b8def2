"""What the load generator knows it did: every page view the collector accepted (202),
with what it should become in the pipeline. Written as JSON lines so that tests and
benchmarks can check the pipeline's numbers against it."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path

import orjson

from loadgen.traffic import Kind, Visit


@dataclass(frozen=True)
class AcceptedEvent:
    kind: str
    site: str
    path: str
    visitor_key: str
    # The collector stamps browser events between these two instants; late events carry `ts`.
    sent_at: datetime
    acked_at: datetime
    ts: datetime | None = None

    @property
    def counted(self) -> bool:
        """Bots are answered 202 and dropped: everything else accepted is in the archive."""
        return self.kind != Kind.BOT

    def minute(self) -> datetime | None:
        """The event-time minute, or None where the 202 straddled a minute boundary."""
        if self.ts is not None:
            return self.ts.replace(second=0, microsecond=0)
        first, last = (t.replace(second=0, microsecond=0) for t in (self.sent_at, self.acked_at))
        return first if first == last else None


class GroundTruth:
    def __init__(self) -> None:
        self.accepted: list[AcceptedEvent] = []

    def record(self, visit: Visit, sent_at: datetime, acked_at: datetime, ts: datetime | None = None) -> None:
        self.accepted.append(
            AcceptedEvent(visit.kind.value, visit.site, visit.path, visit.visitor_key, sent_at, acked_at, ts)
        )

    def counted(self) -> list[AcceptedEvent]:
        return [event for event in self.accepted if event.counted]

    def pageviews_by_site(self) -> Counter[str]:
        return Counter(event.site for event in self.counted())

    def pageviews_by_site_path(self) -> Counter[tuple[str, str]]:
        return Counter((event.site, event.path) for event in self.counted())

    def visitors_by_site(self) -> dict[str, int]:
        keys: defaultdict[str, set[str]] = defaultdict(set)
        for event in self.counted():
            keys[event.site].add(event.visitor_key)
        return {site: len(visitors) for site, visitors in keys.items()}

    def pageviews_by_site_minute(self) -> dict[tuple[str, datetime], tuple[int, int]]:
        """Per (site, minute): the fewest and the most page views the pipeline may count.
        They differ only by events whose 202 straddled the minute's edge (either side is right)."""
        bounds: defaultdict[tuple[str, datetime], list[int]] = defaultdict(lambda: [0, 0])
        for event in self.counted():
            certain = event.minute()
            minutes = (
                [certain]
                if certain
                else [t.replace(second=0, microsecond=0) for t in (event.sent_at, event.acked_at)]
            )
            for minute in minutes:
                bounds[(event.site, minute)][1] += 1
            if certain:
                bounds[(event.site, certain)][0] += 1
        return {key: (low, high) for key, (low, high) in bounds.items()}

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as out:
            for event in self.accepted:
                out.write(orjson.dumps(asdict(event)) + b"\n")

    @classmethod
    def read(cls, path: Path) -> GroundTruth:
        truth = cls()
        for line in path.read_bytes().splitlines():
            fields = orjson.loads(line)
            for name in ("sent_at", "acked_at", "ts"):
                if fields[name] is not None:
                    fields[name] = datetime.fromisoformat(fields[name])
            truth.accepted.append(AcceptedEvent(**fields))
        return truth

    def merge(self, other: GroundTruth) -> None:
        self.accepted += other.accepted


def late_ts(now: datetime, visit: Visit) -> datetime:
    return now - timedelta(seconds=visit.delay_s)
