"""What a stats answer is made of (issue 21): the source it was read from, the part of the log
it covers, the late events in its range, and whether agg and raw agree on it.

- `log`: per partition of `pageviews`, the offsets of the archived events in the range (the
  archive keeps each row's kafka_partition/kafka_offset), how far the stream jobs have read
  that partition (`stream_offsets`, written by the sink after each micro-batch: every offset
  below `processed_to` is in the derived tables) and how many of the range's archived events
  lie beyond it (`pending`: in raw, not yet in agg). Rows not from the log (imports and
  benchmarks written straight into the archive, partition SYNTHETIC_PARTITION) are listed as
  such.
- `watermark`: the stream jobs' event-time watermark (`stream_watermarks`).
- `late_events`: events of the range's minutes the stream jobs received behind the watermark
  (`late_events`, written by the activity query): counted in raw, not in agg.
- `agreement`: agg against raw, page views and visitors per UTC day of the days the range
  touches, raw counted over the log prefix the stream jobs have processed (so events still
  on their way are no disagreement). "agree", "disagree" with every day that differs (both
  sides' numbers and that day's late events), or "not checked" with the reason: no progress
  recorded yet, or more than CHECK_MAX_DAYS days or CHECK_MAX_EVENTS archived events in the
  range (the raw side is a scan of them).
  The per-day totals check rollup_day: a wrong row of rollup_minute or rollup_hour inside a
  day whose rollup_day row is right is not seen.
- `definitions`: the definitions the query layer applied; `definitions_version`, the number of
  the stored version they come from (storage/definitions.py; null before version 1 is
  recorded), and `definitions_fingerprint`, a fingerprint of them (equal definitions, equal
  fingerprint).

Cost: three small reads (progress, late events, the archive's offsets in the range: the
archive is ordered by (site, day), so this reads the range's three columns) and, when
checked, a per-day count over the range's page views and one rollup_day read.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from clickhouse_connect.driver.client import Client

from storage.archive_rows import SYNTHETIC_PARTITION
from storage.queries import agg
from storage.queries.contract import RAW_VISITORS, Source, StatsQuery, as_utc
from storage.tables import EVENTS, LATE_EVENTS, STREAM_OFFSETS, STREAM_WATERMARKS

#: The query whose progress and late events stand for agg (stream_jobs/activity.py).
ACTIVITY_QUERY = agg.ACTIVITY_QUERY
#: Beyond these the agreement is "not checked": its raw side would scan too much.
CHECK_MAX_DAYS = 92
CHECK_MAX_EVENTS = 2_000_000
DAY = timedelta(days=1)

Status = Literal["agree", "disagree", "not checked"]


@dataclass(frozen=True)
class PartitionCoverage:
    """One partition's part in an answer; offsets of the archived events in the range."""

    partition: int
    events: int
    first_offset: int
    last_offset: int
    processed_to: int | None  # the stream jobs' end offset (exclusive); None: not read yet
    pending: int  # events of the range at or past processed_to: in raw, not yet in agg

    @property
    def from_log(self) -> bool:
        return self.partition != SYNTHETIC_PARTITION


@dataclass(frozen=True)
class DayDifference:
    day: datetime
    raw: tuple[int, int]  # page views, visitors
    agg: tuple[int, int]
    late_events: int


@dataclass(frozen=True)
class Agreement:
    status: Status
    checked_days: int = 0
    differences: list[DayDifference] = field(default_factory=list)
    reason: str = ""


@dataclass(frozen=True)
class Provenance:
    source: Source
    start: datetime
    end: datetime
    topic: str
    partitions: list[PartitionCoverage]
    processed: dict[int, int]  # the stream jobs' end offset per partition
    watermark: datetime | None
    late_events: int
    late_by_day: dict[datetime, int]
    agreement: Agreement
    definitions: dict[str, int]
    version: int | None = None  # the stored definitions version (storage/definitions.py)

    @property
    def definitions_version(self) -> str:
        return definitions_version(self.definitions)


def definitions_version(definitions: dict[str, int]) -> str:
    """A fingerprint of the definitions: equal definitions, equal version."""
    canonical = json.dumps(definitions, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def provenance(
    client: Client,
    q: StatsQuery,
    source: Source,
    topic: str,
    definitions: dict[str, int] | None = None,
    check: bool = True,
    version: int | None = None,
) -> Provenance:
    """The provenance of an answer to `q` read from `source` (the source that answered)."""
    processed, watermark = stream_progress(client, topic)
    partitions = coverage(client, q, processed)
    late_by_day = late_events_by_day(client, q)
    agreement = (
        compare_days(client, q, processed, partitions, late_by_day)
        if check
        else Agreement("not checked", reason="not asked")
    )
    return Provenance(
        source=source,
        start=as_utc(q.start),
        end=as_utc(q.end),
        topic=topic,
        partitions=partitions,
        processed=processed,
        watermark=watermark,
        late_events=sum(late_by_day.values()),
        late_by_day=late_by_day,
        agreement=agreement,
        definitions=definitions
        or {"session_gap_s": q.session_gap_s, "engaged_bounce_ms": q.engaged_bounce_ms},
        version=version,
    )


_PROGRESS = f"""
SELECT partition, end_offset, (SELECT max(watermark) FROM {STREAM_WATERMARKS} FINAL
                               WHERE query_name = {{query:String}})
FROM {STREAM_OFFSETS} FINAL
WHERE query_name = {{query:String}} AND topic = {{topic:String}}
ORDER BY partition
"""


def stream_progress(client: Client, topic: str) -> tuple[dict[int, int], datetime | None]:
    """Per partition of `topic`, the stream jobs' end offset (exclusive); their watermark."""
    rows = client.query(_PROGRESS, parameters={"query": ACTIVITY_QUERY, "topic": topic}).result_rows
    if not rows:
        watermark = client.query(
            f"SELECT max(watermark), count() FROM {STREAM_WATERMARKS} FINAL "
            "WHERE query_name = {query:String}",
            parameters={"query": ACTIVITY_QUERY},
        ).result_rows[0]
        return {}, as_utc(watermark[0]) if watermark[1] else None
    return {int(p): int(end) for p, end, _ in rows}, as_utc(rows[0][2])


def _processed_parameters(processed: dict[int, int]) -> dict[str, object]:
    parts = sorted(processed)
    return {
        "parts": parts,
        "ends": [processed[p] for p in parts],
        "synthetic": SYNTHETIC_PARTITION,
    }


# An offset is processed when below its partition's end; a partition not read yet has end 0.
_PROCESSED_END = "transform(kafka_partition, {parts:Array(UInt16)}, {ends:Array(UInt64)}, toUInt64(0))"

_COVERAGE = f"""
SELECT kafka_partition, count(), min(kafka_offset), max(kafka_offset),
       countIf(kafka_partition != {{synthetic:UInt16}} AND kafka_offset >= {_PROCESSED_END})
FROM {EVENTS}
WHERE site = {{site:String}} AND ts >= {{start:DateTime64(3, 'UTC')}} AND ts < {{end:DateTime64(3, 'UTC')}}
GROUP BY kafka_partition
ORDER BY kafka_partition
"""


def coverage(client: Client, q: StatsQuery, processed: dict[int, int]) -> list[PartitionCoverage]:
    """Per partition, the archived events of the site in [start, end) (every kind of event)."""
    parameters = {"site": q.site, "start": q.start, "end": q.end, **_processed_parameters(processed)}
    rows = client.query(_COVERAGE, parameters=parameters).result_rows
    return [
        PartitionCoverage(
            partition=int(p),
            events=int(n),
            first_offset=int(first),
            last_offset=int(last),
            processed_to=processed.get(int(p)),
            pending=int(pending),
        )
        for p, n, first, last, pending in rows
    ]


def late_events_by_day(client: Client, q: StatsQuery) -> dict[datetime, int]:
    """Late events of the range's minutes (as agg.late_pageviews counts them), per UTC day."""
    rows = client.query(
        f"SELECT toStartOfDay(window_start), sum(events) FROM {LATE_EVENTS} FINAL "
        "WHERE query_name = {query:String} AND site = {site:String} "
        "AND window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')} "
        "GROUP BY 1 ORDER BY 1",
        parameters={"query": ACTIVITY_QUERY, "site": q.site, "start": q.start, "end": q.end},
    ).result_rows
    return {as_utc(day): int(n) for day, n in rows if n}


def days_touched(q: StatsQuery) -> tuple[datetime, datetime]:
    """[first midnight, last midnight) of the UTC days [start, end) touches."""
    start = as_utc(q.start).replace(hour=0, minute=0, second=0, microsecond=0)
    end = as_utc(q.end)
    midnight = end.replace(hour=0, minute=0, second=0, microsecond=0)
    return start, midnight if midnight == end else midnight + DAY


_RAW_DAYS = f"""
SELECT toStartOfDay(ts) AS day, count(), {RAW_VISITORS}
FROM {EVENTS}
WHERE site = {{site:String}} AND name = 'pageview'
  AND ts >= {{start:DateTime64(3, 'UTC')}} AND ts < {{end:DateTime64(3, 'UTC')}}
  AND (kafka_partition = {{synthetic:UInt16}} OR kafka_offset < {_PROCESSED_END})
GROUP BY day
"""


def compare_days(
    client: Client,
    q: StatsQuery,
    processed: dict[int, int],
    partitions: list[PartitionCoverage],
    late_by_day: dict[datetime, int],
) -> Agreement:
    """Page views and visitors per UTC day, agg against raw over the processed log prefix."""
    if not processed:
        return Agreement("not checked", reason="the stream jobs have recorded no progress yet")
    first, end = days_touched(q)
    days = (end - first) // DAY
    if days > CHECK_MAX_DAYS:
        return Agreement("not checked", reason=f"the range touches {days} days, more than {CHECK_MAX_DAYS}")
    events = sum(p.events for p in partitions)
    if events > CHECK_MAX_EVENTS:
        return Agreement(
            "not checked", reason=f"the range holds {events} archived events, more than {CHECK_MAX_EVENTS}"
        )
    parameters = {"site": q.site, "start": first, "end": end, **_processed_parameters(processed)}
    raw = {
        as_utc(day): (int(pageviews), int(visitors))
        for day, pageviews, visitors in client.query(_RAW_DAYS, parameters=parameters).result_rows
    }
    whole_days = StatsQuery(q.site, first, end, session_gap_s=q.session_gap_s)
    aggregated = {
        as_utc(point.t): (int(point.pageviews), int(point.visitors))
        for point in agg.timeseries(client, whole_days, "day")
    }
    differences = []
    for index in range(days):
        day = first + index * DAY
        raw_day, agg_day = raw.get(day, (0, 0)), aggregated.get(day, (0, 0))
        if raw_day != agg_day:
            differences.append(DayDifference(day, raw_day, agg_day, late_by_day.get(day, 0)))
    return Agreement("disagree" if differences else "agree", checked_days=days, differences=differences)


# --- JSON, as the stats APIs carry it in `meta` ----------------------------------------------

#: The fields provenance adds to a `meta` object besides `source`.
FIELDS = (
    "range",
    "log",
    "watermark",
    "late_events",
    "agreement",
    "definitions",
    "definitions_version",
    "definitions_fingerprint",
)


def iso(moment: datetime | None) -> str | None:
    return None if moment is None else as_utc(moment).isoformat().replace("+00:00", "Z")


def to_json(p: Provenance) -> dict[str, object]:
    """The provenance as the `meta` fields of a stats answer (docs/architecture.md, "Provenance")."""
    return {
        "source": p.source,
        "range": {"from": iso(p.start), "to": iso(p.end)},
        "log": {
            "topic": p.topic,
            "partitions": [_partition_json(c) for c in p.partitions],
            "processed_to": {str(partition): end for partition, end in sorted(p.processed.items())},
        },
        "watermark": iso(p.watermark),
        "late_events": {
            "count": p.late_events,
            "by_day": {iso(day): n for day, n in sorted(p.late_by_day.items())},
            "counted_in": ["raw"],
            "not_counted_in": ["agg"],
        },
        "agreement": _agreement_json(p.agreement),
        "definitions": p.definitions,
        # The stored version's number (None before version 1 is recorded) and a fingerprint of
        # the definitions applied (the same definitions, the same fingerprint).
        "definitions_version": p.version,
        "definitions_fingerprint": p.definitions_version,
    }


def _partition_json(c: PartitionCoverage) -> dict[str, object]:
    if not c.from_log:
        return {"partition": None, "from_log": False, "events": c.events}
    return {
        "partition": c.partition,
        "from_log": True,
        "events": c.events,
        "first_offset": c.first_offset,
        "last_offset": c.last_offset,
        "processed_to": c.processed_to,
        "pending": c.pending,
    }


def _agreement_json(a: Agreement) -> dict[str, object]:
    answer: dict[str, object] = {
        "status": a.status,
        "compared": "page views and visitors per UTC day, agg against raw over the processed log",
        "checked_days": a.checked_days,
        "days": [
            {
                "day": iso(d.day),
                "raw": {"pageviews": d.raw[0], "visitors": d.raw[1]},
                "agg": {"pageviews": d.agg[0], "visitors": d.agg[1]},
                "late_events": d.late_events,
            }
            for d in a.differences
        ],
        "bound": {"max_days": CHECK_MAX_DAYS, "max_events": CHECK_MAX_EVENTS},
    }
    if a.reason:
        answer["reason"] = a.reason
    return answer


__all__ = [
    "CHECK_MAX_DAYS",
    "CHECK_MAX_EVENTS",
    "FIELDS",
    "Agreement",
    "DayDifference",
    "PartitionCoverage",
    "Provenance",
    "definitions_version",
    "provenance",
    "to_json",
]
