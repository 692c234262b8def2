"""Reports that count events under visit filters, with the visits read from the stream jobs' `sessions`.

Under a filter on a visit's properties (source, the UTMs, entry or exit page), the reports that
read events flat (the chart, breakdowns by an event dimension, goals, custom events, properties,
engagement, the filtered page totals) count the events belonging to the visits that pass it
(contract.py, "session filters"). The archive alone finds those by sessionising its events
(session_filters.members_condition). `sessions` holds each visit's properties, so here the
passing visits are read from it and the archive's events joined to them
(stats/sessions_sql.py visit_events_sql). At 10M events, top pages under a source took 5.5 s
the first way and take 1.2 s this way.

`with_visit_events` moves a query's visit filters onto that relation (StatsQuery.visit_events)
when `sessions` holds every one of them and can be trusted over the range. The rest of the
query (event filters, the goal filter) stays where it was. The reports then run raw's SQL
unchanged, so their numbers are raw's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

from clickhouse_connect.driver.client import Client

from storage.queries import agg
from storage.queries.contract import Expression, Logic, StatsQuery, VisitEvents, dimensions_of
from storage.queries.session_filters import SESSION_FILTERS
from tally.clock import as_utc


@dataclass(frozen=True)
class Split:
    """A query's filters in two parts: those on visit properties and those on events."""

    visit_filters: dict[str, str]
    visit_where: Expression | None
    event_filters: dict[str, str]
    event_where: Expression | None


def split(q: StatsQuery, held: set[str]) -> Split | None:
    """q's filters split into those on the visit properties in `held` and the rest, or None when
    some visit filter is not held (the channel), an expression mixes both kinds below a
    top-level `and`, or no visit filter is held at all."""
    visit_filters = {name: value for name, value in q.filters.items() if name in held}
    if any(name in SESSION_FILTERS and name not in held for name in q.filters):
        return None
    visit_parts: list[Expression] = []
    event_parts: list[Expression] = []
    if q.where is not None:
        operands = (
            q.where.operands if isinstance(q.where, Logic) and q.where.operator == "and" else (q.where,)
        )
        for operand in operands:
            named = dimensions_of(operand)
            if named <= held:
                visit_parts.append(operand)
            elif named & set(SESSION_FILTERS):
                return None  # visit and event conditions under one `or` / `not`, or the channel
            else:
                event_parts.append(operand)
    if not visit_filters and not visit_parts:
        return None
    return Split(
        visit_filters=visit_filters,
        visit_where=_joined(visit_parts),
        event_filters={name: value for name, value in q.filters.items() if name not in held},
        event_where=_joined(event_parts),
    )


def _joined(parts: list[Expression]) -> Expression | None:
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else Logic("and", tuple(parts))


def with_visit_events(client: Client, q: StatsQuery) -> StatsQuery | None:
    """q with its visit filters moved onto the events of the visits passing them, read through
    `sessions` (StatsQuery.visit_events), or None when `sessions` cannot answer them exactly:
    a filter it does not hold, page views the stream jobs never counted (late) in the range or
    the day before it (raw's window for visits), or visits written before the columns the
    filters read (sessions_sql.report_doubts_sql)."""
    from stats import sessions_sql  # stats imports storage.queries: lazily, once both are loaded

    parts = split(q, set(sessions_sql.report_columns()))
    if parts is None:
        return None
    visits = StatsQuery(
        q.site,
        q.start,
        q.end,
        filters=parts.visit_filters,
        where=parts.visit_where,
        session_gap_s=q.session_gap_s,
        timezone=q.timezone,
    )
    day_before = as_utc(q.start).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=1)
    if agg.misses_late_events(client, replace(visits, start=day_before)):
        return None
    parameters = visits.parameters()
    if any(
        client.query(sql, parameters=parameters).result_rows for sql in sessions_sql.report_doubts_sql(visits)
    ):
        return None
    sql, extra = sessions_sql.visit_events_sql(visits)
    return replace(
        q, filters=parts.event_filters, where=parts.event_where, visit_events=VisitEvents(sql, extra)
    )
