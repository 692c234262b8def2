"""The query layer: the one package the dashboard and the stats API read through.

`contract` states what a report asks and what its numbers mean; `raw` answers from the
archive, `agg` from the stream jobs' rollups. The functions here validate a query and
dispatch on its source; a filtered report always reads the archive (the rollups keep one
dimension at a time).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, date, datetime
from types import ModuleType

from clickhouse_connect.driver.client import Client

from storage.calendar import INTERVALS, InvalidTimezone, local_date, zone
from storage.channel_rules import list_rules
from storage.channels import CHANNEL
from storage.goals import Goal, InvalidGoal, find_goal, list_goals
from storage.queries import agg, channels, funnel_days, funnels, raw, visit_events
from storage.queries.contract import (
    DIMENSIONS,
    ENGAGED_BOUNCE_MS,
    EVENT_DIMENSIONS,
    GOAL_FILTER,
    INTERVAL_SQL,
    INTERVAL_STEP,
    LIVE_WINDOW,
    MAX_BUCKETS,
    MAX_PROPERTY_KEY,
    SESSION_DIMENSIONS,
    SESSION_GAP_S,
    BreakdownRow,
    Condition,
    EventRow,
    Expression,
    GoalRow,
    Interval,
    Logic,
    PageEngagement,
    Point,
    SessionBreakdownRow,
    SessionPoint,
    SessionRow,
    Source,
    StatsQuery,
    UnsupportedQuery,
    bucket_count,
    buckets,
    check_bucket_count,
    check_patterns,
    dimensions_of,
    fitting_interval,
    metrics,
    metrics_from_totals,
    validate,
    validate_expression,
)
from storage.queries.funnels import FunnelReport, FunnelStep, StepResult, checked_steps
from storage.queries.journeys import JourneyQuestion, JourneyRow, journeys
from storage.queries.raw import SESSION_PROPERTIES, raw_sessions_sql
from storage.sites import list_sites, site_timezone
from storage.tables import EVENTS

__all__ = [
    "CHANNEL",
    "DIMENSIONS",
    "ENGAGED_BOUNCE_MS",
    "EVENT_DIMENSIONS",
    "GOAL_FILTER",
    "INTERVALS",
    "INTERVAL_SQL",
    "INTERVAL_STEP",
    "LIVE_WINDOW",
    "MAX_BUCKETS",
    "MAX_PROPERTY_KEY",
    "SESSION_DIMENSIONS",
    "SESSION_GAP_S",
    "SESSION_PROPERTIES",
    "BreakdownRow",
    "Condition",
    "EventRow",
    "Expression",
    "FunnelReport",
    "FunnelStep",
    "GoalRow",
    "Interval",
    "InvalidTimezone",
    "JourneyQuestion",
    "JourneyRow",
    "Logic",
    "PageEngagement",
    "Point",
    "SessionBreakdownRow",
    "SessionPoint",
    "SessionRow",
    "Source",
    "StatsQuery",
    "StepResult",
    "UnsupportedQuery",
    "aggregate",
    "answered_source",
    "breakdown",
    "bucket_count",
    "buckets",
    "check_bucket_count",
    "check_patterns",
    "checked_steps",
    "custom_events",
    "engagement",
    "first_day",
    "fitting_interval",
    "funnel",
    "goals",
    "journeys",
    "late_pageviews",
    "metrics",
    "metrics_from_totals",
    "pageviews_per_minute",
    "properties",
    "property_keys",
    "raw_sessions_sql",
    "realtime",
    "session_breakdown",
    "session_timeseries",
    "session_totals",
    "sessions",
    "sites",
    "timeseries",
    "total_pageviews",
    "uses_agg",
    "validate",
    "zone",
]


def with_goal(client: Client, q: StatsQuery) -> StatsQuery:
    """`q` validated, with the goal its `goal` filter names looked up (UnsupportedQuery if the
    site has no such goal), and the site's channel rules if a filter names the channel."""
    validate(q)
    q = with_channel_filter_rules(client, q)
    name = q.filters.get(GOAL_FILTER)
    if name is None:
        return q
    try:
        return replace(q, goal=find_goal(client, q.site, name))
    except InvalidGoal as error:
        raise UnsupportedQuery(f"filters: goal: {error}") from None


def with_channel_rules(client: Client, q: StatsQuery) -> StatsQuery:
    """`q` with the site's channel rules (one small query), unless it carries rules already
    (a what-if's proposed ones)."""
    if q.channel_rules is not None:
        return q
    return replace(q, channel_rules=tuple(list_rules(client, q.site)))


def with_channel_filter_rules(client: Client, q: StatsQuery) -> StatsQuery:
    """`q` with the site's channel rules if a filter (dict or expression) names the channel."""
    if CHANNEL in q.filters or (q.where is not None and CHANNEL in dimensions_of(q.where)):
        return with_channel_rules(client, q)
    return q


def uses_agg(q: StatsQuery, source: Source) -> bool:
    """Whether `source` is one the rollups can answer `q` from: filters always read the archive."""
    return source == "agg" and not q.filtered


def answered_source(client: Client, q: StatsQuery, source: Source) -> Source:
    """The source that answers `q` when `source` is asked: the archive for a filtered report, and
    for a range that late page views touch (older than the allowed lateness when they came, so
    the rollups never counted them: contract.LATE_EVENTS_RULE), so that none is missing from a
    default answer."""
    if uses_agg(q, source) and not agg.misses_late_events(client, q):
        return "agg"
    return "raw"


def answering(client: Client, q: StatsQuery, source: Source) -> ModuleType:
    """The module that answers `q` when `source` is asked (answered_source)."""
    return agg if answered_source(client, q, source) == "agg" else raw


def answering_flat(client: Client, q: StatsQuery, source: Source) -> tuple[ModuleType, StatsQuery]:
    """The module and the query that answer a report reading events flat (the chart, breakdowns by
    an event dimension, goals, custom events, properties, engagement): under visit filters with
    `agg` asked, raw's SQL over the events of the passing visits read through `sessions`
    (visit_events.py) where it can, else as `answering` decides."""
    if source == "agg" and q.filtered:
        moved = visit_events.with_visit_events(client, q)
        if moved is not None:
            return raw, moved
    return answering(client, q, source), q


def aggregate(client: Client, q: StatsQuery, source: Source = "raw") -> dict[str, float]:
    q = with_goal(client, q)
    if source == "agg" and sessions_answer(client, q, page_views=False):
        return _aggregate_with_sessions(client, q)
    return answering(client, q, source).aggregate(client, q)


def _aggregate_with_sessions(client: Client, q: StatsQuery) -> dict[str, float]:
    """raw.aggregate's numbers of a filtered `q`: its visits read from `sessions`; under visit
    filters alone, its page views and visitors too, with the archive's page views of the few visits
    across the range's edges (stats/sessions_sql.py report_aggregate_sql); under a page filter
    alone, those from the rollups' row of that page (the row a breakdown by page reads), else from
    the archive's passing page views."""
    from stats import sessions_sql

    parameters = q.parameters()
    if sessions_sql.answers_report(q, page_views=True):
        sql, extra = sessions_sql.report_edges_sql(q)
        edges = client.query(sql, parameters={**parameters, **extra}).result_rows
        sql, extra = sessions_sql.report_aggregate_sql(q, edges)
        row = client.query(sql, parameters={**parameters, **extra}).result_rows[0]
        sessions, bounces, duration_ms, pageviews, visitors = row
        return metrics_from_totals(pageviews, visitors, sessions, bounces, duration_ms)
    sql, extra = sessions_sql.report_totals_sql(q)
    sessions, bounces, duration_ms = client.query(sql, parameters={**parameters, **extra}).result_rows[0]
    if page_alone(q):
        pageviews, visitors = agg.page_totals(client, q)
    else:
        pageviews, visitors = raw.page_totals(client, visit_events.with_visit_events(client, q) or q)
    return metrics_from_totals(pageviews, visitors, sessions, bounces, duration_ms)


def page_alone(q: StatsQuery) -> bool:
    """Whether q's one filter is the page (`path` = a page): the rollups hold its rows."""
    return q.where is None and list(q.filters) == ["path"]


def timeseries(
    client: Client, q: StatsQuery, interval: Interval = "hour", source: Source = "raw"
) -> list[Point]:
    q = with_goal(client, q)
    if interval not in INTERVALS:
        raise UnsupportedQuery(f"interval must be one of {', '.join(INTERVALS)}")
    check_bucket_count(q, interval)  # every door's cap, wherever its range came from
    if source == "agg" and page_alone(q) and not agg.misses_late_events(client, q):
        points = agg.page_timeseries(client, q, interval)
        if points is not None:
            return points
    module, q = answering_flat(client, q, source)
    return module.timeseries(client, q, interval)


def breakdown(
    client: Client, q: StatsQuery, by: str, limit: int = 10, source: Source = "raw"
) -> list[BreakdownRow]:
    q = with_goal(client, q)
    if by == CHANNEL:  # both sources: the archive's sessions (storage/queries/channels.py)
        return channels.breakdown(client, with_channel_rules(client, q), limit)
    if by not in DIMENSIONS:
        raise UnsupportedQuery(f"by must be one of {sorted(DIMENSIONS)}")
    if by in EVENT_DIMENSIONS:
        module, q = answering_flat(client, q, source)
        return module.breakdown(client, q, by, limit)
    return answering(client, q, source).breakdown(client, q, by, limit)


def session_timeseries(
    client: Client, q: StatsQuery, interval: Interval = "hour", source: Source = "raw"
) -> list[SessionPoint]:
    """Per bucket, the sessions starting in it: count, bounces, summed duration."""
    q = with_goal(client, q)
    if interval not in INTERVALS:
        raise UnsupportedQuery(f"interval must be one of {', '.join(INTERVALS)}")
    check_bucket_count(q, interval)
    if source == "agg" and sessions_answer(client, q, page_views=False):
        from stats import sessions_sql

        sql, parameters = sessions_sql.report_timeseries_sql(q, interval)
        rows = client.query(sql, parameters={**q.parameters(), **parameters}).result_rows
        return raw.fill_sessions(q, interval, rows)
    return answering(client, q, source).session_timeseries(client, q, interval)


def session_totals(
    client: Client, q: StatsQuery, where: Expression, by: str | None = None, limit: int = 10
) -> list[SessionBreakdownRow]:
    """The sessions whose properties (SESSION_DIMENSIONS: source, campaign, entry and exit
    page) pass `where`, in total or per value of the session dimension `by`; read from the
    archive on either source, as every filtered report (the rollups hold no session's
    properties together)."""
    q = with_goal(client, q)
    validate_expression(where, raw.SESSION_FILTER_COLUMNS)
    if CHANNEL in dimensions_of(where) | {by}:
        q = with_channel_rules(client, q)
    if by is not None and by not in raw.SESSION_FILTER_COLUMNS:
        raise UnsupportedQuery(f"a session breakdown is by one of {sorted(raw.SESSION_FILTER_COLUMNS)}")
    rows = raw.session_totals(client, q, where, by, limit)
    return rows if by is not None or rows else [SessionBreakdownRow("", metrics(0, 0, 0, 0, 0.0))]


def session_breakdown(
    client: Client, q: StatsQuery, by: str, limit: int = 10, source: Source = "raw"
) -> list[SessionBreakdownRow]:
    """Per value of a session dimension (SESSION_DIMENSIONS): its sessions' numbers, as the
    aggregate report's (visits, bounce rate, average duration with page views and visitors)."""
    q = with_goal(client, q)
    if by == CHANNEL:
        return channels.session_breakdown(client, with_channel_rules(client, q), limit)
    if by not in SESSION_DIMENSIONS:
        raise UnsupportedQuery(f"a session breakdown is by one of {sorted(SESSION_DIMENSIONS)}")
    if source == "agg" and sessions_answer(client, q, by):
        return _sessions_breakdown(client, q, by, limit)
    return answering(client, q, source).session_breakdown(client, q, by, limit)


def sessions_answer(client: Client, q: StatsQuery, by: str | None = None, page_views: bool = True) -> bool:
    """Whether the stream jobs' `sessions` answers a filtered session report by `by` (None: over
    time, or in total) exactly, rather than the archive: filters on the visit properties it holds
    (and on the page, in a report without page views: stats/sessions_sql.py answers_report), no
    late page views in the range (`sessions` never counted them), and none of the doubts
    sessions_sql.report_doubts_sql looks for."""
    from stats import sessions_sql  # stats imports storage.queries: lazily, once both are loaded

    if not sessions_sql.answers_report(q, by, page_views) or agg.misses_late_events(client, q):
        return False
    parameters = q.parameters()
    return not any(
        client.query(sql, parameters=parameters).result_rows for sql in sessions_sql.report_doubts_sql(q)
    )


def _sessions_breakdown(client: Client, q: StatsQuery, by: str, limit: int) -> list[SessionBreakdownRow]:
    """raw.session_breakdown's rows, read from `sessions` (the same sessions, the same numbers)."""
    from stats import sessions_sql

    sql, parameters = sessions_sql.report_breakdown_sql(q, by)
    rows = client.query(sql, parameters={**q.parameters(), **parameters, "limit": limit}).result_rows
    return [
        SessionBreakdownRow(value, metrics_from_totals(pageviews, visitors, sessions, bounces, duration_ms))
        for value, pageviews, visitors, sessions, bounces, duration_ms in rows
    ]


def engagement(
    client: Client, q: StatsQuery, paths: list[str], source: Source = "raw"
) -> dict[str, PageEngagement]:
    """Time on page and scroll depth of each of `paths` (contract.py), those with engagement;
    with a goal filter, the converted visitors' (the goal looked up as every report does)."""
    q = with_goal(client, q)
    if not paths:
        return {}
    module, q = answering_flat(client, q, source)
    return module.engagement(client, q, paths)


def sessions(client: Client, q: StatsQuery, limit: int = 100, source: Source = "raw") -> list[SessionRow]:
    q = with_goal(client, q)
    return answering(client, q, source).sessions(client, q, limit)


def realtime(
    client: Client, site: str, now: datetime | None = None, source: Source = "raw"
) -> dict[str, int]:
    return (agg if source == "agg" else raw).realtime(client, site, now or datetime.now(UTC))


def pageviews_per_minute(
    client: Client, site: str, start: datetime, end: datetime, source: Source
) -> list[Point]:
    """Per-minute page views and visitors (the dashboard's live chart)."""
    q = StatsQuery(site, start, end)
    return (agg if source == "agg" else raw).timeseries(client, q, "minute")


def funnel(
    client: Client,
    q: StatsQuery,
    steps: Sequence[FunnelStep],
    source: Source = "raw",
    now: datetime | None = None,
) -> FunnelReport:
    """Visitors and sessions reaching each step: `raw` computes it from the archive, `agg` sums
    the stored per-day results and computes only the rest live (storage/queries/funnel_days.py);
    the two agree by construction. The report names the source that answered."""
    if source == "agg":
        return funnel_days.funnel(client, with_goal(client, q), steps, now)
    return funnels.funnel(client, with_goal(client, q), steps)


def late_pageviews(client: Client, q: StatsQuery) -> int:
    """Page views in the range that the rollups miss: they came behind the watermark."""
    return agg.late_pageviews(client, q)


def sites(client: Client) -> list[str]:
    """Sites to pick from: those with events in the archive, busiest first, then every registered
    site without any. A scan of the archive's site column: 50 ms at 10M events, 450 ms at 121M
    (the rollups would be cheaper, but a site is listed as soon as its first event is archived,
    before the stream jobs derive it). The archive's list is capped at 1000; a registered site is
    always listed, however quiet, so a tenant's own site never drops out behind busier ones."""
    busiest = [
        row[0]
        for row in client.query(
            f"SELECT site FROM {EVENTS} GROUP BY site ORDER BY count() DESC LIMIT 1000"
        ).result_rows
    ]
    listed = set(busiest)
    return busiest + [site for site in list_sites(client) if site not in listed]


def first_day(client: Client, site: str) -> date | None:
    """The site's local day (in its time zone) of its first archived event (None without any):
    where "all time" starts. Local, since every caller starts a range at that day's local
    midnight: the UTC day would leave out a New York site's first evening events."""
    earliest = client.query(
        f"SELECT min(ts), count() FROM {EVENTS} WHERE site = {{site:String}}", parameters={"site": site}
    ).result_rows[0]
    return local_date(earliest[0], zone(site_timezone(client, site))) if earliest[1] else None


def total_pageviews(client: Client, site: str) -> int:
    return int(
        client.query(
            f"SELECT count() FROM {EVENTS} WHERE site = {{site:String}} AND name = 'pageview'",
            parameters={"site": site},
        ).result_rows[0][0]
    )


# --- goals, custom events, properties ---------------------------------------------


def goals(client: Client, q: StatsQuery, source: Source = "raw") -> list[GoalRow]:
    """The site's goals' numbers over the range (contract.py: goals)."""
    return goals_of(client, q, list_goals(client, q.site), source)


def goals_of(client: Client, q: StatsQuery, site_goals: list[Goal], source: Source = "raw") -> list[GoalRow]:
    """The numbers of `site_goals` (stored or proposed, `tally whatif goals`) over the range:
    goals apply at read time, so any set of goals is answered from the same tables."""
    q = with_goal(client, q)
    if not site_goals:
        return []
    module, q = answering_flat(client, q, source)
    return module.goals(client, q, site_goals)


def custom_events(client: Client, q: StatsQuery, limit: int = 10, source: Source = "raw") -> list[EventRow]:
    """Custom events by name (breakdown `event:name`)."""
    q = with_goal(client, q)
    module, q = answering_flat(client, q, source)
    return module.custom_events(client, q, limit)


def properties(
    client: Client, q: StatsQuery, key: str, goal: str = "", limit: int = 10, source: Source = "raw"
) -> list[EventRow]:
    """Values of property `key` on the custom events, or on goal `goal`'s events."""
    q = with_goal(client, q)
    if not key or len(key) > MAX_PROPERTY_KEY:
        raise UnsupportedQuery(f"a property key has 1 to {MAX_PROPERTY_KEY} characters")
    try:
        site_goal = find_goal(client, q.site, goal) if goal else None
    except InvalidGoal as error:
        raise UnsupportedQuery(f"goal: {error}") from None
    module, q = answering_flat(client, q, source)
    return module.properties(client, q, key, site_goal, limit)


def property_keys(
    client: Client, q: StatsQuery, limit: int = 50, source: Source = "raw", only: Sequence[str] = ()
) -> list[str]:
    """The custom events' property keys in the range, the most used first (the dashboard's
    picker); only those in `only` when it names any (the site's custom properties)."""
    q = with_goal(client, q)
    module, q = answering_flat(client, q, source)
    return module.property_keys(client, q, limit, only)
