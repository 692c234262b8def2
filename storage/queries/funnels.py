"""Funnels: how many sessions and visitors go through an ordered list of steps (contract.py
states the definition). Computed from the archive (`events`) for both sources: the rollups
keep counts, not the order of a session's events, so no rollup can answer a funnel exactly.

One query: each event of the site (page views and custom events; engagement events are
never part of a session here) carries a bitmask of the steps it matches and whether it is a
page view passing the filters; each visitor's events are sorted by (ts, event_id) and split
into sessions at gaps longer than the session gap, as raw.py's sessions are; a fold over a
session's masks gives the deepest step it reaches. The steps' texts travel as parameters
(page patterns as anchored RE2 expressions from storage.page_patterns), never in the SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Literal

from clickhouse_connect.driver.client import Client

from storage.page_patterns import BadPattern, pattern_regex, validate_pattern
from storage.queries.contract import Source, StatsQuery, UnsupportedQuery, validate
from storage.tables import EVENTS

StepKind = Literal["page", "event"]
STEP_KINDS: tuple[StepKind, ...] = ("page", "event")
MIN_STEPS = 2
MAX_STEPS = 8
# The collector accepts event names of at most 120 characters: a longer one matches nothing.
MAX_EVENT_NAME_LENGTH = 120
# Names that are no custom event: page views are page steps, engagement events never count.
RESERVED_EVENT_NAMES = {
    "pageview": 'use a page step, e.g. {"page": "/*"}',
    "engagement": "engagement events are not steps",
}


class BadFunnel(UnsupportedQuery):
    """Funnel steps Tally cannot evaluate; the message says which step and why."""


@dataclass(frozen=True)
class FunnelStep:
    """One step: a page path pattern (`/product/*`) or a custom event's name (`Signup`)."""

    kind: StepKind
    value: str

    def label(self) -> str:
        return self.value if self.kind == "page" else f"Event: {self.value}"


@dataclass(frozen=True)
class StepResult:
    step: FunnelStep
    visitors: int
    sessions: int
    dropoff: int  # visitors of the previous step who do not reach this one (0 for the first)
    dropoff_rate: float  # dropoff / the previous step's visitors, 0-1
    conversion_rate: float  # visitors / the first step's visitors, 0-1


@dataclass(frozen=True)
class FunnelReport:
    source: Source  # the source that answered
    steps: list[StepResult]
    days: DaysRead | None = None  # how `agg` answered; None for raw


@dataclass(frozen=True)
class DaysRead:
    """How `agg` answered (storage/queries/funnel_days.py): whole UTC days read from the stored
    per-day results, days computed now and stored, and the ranges computed live."""

    stored_days: int
    computed_days: int
    live: list[list[str]]  # [from, to) ISO-8601
    stored_from: str | None  # the first and last whole day stored or computed (ISO dates)
    stored_to: str | None


def checked_steps(steps: Sequence[FunnelStep]) -> list[FunnelStep]:
    """The steps, values stripped, or BadFunnel naming the step at fault (1-based)."""
    if not MIN_STEPS <= len(steps) <= MAX_STEPS:
        raise BadFunnel(f"a funnel has {MIN_STEPS} to {MAX_STEPS} steps, not {len(steps)}")
    return [_checked(index, step) for index, step in enumerate(steps, start=1)]


def _checked(index: int, step: FunnelStep) -> FunnelStep:
    if step.kind not in STEP_KINDS:
        raise BadFunnel(f"step {index}: a step is a page or an event, not {step.kind!r}")
    value = step.value.strip() if isinstance(step.value, str) else ""
    if not value:
        raise BadFunnel(f"step {index}: empty {step.kind}")
    if step.kind == "page":
        try:
            return FunnelStep("page", validate_pattern(value))
        except BadPattern as refused:
            raise BadFunnel(f"step {index}: {refused}") from None
    if len(value) > MAX_EVENT_NAME_LENGTH:
        raise BadFunnel(f"step {index}: an event name has at most {MAX_EVENT_NAME_LENGTH} characters")
    if not value.isprintable():
        raise BadFunnel(f"step {index}: an event name cannot hold control characters")
    if value in RESERVED_EVENT_NAMES:
        raise BadFunnel(f"step {index}: {value!r} is no custom event; {RESERVED_EVENT_NAMES[value]}")
    return FunnelStep("event", value)


# Per visitor: events sorted by (ts, event_id) as (ts, event_id, step mask, passes filters),
# event_id as UUIDToNum's 16 bytes in the order of its text (a UUID's own order in ClickHouse is
# not its text's; toString's 36 bytes per event cost ~15 % of the query's CPU at 10M events),
# split where the gap to the previous event exceeds the session gap. Sessions are counted when
# they start in one of the query's pieces (half-open UTC ranges); as raw.py's sessions, each
# piece reads the day before it and the day after it, since a session may start before midnight
# and a visitor id lives one UTC day. Rows per (UTC day a session starts, step): a visitor is a
# (day, id), so the days' visitors add up (storage/queries/funnel_days.py stores them per day).
_FUNNEL = """
SELECT toDate(start) AS day, step, count() AS sessions, uniqExact(visitor_key) AS visitors
FROM
(
    SELECT
        visitor_key,
        session[1].1 AS start,
        arrayFold(
            (reached, event) ->
                if(reached < {steps} AND bitTest(event.3, reached), toUInt16(reached + 1), reached),
            session, toUInt16(0)
        ) AS reached
    FROM
    (
        SELECT
            visitor_key,
            arraySort(groupArray((ts, UUIDToNum(event_id), mask, passes))) AS events,
            arrayJoin(arraySplit(
                (event, i) -> i > 1 AND dateDiff('millisecond', events[i - 1].1, event.1) > {{gap_ms:UInt64}},
                events, arrayEnumerate(events)
            )) AS session
        FROM
        (
            SELECT visitor_key, ts, event_id, {mask} AS mask, {passes} AS passes
            FROM {table}
            WHERE site = {{site:String}} AND name != 'engagement' AND ({read}){visitors}
        )
        GROUP BY visitor_key
        -- a visitor with no event matching step 1, or no page view passing the filters, has
        -- no session to count: their events are not sorted and split at all
        HAVING max(bitTest(mask, 0)) AND max(passes)
    )
    WHERE ({counted}) AND arrayExists(event -> event.4, session)
)
ARRAY JOIN range(1, reached + 1) AS step
GROUP BY day, step
"""

_READ_PIECE = (
    "ts >= toStartOfDay({{piece_{i}_start:DateTime64(3, 'UTC')}}) - INTERVAL 1 DAY AND "
    "ts < toStartOfDay({{piece_{i}_end:DateTime64(3, 'UTC')}} - INTERVAL 1 MILLISECOND) + INTERVAL 2 DAY"
)
_COUNTED_PIECE = (
    "start >= {{piece_{i}_start:DateTime64(3, 'UTC')}} AND start < {{piece_{i}_end:DateTime64(3, 'UTC')}}"
)

# Only the visitors with an event in a piece can have a session starting there: when the pieces
# are short against the days read around them (today, a mid-day edge), the other visitors'
# events are dropped before they are grouped and sorted (exact: a session's first event is at
# its start).
_VISITORS_IN_PIECES = (
    "\n              AND visitor_key IN (SELECT visitor_key FROM {table} WHERE site = {{site:String}} "
    "AND name != 'engagement' AND ({pieces}))"
)
_PIECE_EVENTS = (
    "ts >= {{piece_{i}_start:DateTime64(3, 'UTC')}} AND ts < {{piece_{i}_end:DateTime64(3, 'UTC')}}"
)

Piece = tuple[datetime, datetime]  # a half-open UTC range in which sessions start


def _step_sql(index: int, step: FunnelStep) -> str:
    """Whether an event matches step `index` (0-based), its text a parameter."""
    if step.kind == "page":
        return f"(name = 'pageview' AND match(path, {{step_{index}:String}}))"
    return f"(name = {{step_{index}:String}})"


def _mask_sql(steps: Sequence[FunnelStep]) -> str:
    """The bitmask of the steps an event matches: bit i for step i (0-based)."""
    return "toUInt16(" + " + ".join(f"{_step_sql(i, step)} * {1 << i}" for i, step in enumerate(steps)) + ")"


def passes_sql(q: StatsQuery) -> str:
    """Whether an event is a page view matching every filter: a session is considered when
    one of its page views is (columns from EVENT_DIMENSIONS only, values parameters)."""
    if not q.filtered:
        return "1"
    return "(name = 'pageview'" + q.filter_sql() + ")"


def funnel_sql(
    q: StatsQuery, steps: Sequence[FunnelStep], pieces: int = 1, only_their_visitors: bool = False
) -> str:
    """(day, step, sessions, visitors) for every step some session reaches, sessions starting
    in any of `pieces` ranges (parameters piece_I_start / piece_I_end, funnel_parameters);
    `only_their_visitors`: group only the visitors with an event in a piece (the same answer)."""
    visitors = ""
    if only_their_visitors:
        in_pieces = " OR ".join(f"({_PIECE_EVENTS.format(i=i)})" for i in range(pieces))
        visitors = _VISITORS_IN_PIECES.format(table=EVENTS, pieces=in_pieces)
    return _FUNNEL.format(
        visitors=visitors,
        steps=len(steps),
        mask=_mask_sql(steps),
        passes=passes_sql(q),
        table=EVENTS,
        read=" OR ".join(f"({_READ_PIECE.format(i=i)})" for i in range(pieces)),
        counted=" OR ".join(f"({_COUNTED_PIECE.format(i=i)})" for i in range(pieces)),
    )


def funnel_parameters(
    q: StatsQuery, steps: Sequence[FunnelStep], pieces: Sequence[Piece] | None = None
) -> dict[str, object]:
    parameters = q.parameters()
    for index, step in enumerate(steps):
        parameters[f"step_{index}"] = pattern_regex(step.value) if step.kind == "page" else step.value
    for index, (start, end) in enumerate(pieces if pieces is not None else [(q.start, q.end)]):
        parameters[f"piece_{index}_start"], parameters[f"piece_{index}_end"] = start, end
    return parameters


DayCounts = dict[date, list[tuple[int, int]]]  # per UTC day, per step its (sessions, visitors)


def counts_by_day(
    client: Client, q: StatsQuery, steps: Sequence[FunnelStep], pieces: Sequence[Piece]
) -> DayCounts:
    """Per UTC day a session starts on, (sessions, visitors) per step, for the sessions that
    start in `pieces` (one query; days where no session reaches step 1 are absent)."""
    if not pieces:
        return {}
    sql = funnel_sql(q, steps, len(pieces), only_their_visitors=_short(pieces))
    rows = client.query(sql, parameters=funnel_parameters(q, steps, pieces)).result_rows
    counts: DayCounts = {}
    for day, step, sessions, visitors in rows:
        counts.setdefault(day, [(0, 0)] * len(steps))[int(step) - 1] = (int(sessions), int(visitors))
    return counts


def _short(pieces: Sequence[Piece]) -> bool:
    """Whether the pieces cover under half the time read for them (a day before and after
    each): then selecting their visitors first costs less than it saves."""
    covered = sum((end - start for start, end in pieces), timedelta())
    return covered * 2 < timedelta(days=len(pieces) * 2) + covered


def total(counts: Sequence[Sequence[tuple[int, int]]], steps: int) -> list[tuple[int, int]]:
    """Per step, (sessions, visitors) summed over days: a visitor is a (day, id), days never share one."""
    return [(sum(day[k][0] for day in counts), sum(day[k][1] for day in counts)) for k in range(steps)]


def funnel(client: Client, q: StatsQuery, steps: Sequence[FunnelStep]) -> FunnelReport:
    """Visitors and sessions reaching each step of the funnel, with drop-off and conversion,
    computed from the archive in one query."""
    validate(q)  # filters name EVENT_DIMENSIONS only: passes_sql splices their columns
    steps = checked_steps(steps)
    counts = counts_by_day(client, q, steps, [(q.start, q.end)])
    return FunnelReport("raw", step_results(steps, total(list(counts.values()), len(steps))))


def step_results(steps: Sequence[FunnelStep], counts: Sequence[tuple[int, int]]) -> list[StepResult]:
    """Per step its (sessions, visitors) with the drop-off from the step before and the
    conversion from the first, in visitors (0 where the base is 0)."""
    first_visitors = counts[0][1] if counts else 0
    results, previous = [], None
    for step, (sessions, visitors) in zip(steps, counts, strict=True):
        dropoff = 0 if previous is None else previous - visitors
        results.append(
            StepResult(
                step=step,
                visitors=visitors,
                sessions=sessions,
                dropoff=dropoff,
                dropoff_rate=round(dropoff / previous, 4) if previous else 0.0,
                conversion_rate=round(visitors / first_visitors, 4) if first_visitors else 0.0,
            )
        )
        previous = visitors
    return results
