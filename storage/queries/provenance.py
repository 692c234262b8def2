"""What a stats answer is made of: the source it was read from, the part of the log
it covers, the late events in its range, and whether agg and raw agree on it.

- `log`: per partition of `pageviews`, the offsets of the archived events in the range (the
  archive keeps each row's kafka_partition/kafka_offset), how far the stream jobs have read
  that partition (`stream_offsets`, written by the sink after each micro-batch: every offset
  below `processed_to` is in the derived tables) and how many of the range's archived events
  lie beyond it (`pending`: in raw, not yet in agg). Rows not from the log (imports and
  benchmarks written straight into the archive, partition SYNTHETIC_PARTITION) are listed as
  such.
- `watermark`: the stream jobs' event-time watermark (`stream_watermarks`).
- `late_events`: events of the range's minutes the stream jobs received older than the allowed
  lateness (`late_events`, written by the activity query), per UTC day, with when they were
  first and last recorded: never in the rollups, so the archive answers a range they touch
  (contract.LATE_EVENTS_RULE, `rule`; `source` says which answered).
- `agreement`: agg against raw, page views and visitors per UTC day of the days the range
  touches, raw counted over the log prefix the stream jobs have processed (so events still
  on their way are no disagreement). "agree", "disagree" with every day that differs (both
  sides' numbers and that day's late events), or "not checked" with the reason: no progress
  recorded yet, or more than CHECK_MAX_DAYS days or CHECK_MAX_EVENTS archived events in the
  range (the raw side is a scan of them).
  The per-day totals check rollup_day: a wrong row of rollup_minute or rollup_hour inside a
  day whose rollup_day row is right is not seen.
  `figures` says it per figure the answers show, each with its own status: page views and
  visitors (the check above); sessions, bounces and duration per day (agg's session totals
  against a sessionisation of the archive: only over at most SESSIONS_CHECK_MAX_DAYS days and
  SESSIONS_CHECK_MAX_EVENTS events, and only once every event of those days, and of the day
  either side, is processed); goal and custom events per day and event name (goal_events_day
  and goal_visitors_day against the archive they are filled from); breakdowns, engagement and
  funnels "not checked", with the reason. The overall status disagrees if any figure does.
- `definitions`: the definitions the query layer applied; `definitions_version`, the number of
  the stored version they come from (storage/definitions.py; null before version 1 is
  recorded), and `definitions_fingerprint`, a fingerprint of them (equal definitions, equal
  fingerprint).
- `erasure`: the version of the site's latest erasure (storage/erasures.py: its events received
  until then were erased from the archive and every derived table), null if none.

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

from storage import erasures
from storage.queries import agg, raw
from storage.queries.contract import (
    LATE_EVENTS_RULE,
    RAW_VISITORS,
    SessionPoint,
    Source,
    StatsQuery,
    as_utc,
)
from storage.tables import (
    ARCHIVE_OFFSETS_DAY,
    EVENTS,
    LATE_EVENTS,
    STREAM_OFFSETS,
    STREAM_WATERMARKS,
    SYNTHETIC_PARTITION,
)

#: The query whose progress and late events stand for agg (stream_jobs/activity.py).
ACTIVITY_QUERY = agg.ACTIVITY_QUERY
#: Beyond these the agreement is "not checked": its raw side would scan too much.
CHECK_MAX_DAYS = 92
CHECK_MAX_EVENTS = 2_000_000
#: The sessions' raw side is a sessionisation of the range: checked on smaller ranges only.
SESSIONS_CHECK_MAX_DAYS = 31
SESSIONS_CHECK_MAX_EVENTS = 100_000
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
class FigureDifference:
    """A day one figure differs on: both sides' numbers, by what the figure counts."""

    day: datetime
    raw: dict[str, int]
    agg: dict[str, int]


@dataclass(frozen=True)
class FigureCheck:
    """One figure's agreement: `compared` says what was compared (or why not)."""

    figure: str
    compared: str
    status: Status
    checked_days: int = 0
    differences: list[FigureDifference] = field(default_factory=list)
    reason: str = ""


@dataclass(frozen=True)
class Agreement:
    status: Status
    checked_days: int = 0
    differences: list[DayDifference] = field(default_factory=list)
    reason: str = ""
    figures: list[FigureCheck] = field(default_factory=list)


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
    # Per UTC day with late events: when the stream jobs first and last recorded one of them.
    late_recorded: dict[datetime, tuple[datetime, datetime]] = field(default_factory=dict)
    erasure: int | None = None  # the site's latest erasure (storage/erasures.py)

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
        late_recorded=late_events_recorded(client, q) if late_by_day else {},
        agreement=agreement,
        definitions=definitions
        or {"session_gap_s": q.session_gap_s, "engaged_bounce_ms": q.engaged_bounce_ms},
        version=version,
        erasure=erasures.latest_version(client, q.site),
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


def processed_parameters(processed: dict[int, int]) -> dict[str, object]:
    parts = sorted(processed)
    return {
        "parts": parts,
        "ends": [processed[p] for p in parts],
        "synthetic": SYNTHETIC_PARTITION,
    }


# An offset is processed when below its partition's end; a partition not read yet has end 0.
_PROCESSED_END = "transform(kafka_partition, {parts:Array(UInt16)}, {ends:Array(UInt64)}, toUInt64(0))"

# Per partition, every archived event of the site in [start, end): the archive read whole.
_COVERAGE = f"""
SELECT kafka_partition, count(), min(kafka_offset), max(kafka_offset),
       countIf(kafka_partition != {{synthetic:UInt16}} AND kafka_offset >= {_PROCESSED_END})
FROM {EVENTS}
WHERE site = {{site:String}} AND ts >= {{start:DateTime64(3, 'UTC')}} AND ts < {{end:DateTime64(3, 'UTC')}}
GROUP BY kafka_partition
ORDER BY kafka_partition
"""
# The same from archive_offsets_day (migration 0075) for the UTC days wholly inside the range,
# and from the archive for the parts of a day at either end ([start, first whole day) and [end of
# the last whole day, end)); in one row, with the archive's own count of the range, which the
# summary matches unless it missed rows or counted rows the archive lost and had written again.
_COVERAGE_BY_DAY = f"""
SELECT
    (SELECT count() FROM {EVENTS} WHERE site = {{site:String}}
       AND ts >= {{start:DateTime64(3, 'UTC')}} AND ts < {{end:DateTime64(3, 'UTC')}}),
    groupArray((kafka_partition, events, first_offset, last_offset))
FROM
(
    SELECT kafka_partition, sum(events) AS events, min(first_offset) AS first_offset,
           max(last_offset) AS last_offset
    FROM
    (
        SELECT kafka_partition, sum(events) AS events, min(first_offset) AS first_offset,
               max(last_offset) AS last_offset
        FROM {ARCHIVE_OFFSETS_DAY}
        WHERE site = {{site:String}} AND day >= {{first_day:Date}} AND day < {{end_day:Date}}
        GROUP BY kafka_partition
        UNION ALL
        SELECT kafka_partition, count(), min(kafka_offset), max(kafka_offset)
        FROM {EVENTS}
        WHERE site = {{site:String}}
          AND ((ts >= {{start:DateTime64(3, 'UTC')}} AND ts < {{first_day_start:DateTime64(3, 'UTC')}})
            OR (ts >= {{end_day_start:DateTime64(3, 'UTC')}} AND ts < {{end:DateTime64(3, 'UTC')}}))
        GROUP BY kafka_partition
    )
    GROUP BY kafka_partition
)
"""
# The range's events the stream jobs have not read, in the partitions where some could be: only
# offsets at or past the lowest of their ends are read (the archive's minmax index on
# kafka_offset, migration 0065, skips the granules below it).
_PENDING = f"""
SELECT kafka_partition, countIf(kafka_offset >= {_PROCESSED_END})
FROM {EVENTS}
WHERE site = {{site:String}} AND ts >= {{start:DateTime64(3, 'UTC')}} AND ts < {{end:DateTime64(3, 'UTC')}}
  AND kafka_partition IN {{unread:Array(UInt16)}} AND kafka_offset >= {{lowest_end:UInt64}}
GROUP BY kafka_partition
"""


def coverage(client: Client, q: StatsQuery, processed: dict[int, int]) -> list[PartitionCoverage]:
    """Per partition, the archived events of the site in [start, end) (every kind of event): from
    archive_offsets_day and the range's partial days, or from the archive read whole when the
    two disagree on how many events the range holds."""
    parameters = {"site": q.site, "start": q.start, "end": q.end, **processed_parameters(processed)}
    summed = _summed_by_day(client, q, parameters)
    if summed is None:
        rows = client.query(_COVERAGE, parameters=parameters).result_rows
    else:
        pending = _pending(client, summed, processed, parameters)
        rows = [(p, n, first, last, pending.get(p, 0)) for p, n, first, last in summed]
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


def _summed_by_day(
    client: Client, q: StatsQuery, parameters: dict[str, object]
) -> list[tuple[int, int, int, int]] | None:
    """(partition, events, first offset, last offset) of the range from _COVERAGE_BY_DAY, or None
    when they do not add up to the archive's count of the range."""
    start, end = as_utc(q.start), as_utc(q.end)
    first_day = start.replace(hour=0, minute=0, second=0, microsecond=0)
    first_day += DAY if first_day < start else timedelta(0)
    end_day = end.replace(hour=0, minute=0, second=0, microsecond=0)
    if end_day <= first_day:  # no whole day: the archive answers the range alone
        first_day = end_day = end
    days = {
        "first_day": first_day.date(),
        "end_day": end_day.date(),
        "first_day_start": first_day,
        "end_day_start": end_day,
    }
    [(archived, partitions)] = client.query(_COVERAGE_BY_DAY, parameters={**parameters, **days}).result_rows
    if sum(int(events) for _, events, _, _ in partitions) != archived:
        return None
    return sorted((int(p), int(n), int(first), int(last)) for p, n, first, last in partitions)


def _pending(
    client: Client,
    summed: list[tuple[int, int, int, int]],
    processed: dict[int, int],
    parameters: dict[str, object],
) -> dict[int, int]:
    """Per partition, the range's events at or past the stream jobs' end of it (none in a partition
    whose last event of the range they have read, none ever in the synthetic one)."""
    unread = {
        partition: processed.get(partition, 0)
        for partition, _, _, last in summed
        if partition != SYNTHETIC_PARTITION and last >= processed.get(partition, 0)
    }
    if not unread:
        return {}
    read = {**parameters, "unread": sorted(unread), "lowest_end": min(unread.values())}
    return {int(p): int(n) for p, n in client.query(_PENDING, parameters=read).result_rows}


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


def late_events_recorded(client: Client, q: StatsQuery) -> dict[datetime, tuple[datetime, datetime]]:
    """Per UTC day of the range's late events: when the first and the last were recorded."""
    rows = client.query(
        f"SELECT toStartOfDay(window_start), min(written_at), max(written_at) FROM {LATE_EVENTS} FINAL "
        "WHERE query_name = {query:String} AND site = {site:String} AND events > 0 "
        "AND window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')} "
        "GROUP BY 1 ORDER BY 1",
        parameters={"query": ACTIVITY_QUERY, "site": q.site, "start": q.start, "end": q.end},
    ).result_rows
    return {as_utc(day): (as_utc(first), as_utc(last)) for day, first, last in rows}


def days_touched(q: StatsQuery) -> tuple[datetime, datetime]:
    """[first midnight, last midnight) of the UTC days [start, end) touches."""
    start = as_utc(q.start).replace(hour=0, minute=0, second=0, microsecond=0)
    end = as_utc(q.end)
    midnight = end.replace(hour=0, minute=0, second=0, microsecond=0)
    return start, midnight if midnight == end else midnight + DAY


RAW_DAYS = f"""
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
    """Every figure's agreement (`figures`); page views and visitors per UTC day as before at
    the top level, the overall status disagreeing if any figure does."""
    first, end = days_touched(q)
    days = (end - first) // DAY
    events = sum(p.events for p in partitions)
    if days > CHECK_MAX_DAYS:
        bound = f"the range touches {days} days, more than {CHECK_MAX_DAYS}"
    elif events > CHECK_MAX_EVENTS:
        bound = f"the range holds {events} archived events, more than {CHECK_MAX_EVENTS}"
    else:
        bound = ""
    if not processed:
        views = Agreement("not checked", reason="the stream jobs have recorded no progress yet")
    elif bound:
        views = Agreement("not checked", reason=bound)
    else:
        views = compare_pageviews(client, q, processed, late_by_day, first, end)
    if bound:
        figures = [_not_checked(figure, bound) for figure in CHECKED_FIGURES]
    else:
        figures = [
            compare_sessions(client, q, processed, events, first, end),
            *(compare_event_days(client, q.site, figure, first, end) for figure in EVENT_DAY_TABLES),
        ]
    figures = [_pageviews_figure(views), *figures, *NOT_CHECKED]
    status: Status = "disagree" if any(f.status == "disagree" for f in figures) else views.status
    return Agreement(status, views.checked_days, views.differences, views.reason, figures)


def compare_pageviews(
    client: Client,
    q: StatsQuery,
    processed: dict[int, int],
    late_by_day: dict[datetime, int],
    first: datetime,
    end: datetime,
) -> Agreement:
    """Page views and visitors per UTC day, agg against raw over the processed log prefix."""
    days = (end - first) // DAY
    parameters = {"site": q.site, "start": first, "end": end, **processed_parameters(processed)}
    raw_days = {
        as_utc(day): (int(pageviews), int(visitors))
        for day, pageviews, visitors in client.query(RAW_DAYS, parameters=parameters).result_rows
    }
    whole_days = StatsQuery(q.site, first, end, session_gap_s=q.session_gap_s)
    aggregated = {
        as_utc(point.t): (int(point.pageviews), int(point.visitors))
        for point in agg.timeseries(client, whole_days, "day")
    }
    differences = []
    for index in range(days):
        day = first + index * DAY
        raw_day, agg_day = raw_days.get(day, (0, 0)), aggregated.get(day, (0, 0))
        if raw_day != agg_day:
            differences.append(DayDifference(day, raw_day, agg_day, late_by_day.get(day, 0)))
    return Agreement("disagree" if differences else "agree", checked_days=days, differences=differences)


PAGEVIEWS_COMPARED = "page views and visitors per UTC day, agg against raw over the processed log"
SESSIONS_COMPARED = (
    "sessions, bounces and duration per UTC day of their start: the stream jobs' session totals "
    "against a sessionisation of the archive"
)
# figure → (the table filled from `events` at archive time, what is compared)
EVENT_DAY_TABLES = {
    "goal_events": (
        "goal_events_day",
        "events per UTC day and event name: goal_events_day against the archive",
    ),
    "custom_events": (
        "goal_visitors_day",
        "events per UTC day and event name: goal_visitors_day against the archive",
    ),
}
CHECKED_FIGURES = ("sessions", *EVENT_DAY_TABLES)
NOT_CHECKED = [
    FigureCheck(
        "breakdowns",
        "",
        "not checked",
        reason="no per-day total exists per dimension value without a scan of the rollups' every row",
    ),
    FigureCheck(
        "engagement",
        "",
        "not checked",
        reason="time on page and scroll depth have no per-day total to compare cheaply",
    ),
    FigureCheck(
        "funnels",
        "",
        "not checked",
        reason="agg's stored days are computed from the archive, recomputed when it changes",
    ),
]


def _pageviews_figure(views: Agreement) -> FigureCheck:
    differences = [
        FigureDifference(
            d.day,
            {"pageviews": d.raw[0], "visitors": d.raw[1]},
            {"pageviews": d.agg[0], "visitors": d.agg[1]},
        )
        for d in views.differences
    ]
    return FigureCheck(
        "pageviews_visitors", PAGEVIEWS_COMPARED, views.status, views.checked_days, differences, views.reason
    )


def _not_checked(figure: str, reason: str) -> FigureCheck:
    return FigureCheck(figure, "", "not checked", reason=reason)


_UNPROCESSED = f"""
SELECT countIf(kafka_partition != {{synthetic:UInt16}} AND kafka_offset >= {_PROCESSED_END})
FROM {EVENTS}
WHERE site = {{site:String}} AND ts >= {{start:DateTime64(3, 'UTC')}} AND ts < {{end:DateTime64(3, 'UTC')}}
"""


def compare_sessions(
    client: Client, q: StatsQuery, processed: dict[int, int], events: int, first: datetime, end: datetime
) -> FigureCheck:
    """Sessions, bounces and duration per UTC day of their start, agg against raw."""
    days = (end - first) // DAY
    if not processed:
        return _not_checked("sessions", "the stream jobs have recorded no progress yet")
    if days > SESSIONS_CHECK_MAX_DAYS or events > SESSIONS_CHECK_MAX_EVENTS:
        return _not_checked(
            "sessions",
            f"checked on ranges of at most {SESSIONS_CHECK_MAX_DAYS} days and "
            f"{SESSIONS_CHECK_MAX_EVENTS} events (a sessionisation of the archive)",
        )
    # Sessions read a day either side of the days: every event there must be in agg already.
    parameters = {"site": q.site, "start": first - DAY, "end": end + DAY, **processed_parameters(processed)}
    [(unprocessed,)] = client.query(_UNPROCESSED, parameters=parameters).result_rows
    if unprocessed:
        return _not_checked("sessions", f"{unprocessed} events of these days are not processed yet")
    whole_days = StatsQuery(
        q.site, first, end, session_gap_s=q.session_gap_s, engaged_bounce_ms=q.engaged_bounce_ms
    )
    sides = [
        {as_utc(p.t): p for p in side.session_timeseries(client, whole_days, "day")} for side in (raw, agg)
    ]
    differences = []
    for index in range(days):
        day = first + index * DAY
        raw_day, agg_day = (_session_numbers(side.get(day)) for side in sides)
        # Durations are summed in whole ms on one side, rounded once on the other: 1 ms a session.
        close = abs(raw_day["duration_ms"] - agg_day["duration_ms"]) <= max(raw_day["sessions"], 1)
        if (raw_day["sessions"], raw_day["bounces"]) != (
            agg_day["sessions"],
            agg_day["bounces"],
        ) or not close:
            differences.append(FigureDifference(day, raw_day, agg_day))
    return FigureCheck(
        "sessions", SESSIONS_COMPARED, "disagree" if differences else "agree", days, differences
    )


def _session_numbers(point: SessionPoint | None) -> dict[str, int]:
    if point is None:
        return {"sessions": 0, "bounces": 0, "duration_ms": 0}
    return {"sessions": point.sessions, "bounces": point.bounces, "duration_ms": point.duration_ms}


_EVENT_DAYS = """
SELECT day, name, sum(raw_events), sum(day_events) FROM
(
    SELECT toDate(ts) AS day, name, toUInt64(count()) AS raw_events, toUInt64(0) AS day_events
    FROM {events}
    WHERE site = {{site:String}} AND name != 'engagement'
      AND ts >= {{start:DateTime64(3, 'UTC')}} AND ts < {{end:DateTime64(3, 'UTC')}}
    GROUP BY day, name
    UNION ALL
    SELECT day, name, toUInt64(0), toUInt64(sum(events))
    FROM {table}
    WHERE site = {{site:String}} AND day >= toDate({{start:DateTime64(3, 'UTC')}})
      AND day < toDate({{end:DateTime64(3, 'UTC')}})
    GROUP BY day, name
)
GROUP BY day, name
HAVING sum(raw_events) != sum(day_events)
ORDER BY day, name
"""


def compare_event_days(client: Client, site: str, figure: str, first: datetime, end: datetime) -> FigureCheck:
    """Events per UTC day and name, a day-level goals table against the archive it is filled from."""
    table, compared = EVENT_DAY_TABLES[figure]
    sql = _EVENT_DAYS.format(events=EVENTS, table=table)  # table names from the fixed map above
    rows = client.query(sql, parameters={"site": site, "start": first, "end": end}).result_rows
    by_day: dict[datetime, FigureDifference] = {}
    for day, name, raw_events, table_events in rows:
        moment = as_utc(datetime.combine(day, datetime.min.time()))
        found = by_day.setdefault(moment, FigureDifference(moment, {}, {}))
        found.raw[name], found.agg[name] = int(raw_events), int(table_events)
    differences = list(by_day.values())
    days = (end - first) // DAY
    return FigureCheck(figure, compared, "disagree" if differences else "agree", days, differences)


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
    "erasure",
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
            "recorded_by_day": {
                iso(day): {"first": iso(first), "last": iso(last)}
                for day, (first, last) in sorted(p.late_recorded.items())
            },
            "counted_in": ["raw"],
            "not_counted_in": ["agg"],
            "rule": LATE_EVENTS_RULE,
        },
        "agreement": _agreement_json(p.agreement),
        "definitions": p.definitions,
        # The stored version's number (None before version 1 is recorded) and a fingerprint of
        # the definitions applied (the same definitions, the same fingerprint).
        "definitions_version": p.version,
        "definitions_fingerprint": p.definitions_version,
        "erasure": p.erasure,
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
        "compared": PAGEVIEWS_COMPARED,
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
        "figures": {f.figure: _figure_json(f) for f in a.figures},
    }
    if a.reason:
        answer["reason"] = a.reason
    return answer


def _figure_json(f: FigureCheck) -> dict[str, object]:
    answer: dict[str, object] = {"status": f.status, "checked_days": f.checked_days}
    if f.compared:
        answer["compared"] = f.compared
    if f.reason:
        answer["reason"] = f.reason
    answer["days"] = [{"day": iso(d.day), "raw": d.raw, "agg": d.agg} for d in f.differences]
    return answer


__all__ = [
    "CHECK_MAX_DAYS",
    "CHECK_MAX_EVENTS",
    "FIELDS",
    "Agreement",
    "DayDifference",
    "FigureCheck",
    "FigureDifference",
    "PartitionCoverage",
    "Provenance",
    "definitions_version",
    "provenance",
    "to_json",
]
