"""The planner (Plausible calls its own the table decider): which exact source answers each
metric of a query of the model (stats/query.py), and their parts joined into raw_sql's answer.

The sources: the stream jobs' `sessions` table (stats/sessions_sql.py) for visit metrics by and
under the visit properties it holds, time and the page (`paths`), and the archive
(stats/raw_sql.py) for the rest.
`plan` is the decision alone, a pure function of the query (and of whether late events touch
its range, or other events could pass its page filter), so that unit tests check it without ClickHouse:
- the archive answers everything when `raw` is asked, when page views the stream jobs never
  counted touch the range (storage.queries.agg.misses_late_events: `sessions` misses them), or
  when `sessions` answers no metric of the query;
- when the filter or a dimension names the page and an event besides page views in the range's
  visits could pass the filter (`other_events`: `sessions.paths` holds page views only; by the
  page without a filter, any custom event there, whose page the visit may never have viewed),
  `sessions` also reads those custom events (Plan.custom_events, from custom_events_by_page): the
  visits they keep under a page filter, the pages they add to their visits by the page. Never
  the archive for that: the answer stays `agg`;
- `sessions` answers every metric when they are all visit metrics it answers (meta.source agg);
- otherwise the two are joined only when the archive's part needs no visit (raw_sql.events_alone:
  its events read flat, nothing sessionised, e.g. visitors and bounce_rate by day, unfiltered,
  or by the page);
  where the archive must sessionise anyway, its visit metrics come with it at no extra cost, so
  it answers them all (joining would only add the `sessions` read).
Both parts are raw_sql's counting rows (kind, d0…, counts): the archive's of kind event / total,
`sessions`' of kind visit. raw_sql.merged, ordered and paginated then make the answer from them,
so its rows, order and page are those raw_sql alone gives.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

from clickhouse_connect.driver.client import Client

from stats import raw_sql, sessions_sql
from stats.query import Query, Source, validate
from storage.channel_rules import list_rules
from storage.goals import list_goals
from storage.queries.agg import misses_late_events
from storage.queries.contract import StatsQuery


@dataclass(frozen=True)
class Plan:
    """Which metrics each source answers; `archive_flat`: the archive's part reads its events
    flat (raw_sql.events_alone), its visits coming from `sessions`; `archive_tagged`: the
    archive's part reads its events tagged with their visits' properties from `sessions`
    (sessions_sql.tags_events), its visits coming from `sessions` too."""

    sessions: tuple[str, ...] = ()
    archive: tuple[str, ...] = ()
    archive_flat: bool = False
    archive_tagged: bool = False
    # `sessions` also reads the custom events passing the filter (sessions_sql.compile_sessions:
    # the visits they keep under a page filter, their pages by the page), since one could be in
    # the visits (other_events)
    custom_events: bool = False

    @property
    def source(self) -> Source:
        """`agg` when every metric comes from the aggregates, else `raw` (meta.source)."""
        return "agg" if self.sessions and not self.archive else "raw"


def plan(
    query: Query, late_events: bool = False, other_events: bool = False, rows_before_paths: bool = False
) -> Plan:
    """The sources of `query`'s metrics; `late_events`: page views the stream jobs never counted
    touch its range; `other_events`: an event besides page views in its visits could pass its
    filter (sessions_sql.other_events_sql) when it reads `paths` (a page filter or dimension),
    which holds page views only, so `sessions` reads the custom events too (Plan.custom_events);
    `rows_before_paths`: its range holds visits written before migrations 0062 / 0063, which
    read '' / [] in the columns added then (sessions_sql.COLUMNS_SINCE_PATHS, `paths`)."""
    everything = Plan(archive=query.metrics)
    asked_agg = query.source == "agg" and not late_events
    custom_events = other_events and sessions_sql.reads_paths(query)
    if rows_before_paths and sessions_sql.reads_columns_since_paths(query):
        return everything
    if not asked_agg or "exit_rate" in query.metrics or not sessions_sql.answers(query):
        return everything  # exit_rate's exits are the archive's visit side
    from_sessions = tuple(name for name in query.metrics if name in sessions_sql.SESSION_METRICS)
    rest = tuple(name for name in query.metrics if name not in sessions_sql.SESSION_METRICS)
    if not from_sessions:
        return everything
    if not rest:
        return Plan(sessions=from_sessions, custom_events=custom_events)
    if raw_sql.events_alone(replace(query, metrics=rest)):
        return Plan(sessions=from_sessions, archive=rest, archive_flat=True, custom_events=custom_events)
    if sessions_sql.tags_events(replace(query, metrics=rest)):
        return Plan(sessions=from_sessions, archive=rest, archive_tagged=True, custom_events=custom_events)
    return everything


def other_events(client: Client, query: Query) -> bool:
    """Whether an event besides page views could pass the query's filter in its visits when the
    filter or a dimension names the page (False otherwise: nothing to check)."""
    return sessions_sql.reads_paths(query) and _found(client, sessions_sql.other_events_sql(query))


def rows_before_paths(client: Client, query: Query) -> bool:
    """Whether the query reads a `sessions` column added with `paths` (0062 / 0063) over a range
    holding visits written before them: those read '' / [] until `tally replay`."""
    return sessions_sql.reads_columns_since_paths(query) and _found(
        client, sessions_sql.rows_before_paths_sql(query)
    )


def _found(client: Client, compiled: raw_sql.Compiled) -> bool:
    """Whether a check's query (one row or none) found a row."""
    return bool(client.query(compiled.sql, parameters=compiled.parameters).result_rows)


@dataclass(frozen=True)
class Answer:
    rows: list[raw_sql.Row]
    source: Source  # `agg` when every metric came from the aggregates (Plan.source)


def answer(client: Client, query: Query) -> Answer:
    """`query`'s rows as raw_sql.answer gives them, from the sources `plan` picks."""
    validate(query)
    decided = plan(query)
    around = StatsQuery(query.site, query.start, query.end, session_gap_s=query.session_gap_s)
    if decided.sessions and misses_late_events(client, around):
        decided = plan(query, late_events=True)
    if decided.sessions and other_events(client, query):
        decided = plan(query, other_events=True)
    if decided.sessions and rows_before_paths(client, query):
        decided = plan(query, rows_before_paths=True)
    if decided.archive_tagged and late_or_doubtful(client, query):  # the day before the range too
        decided = plan(query, late_events=True)
    if not decided.sessions:
        if query.source == "agg" and sessions_sql.tags_events(query) and not late_or_doubtful(client, query):
            return _tagged_answer(client, query)
        return Answer(raw_sql.answer(client, query), "raw")
    named = raw_sql._names(query)
    rules = tuple(list_rules(client, query.site)) if "visit:channel" in named else ()
    visits = sessions_sql.compile_sessions(query, rules, custom_events=decided.custom_events)
    counts = raw_sql._rows(client, visits, lambda kind: kind == "visit")
    goals = {goal.name: goal for goal in list_goals(client, query.site)} if "event:goal" in named else {}
    if decided.archive_flat:  # the archive's part: its events, read flat
        flat = raw_sql.compile_query(query, rules, goals, rows="flat")
        counts += raw_sql._rows(client, flat, lambda kind: kind != "visit")
    source = decided.source
    if decided.archive_tagged:  # the archive's part: its events, with their visits' properties
        events, source = _event_side(client, query, rules, goals, decided.archive)
        counts += raw_sql._rows(client, events, lambda kind: kind != "visit")
    merged = raw_sql.merged(query, raw_sql.answer_columns(query), counts)
    return Answer(raw_sql.paginated(raw_sql.ordered(merged, query), query), source)


def late_or_doubtful(client: Client, query: Query) -> bool:
    """Whether `sessions` cannot be trusted for the visits of `query`'s events: page views the
    stream jobs never counted from the day before its range on (raw_sql's window for visits), or
    visits written before the columns it reads."""
    day_before = query.start.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=1)
    around = StatsQuery(query.site, day_before, query.end, session_gap_s=query.session_gap_s)
    return misses_late_events(client, around) or rows_before_paths(client, query)


def _tagged_answer(client: Client, query: Query) -> Answer:
    """raw_sql.answer's rows of a query sessions_sql.tags_events holds: its events' counts
    (_event_side), and the visit side of the visitors with a matching event after the range
    (sessionised, as raw_sql.counted does for events alone: a visit starting inside the range adds
    the combinations of its matching events after it; none for a range ending now)."""
    named = raw_sql._names(query)
    rules = tuple(list_rules(client, query.site)) if "visit:channel" in named else ()
    goals = {goal.name: goal for goal in list_goals(client, query.site)} if "event:goal" in named else {}
    after = raw_sql.compile_query(query, rules, goals, rows="after")
    events, source = _event_side(client, query, rules, goals)
    counts = raw_sql._rows(client, events, lambda kind: kind != "visit")
    counts += raw_sql._rows(client, after, lambda kind: kind == "visit")
    merged = raw_sql.merged(query, raw_sql.answer_columns(query), counts)
    return Answer(raw_sql.paginated(raw_sql.ordered(merged, query), query), source)


def _event_side(
    client: Client, query: Query, rules: tuple, goals: dict, event_metrics: tuple[str, ...] = ()
) -> tuple[raw_sql.Compiled, Source]:
    """The event counts of a query whose event metrics (`event_metrics`, or all of its metrics)
    sessions_sql.tags_events holds, and their source: visitors alone by the page and visit
    properties from `sessions`' paths and the custom events' table (sessions_sql.counts_visitors;
    `agg`, the archive read only for the page views of the few visits across the range's edges or
    a UTC midnight, as the filtered aggregate reads its edges), unless a visit of the range was
    written before `paths`; else the range's events tagged with their visits' properties (`raw`:
    every event of the range read)."""
    events_asked = replace(query, metrics=event_metrics or query.metrics)
    if sessions_sql.counts_visitors(events_asked) and not _found(
        client, sessions_sql.rows_before_paths_sql(query)
    ):
        return sessions_sql.visitor_rows_sql(events_asked, rules), "agg"
    return _tagged(query, rules, goals), "raw"


def _tagged(query: Query, rules: tuple, goals: dict | None = None) -> raw_sql.Compiled:
    """compile_query over the range's events tagged with their visits' properties."""
    rows, tag_parameters = sessions_sql.tagged_rows_sql(query)
    tagged = raw_sql.compile_query(query, rules, goals, rows=rows)
    return replace(tagged, parameters={**tagged.parameters, **tag_parameters})
