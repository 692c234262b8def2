"""Funnels from stored per-day results (source `agg`), exact by construction.

Sessions count on the UTC day they start and a visitor is a (UTC day, visitor_id), so a funnel's
sessions and visitors per step add up over whole UTC days. A range is read as:
- its whole UTC days up to yesterday: from `funnel_days`, one row per (site, funnel definition,
  day), each with a fingerprint of the archive it was computed from — the `archive_days` (count
  and checksum of event ids) of the day before, the day and the day after, since a session
  starting on a day is split from the day before and may run past midnight (for yesterday, of
  today only the events that can join its sessions);
- the rest (a mid-day start or end, a site's local midnight, today, whose events still come)
  computed live from the archive.
A stored day whose fingerprint no longer matches the archive (late or imported events) or that is
missing is computed again. The live ranges and the days to compute go to the engine in ONE query
(storage.queries.funnels.counts_by_day: sessionised once, counted per day); the computed days are
stored. A goal filter depends on the whole range (visitors who converted in it), not on a day:
such a funnel is computed live only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta

from clickhouse_connect.driver.client import Client

from storage.queries.contract import GOAL_FILTER, StatsQuery, validate
from storage.queries.funnels import (
    DaysRead,
    FunnelReport,
    FunnelStep,
    Piece,
    checked_steps,
    counts_by_day,
    funnel_parameters,
    passes_sql,
    step_results,
    total,
)
from storage.tables import ARCHIVE_DAYS, EVENTS, FUNNEL_DAYS

# Part of every funnel's fingerprint: raise it when the funnel's definition (funnels.py's SQL)
# changes meaning, and every stored day is computed again instead of served.
FUNNEL_DEFINITION_VERSION = 1
# Days from today (UTC) whose results are never stored: today's, whose events still come.
# Yesterday is stored, its fingerprint taking of today only the events that can join one of its
# sessions: those of the visitors with an event in yesterday's last session gap (a session runs
# past midnight only if its last event before midnight is at most the gap before it).
OPEN_DAYS = 1
# Today's events of the visitors active in yesterday's last session gap: count and checksum.
_CARRIED_OVER = f"""
SELECT count(), sum(cityHash64(event_id)) FROM {EVENTS}
WHERE site = {{site:String}} AND name != 'engagement'
  AND ts >= {{today:DateTime64(3, 'UTC')}} AND ts < {{today:DateTime64(3, 'UTC')}} + INTERVAL 1 DAY
  AND visitor_key IN (
      SELECT visitor_key FROM {EVENTS}
      WHERE site = {{site:String}} AND name != 'engagement'
        AND ts >= {{today:DateTime64(3, 'UTC')}} - toIntervalMillisecond({{gap_ms:UInt64}})
        AND ts < {{today:DateTime64(3, 'UTC')}}
  )
"""
DAY = timedelta(days=1)
FUNNEL_DAY_COLUMNS = ["site", "funnel", "day", "archive", "sessions", "visitors"]


def fingerprint(q: StatsQuery, steps: Sequence[FunnelStep]) -> int:
    """The funnel's definition as a UInt64: its steps, its filters (the SQL condition and its
    values: range-independent), the session gap and the definition's version."""
    filters = {
        name: value
        for name, value in funnel_parameters(q, steps, []).items()
        if name.startswith(("filter_", "where_"))
    }
    definition = json.dumps(
        [
            FUNNEL_DEFINITION_VERSION,
            [[step.kind, step.value] for step in steps],
            passes_sql(q),
            filters,
            q.session_gap_s,
        ],
        sort_keys=True,
        default=str,
    )
    return int.from_bytes(hashlib.blake2b(definition.encode(), digest_size=8).digest(), "big")


def stored_days(q: StatsQuery, today: date) -> list[date]:
    """The range's whole UTC days before the open ones (none under a goal filter)."""
    if GOAL_FILTER in q.filters:
        return []
    first = _midnight(q.start.astimezone(UTC).date())  # UTC days, whatever zone the instant carries
    if first < q.start:  # a range starting mid-day: its first day is live
        first += DAY
    days = []
    while first + DAY <= q.end and first.date() <= today - timedelta(days=OPEN_DAYS):
        days.append(first.date())
        first += DAY
    return days


def live_pieces(q: StatsQuery, days: Sequence[date]) -> list[Piece]:
    """The parts of the range outside its stored days (contiguous: at most one before, one after)."""
    if not days:
        return [(q.start, q.end)] if q.start < q.end else []
    before, after = (q.start, _midnight(days[0])), (_midnight(days[-1]) + DAY, q.end)
    return [piece for piece in (before, after) if piece[0] < piece[1]]


def funnel(
    client: Client, q: StatsQuery, steps: Sequence[FunnelStep], now: datetime | None = None
) -> FunnelReport:
    """The funnel from stored days plus the live rest; missing or stale days computed and stored."""
    validate(q)  # filters name EVENT_DIMENSIONS only: passes_sql splices their columns
    steps = checked_steps(steps)
    today = (now or datetime.now(UTC)).astimezone(UTC).date()
    days = stored_days(q, today)
    funnel_id = fingerprint(q, steps)
    archive = _archive_fingerprints(q, client, days, today)  # read before computing: a day changed
    # meanwhile is stored under the older fingerprint, so computed again next time, never stale
    stored = _stored(client, q.site, funnel_id, days)
    missing = [day for day in days if stored.get(day, (None, None))[0] != archive[day]]
    live = live_pieces(q, days)
    computed = counts_by_day(client, q, steps, [*_runs(missing), *live])
    zero = [(0, 0)] * len(steps)
    if missing:
        rows = [[q.site, funnel_id, day, archive[day], *_columns(computed.get(day, zero))] for day in missing]
        client.insert(FUNNEL_DAYS, rows, column_names=FUNNEL_DAY_COLUMNS)
    kept = [stored[day][1] for day in days if day not in missing]
    # computed: the missing days and the live ranges' days
    report = step_results(steps, total([*kept, *computed.values()], len(steps)))
    return FunnelReport(
        "agg",
        report,
        DaysRead(
            stored_days=len(kept),
            computed_days=len(missing),
            live=[[start.isoformat(), end.isoformat()] for start, end in live],
            stored_from=days[0].isoformat() if days else None,
            stored_to=days[-1].isoformat() if days else None,
        ),
    )


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(), UTC)


def _runs(days: Sequence[date]) -> list[Piece]:
    """Consecutive days as one range each: one piece reads its days once."""
    runs: list[Piece] = []
    for day in days:
        if runs and runs[-1][1] == _midnight(day):
            runs[-1] = (runs[-1][0], _midnight(day) + DAY)
        else:
            runs.append((_midnight(day), _midnight(day) + DAY))
    return runs


def _columns(counts: Sequence[tuple[int, int]]) -> list[list[int]]:
    return [[sessions for sessions, _ in counts], [visitors for _, visitors in counts]]


def _archive_fingerprints(
    q: StatsQuery, client: Client, days: Sequence[date], today: date
) -> dict[date, int]:
    """Per day, a UInt64 of archive_days' (events, checksum) of the day before, it and the day
    after; for yesterday, of today only the events that can join its sessions (_CARRIED_OVER)."""
    if not days:
        return {}
    rows = client.query(
        f"SELECT day, sum(events), sum(checksum) FROM {ARCHIVE_DAYS} "
        "WHERE site = {site:String} AND day >= {first:Date} AND day <= {last:Date} GROUP BY day",
        parameters={"site": q.site, "first": days[0] - DAY, "last": days[-1] + DAY},
    ).result_rows
    archived = {day: (int(events), int(checksum)) for day, events, checksum in rows}
    if days[-1] == today - DAY:
        ((events, checksum),) = client.query(
            _CARRIED_OVER,
            parameters={"site": q.site, "today": _midnight(today), "gap_ms": q.session_gap_s * 1000},
        ).result_rows
        archived[today] = (int(events), int(checksum))
    return {day: _hash([archived.get(day + offset * DAY, (0, 0)) for offset in (-1, 0, 1)]) for day in days}


def _hash(values: object) -> int:
    return int.from_bytes(hashlib.blake2b(json.dumps(values).encode(), digest_size=8).digest(), "big")


def _stored(
    client: Client, site: str, funnel_id: int, days: Sequence[date]
) -> dict[date, tuple[int, list[tuple[int, int]]]]:
    """Per stored day its newest row: (archive fingerprint, per step (sessions, visitors))."""
    if not days:
        return {}
    rows = client.query(
        f"SELECT day, archive, sessions, visitors FROM {FUNNEL_DAYS} "
        "WHERE site = {site:String} AND funnel = {funnel:UInt64} "
        "AND day >= {first:Date} AND day <= {last:Date} "
        "ORDER BY day, computed_at DESC LIMIT 1 BY day",
        parameters={"site": site, "funnel": funnel_id, "first": days[0], "last": days[-1]},
    ).result_rows
    return {
        day: (int(archive), [(int(s), int(v)) for s, v in zip(sessions, visitors, strict=True)])
        for day, archive, sessions, visitors in rows
    }
