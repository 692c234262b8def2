"""What a report asks and answers, and what its numbers mean: the contract both sources keep.

Parameterised SQL only: user values travel as `{name:Type}` parameters, never spliced into
the SQL text; dimension names are looked up in a fixed table of columns.

Each metric is answered from one of two sources (DESIGN.md):
- `raw` (raw.py): the archive (`events`), computed at query time;
- `agg` (agg.py): the rollups and sessions the stream jobs derive from the same log.
Once the stream jobs have processed an event both give the same numbers. The definitions:

- page view: an event with name = 'pageview'. Page views and visitors count the page views
  whose event time `ts` is in [start, end).
- visitor: a distinct (UTC day of the event, visitor_id). visitor_id rotates with the daily
  salt, so for browser events this is distinct visitor_id; stated per day, visitors over whole
  days are the sum of the days' exact counts, which is what the rollups store. Counted as
  uniqExact over a 64-bit hash (cityHash64(visitor_id), `visitor_key` in `events`, migration
  0005, combined with the day): exact but for 64-bit hash collisions.
- a site's time zone (`StatsQuery.timezone`, storage/calendar.py; `tally sites timezone`)
  decides only where a timeseries' hours, days, weeks and months start: at the site's local
  midnight, so a daylight-saving day has 23 or 25 hours. The visitor stays a (UTC day,
  visitor_id): the daily salt rotates at UTC midnight, so nothing can tell that the id before
  and the id after it are one person. Over any range — a local day too — visitors are the
  distinct (UTC day, visitor_id) pairs among its page views, on both sources. Hence: a local
  day holding a UTC midnight (every day of a zone other than UTC) counts a person active on
  both sides of it twice; and one id active on both sides of a local midnight within one UTC
  day is a visitor of each local day and one visitor of both, so local days do not add up to
  a local week exactly (UTC days do). Page views, sessions, bounces and durations add up.
- session: one visitor's page views of one site whose consecutive gaps are all ≤
  session_gap_s (a gap of exactly session_gap_s continues the session); page views in the
  same millisecond are ordered by event_id. A session belongs to the range its first page
  view falls in, and may run past midnight.
- engaged session: a session whose engaged time, the sum of `engagement_ms` of the engagement
  events belonging to it, is at least engaged_bounce_ms (ENGAGED_BOUNCE_MS, 10 s, setting
  TALLY_ENGAGED_BOUNCE_MS): GA4's "engaged session" threshold. An engagement event belongs to
  the session of the same visitor and site whose [first page view ts, last page view ts +
  session_gap_s] holds its ts (bounds included). The trackers send one when the page is hidden
  or left, so it may come up to the gap after its page view; these intervals never overlap
  (the next session starts more than the gap after the last page view), so this is the
  session of the visitor's latest page view at or before it, if that page view is at most the
  gap before it. An engagement event matching no session (before the visitor's first page
  view, or more than the gap after the last; after midnight UTC, the daily salt gives its
  visitor another visitor_id) changes nothing. Engagement events never start,
  extend or split a session: its start, end, duration, page views and entry/exit pages are
  its page views'. Under filters a session is counted whole (filters, below), its engaged time too.
- bounce: a session with exactly one page view whose visitor was not engaged in it (engaged
  time < engaged_bounce_ms); bounce_rate = bounces / sessions (0 if none). Plausible differs:
  its engagement events never affect the bounce rate (custom events do); Tally counts a
  visitor who read a single page for a while as no bounce, as GA4 does, because one long read
  is a visit that found what it came for, not one that left at once.
- session duration: last page view time - first page view time, in seconds.
- entry / exit page: path of the first / last page view of the session.
- breakdowns: path, country, browser, os, device, language, screen_size count page views
  (event level); entry_path, exit_path, referrer_domain, utm_source, utm_medium,
  utm_campaign, utm_content, utm_term are properties of a session (those of its first / last
  page view) and count the page views and visitors of those sessions, a visitor on the day
  its session starts.
- session breakdown (a session dimension) and session timeseries: the sessions starting in the
  range counted per value (with their page views and visitors, as the breakdown counts them),
  or per bucket their start falls in: sessions, bounces, bounce rate and average duration as
  the aggregate report states them.
- language: the browser's preferred language as the collector recorded it ('' unknown).
- screen_size: the class of the page view's screen width (SCREEN_SIZES, Plausible's
  thresholds): Mobile < 576 px, Tablet < 992 px, Laptop < 1440 px, Desktop otherwise;
  '' when the width is unknown (0).
- live visitors: distinct visitors with a page view in the last 5 minutes.
- funnel (funnels.py): an ordered list of 2-8 steps, each a page path pattern
  (storage/page_patterns.py: `*` any run of characters; matched by page views) or a custom
  event's name (an event with name != 'pageview'; 'engagement' is never a step). Funnels are
  evaluated per funnel session: one visitor's page views AND custom events of one site
  (engagement events excluded), split where the gap between consecutive events exceeds
  session_gap_s, events in the same millisecond ordered by event_id. A session reaches step k
  when it has events matching steps 1..k in that order, each strictly after the one matching
  the step before (greedy, one step per event: a page view matching steps 1 and 2 reaches
  step 1 only). A session counts in the range its first event falls in. Per step: sessions
  reaching it; visitors reaching it as distinct (UTC day of the session's start, visitor_id);
  drop-off = the previous step's visitors - this step's, drop-off rate = drop-off / the
  previous step's visitors, conversion rate = visitors / the first step's visitors (0-1; 0
  where the base is 0). Filters restrict which sessions are considered: those with at least
  one page view matching every filter; all of a considered session's events count for its
  steps. `source=agg` answers funnels from the archive too, and the report says so: the
  rollups hold counts, not the order of a session's events, so they cannot answer exactly.
- engagement event: an event with name = 'engagement' (Tally's tracker and Plausible's send one
  when a page is hidden or left): `engagement_ms`, the engaged time (page visible and focused)
  since the page view's previous engagement event, and `scroll_depth`, the deepest point of the
  page seen so far in percent. Engagement events are never page views or custom events, and do
  not change page views, visitors, sessions or session durations; they change bounces only
  through the engaged time of their session (engaged session, above).
- per page (path), over the engagement events whose `ts` is in [start, end) (agg: whose minute
  starts in it) that pass the filters: engaged visitors = distinct visitors (as above) with an
  engagement event on the page; time_on_page_s = the page's total engaged time ÷ its engaged
  visitors, in seconds (Plausible's definition); scroll_depth = the average over its engaged
  visitors of the deepest scroll depth each reached on the page, in percent (0 if none).
- filters restrict the events every report counts: a dimension (path, country, …) to events
  with that value; `goal` to the visitors (day, visitor) who converted on that goal in the
  range (all their events in the range count); `props.KEY` to events carrying KEY = value.
  Sessions are not rebuilt from the passing events (Plausible's visits): the sessions counted are
  the whole sessions, formed from all of the site's page views, that hold an event passing the
  filters — one of their page views, or a custom event of their visitor within [first page view,
  last page view + session_gap_s] — and their sessions, bounces, durations and session properties
  (source, UTMs, channel, entry/exit page) are the whole sessions'; page views and visitors,
  in totals and in session breakdowns alike, are the passing page views'.
  A filtered report is computed from the archive (raw) on either source.
- session filters: a session property (entry_path, exit_path, referrer_domain, utm_source,
  utm_medium, utm_campaign, utm_content, utm_term, as the session breakdowns define them, and
  channel, storage/channels.py) restricts the events to those belonging to a session whose
  property passes: its page views, and the engagement and custom events of its visitor within
  [its first page view, its last page view + session_gap_s] (the rule of engaged sessions).
  Sessions are formed from all of the site's events, whatever the other filters: "source is
  google and page is /pricing" counts the /pricing page views of sessions that came from
  google. `is_not` and the *_not operators keep the events of the sessions whose property is
  none of the values (an event in no session, such as a custom event before any page view,
  passes no session filter). storage/queries/session_filters.py holds the SQL.
- a filter expression (`StatsQuery.where`, Plausible's filters) restricts the events the same
  way, with more operators: is / is_not (the value is / is none of the values), contains /
  contains_not (some value is / none is a substring), matches / matches_not (some RE2 regular
  expression matches / none does, anywhere in the value unless anchored), combined with and,
  or and not. On `props.KEY`, is_not and the *_not operators also keep the events without KEY
  (as Plausible counts them: a missing property is none of the values); the value `(none)`
  (NOT_SET) in an is / is_not on `props.KEY` is "KEY not set", so `is (none)` keeps the events
  without KEY and `is_not (none)` only those with it (Plausible's meaning). Browser and OS
  values are Plausible's names, an older stored or given name read as its new one
  (storage/client_names.py: `Mac OS X` is `Mac`).

Late events (stream_jobs/jvm/.../VisitorActivity.java): `agg` counts an event the
stream jobs receive up to the allowed lateness behind their watermark (TALLY_ALLOWED_LATENESS_S,
72 h, GA4's) exactly as raw does, in every figure: it may open, extend or merge sessions, and
the rollups and session rows change accordingly. LATE_EVENTS_RULE says what happens to an older
one; `meta.late_events` reports them per UTC day and when they were recorded.

Rollups hold the dimensions added with migration 0024 (language, screen_size,
utm_medium/campaign/content/term) only for page views the stream jobs processed since the
upgrade; `tally replay` rebuilds older ones from the log (README, "Upgrading").

Goals, custom events and properties (storage/goals.py, migration 0022):
- custom event: an event whose name is neither 'pageview' nor 'engagement'.
- a goal's events: for an event goal the custom events of its name, for a page goal the page
  views whose path matches its pattern (`*` any run of characters); ts in [start, end).
- a goal's visitors (unique conversions): distinct visitors (as above: (UTC day, visitor_id))
  with at least one of its events in the range.
- conversion_rate = the goal's visitors / the site's visitors (those with a page view in the
  range), rounded to 4 places; 0 when the site had no visitor. It may exceed 1 when custom
  events come from visitors without a page view in the range (a server-side sender).
- revenue (revenue goals, which name a currency): only the goal's events carrying revenue in
  the goal's currency count; events in another currency are left out (no conversion rates are
  assumed). revenue_total is their sum, revenue_events their number, revenue_average the
  total / revenue_events (0 if none), exact decimals with 6 places (rounded to 2 for display).
- property breakdown by KEY: the custom events carrying KEY (all of them, or one goal's),
  per value: events and visitors. It counts custom events only, so a page goal's is empty.
- custom event breakdown (`event:name`): per custom event name, events and visitors.
On agg these are read from goal_events_minute / goal_props_minute (materialized views on the
archive), at minute resolution: the minute buckets whose start is in [start, end).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Literal

import re2  # google-re2: the library ClickHouse's match() compiles patterns with

from stats import catalogue
from stats.catalogue import SCREEN_SIZE_WIDEST as SCREEN_SIZE_WIDEST  # re-exported (stream jobs, OpenAPI)
from stats.catalogue import SCREEN_SIZES as SCREEN_SIZES
from stats.catalogue import screen_size_sql as screen_size_sql
from storage.calendar import UTC_NAME, Interval, InvalidTimezone, bucket_starts, zone
from storage.channels import ChannelRule, rules_parameters
from storage.client_names import NAMES as CLIENT_NAMES
from storage.client_names import plausible_name, plausible_values
from storage.queries.session_filters import SESSION_FILTERS, members_condition
from storage.tables import EVENTS
from tally.clock import as_utc
from tally.refusal import Refused

if TYPE_CHECKING:
    from storage.goals import Goal

Source = Literal["raw", "agg"]

SESSION_GAP_S = 1800
# The rule for events older than the allowed lateness (the contract's "Late events").
LATE_EVENTS_RULE = (
    "An event that reaches the stream jobs more than the allowed lateness (TALLY_ALLOWED_LATENESS_S) "
    "behind their watermark, and would change a number already final, is late: the rollups never "
    "count it and the late_events table records it per site and minute. A report whose range lies "
    "within one session gap of a late event is answered from the archive (raw) even when agg is "
    "asked, and says so (meta.source): the answer includes it, whatever the source asked. The "
    "archive answers rather than a backfill folding it into the rollups, because a late page view "
    "may merge sessions the live rollups already emitted and be followed by more of them; reading "
    "the archive for the few ranges that hold one is exact at once, needs no second writer to the "
    "rollups racing the stream jobs, and costs one indexed read of late_events per answer."
)
# A session with this much engaged time (ms) or more is engaged, hence no bounce (GA4's 10 s).
ENGAGED_BOUNCE_MS = 10_000
LIVE_WINDOW = timedelta(minutes=5)

# Distinct visitors, a visitor being a (UTC day, visitor_id): `events` stores
# cityHash64(visitor_id) as visitor_key; sessions hash visitor_id inline, on their start's day.
RAW_VISITORS = "uniqExact(cityHash64(visitor_key, toDate(ts)))"
SESSION_VISITORS = "uniqExact(cityHash64(cityHash64(visitor_id), toDate(start)))"

# Screen-size classes and the dimensions' columns are the catalogue's (stats/catalogue.py).
# Dimension name → column or expression (event level), or session property. Never a user
# string in SQL.
EVENT_DIMENSIONS = {entry.tally: entry.raw_sql for entry in catalogue.rolled_up("event")}
SESSION_DIMENSIONS = {entry.tally: entry.tally for entry in catalogue.rolled_up("session")}
DIMENSIONS = {**EVENT_DIMENSIONS, **SESSION_DIMENSIONS}
# Filters beyond the dimensions: a goal's converted visitors, a property's value (props.KEY).
GOAL_FILTER = "goal"
PROPS_FILTER = "props."
MAX_PROPERTY_KEY = 300  # the collector's limit on a property key
# A property value that means "the event does not carry the property" in an is / is_not
# filter (Plausible's: `event:props:plan==(none)` counts the events without `plan`).
NOT_SET = "(none)"
GOAL_VISITOR = "cityHash64(visitor_key, toDate(ts))"
INTERVAL_SQL = {"minute": "toStartOfMinute", "hour": "toStartOfHour", "day": "toStartOfDay"}
# The shortest length of each bucket (a month: 28 days), to bound how many a range holds.
INTERVAL_STEP = {
    "minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1),
    "week": timedelta(days=7), "month": timedelta(days=28),
}  # fmt: skip
# The most buckets one timeseries holds, whichever door asks (the API refuses more, the dashboard
# coarsens its chart): minutes over 4 years were 186 s, +1.5 GB and a 147 MB answer.
MAX_BUCKETS = 10_000


def bucket_count(start: datetime, end: datetime, interval: Interval) -> int:
    """At most how many buckets [start, end) holds. Counted arithmetically: listing the buckets
    of a century of minutes to count them would itself be the denial of service the cap is there
    to prevent."""
    return -((start - end) // INTERVAL_STEP[interval]) + 1


def fitting_interval(start: datetime, end: datetime, wanted: Interval) -> Interval:
    """`wanted`, or the finest coarser interval whose buckets over [start, end) are within
    MAX_BUCKETS (months at the least: a dashboard's range is bounded in years)."""
    order = list(INTERVAL_STEP)
    for interval in order[order.index(wanted) :]:
        if bucket_count(start, end, interval) <= MAX_BUCKETS:
            return interval  # type: ignore[return-value]
    return "month"


def check_bucket_count(q: StatsQuery, interval: Interval) -> None:
    """UnsupportedQuery naming the interval if a timeseries of `q` would pass MAX_BUCKETS."""
    count = bucket_count(q.start, q.end, interval)
    if count > MAX_BUCKETS:
        raise UnsupportedQuery(
            f"interval: the range has {count:,} {interval}s, more than {MAX_BUCKETS:,}: use a longer interval"
        )


FilterOperator = Literal["is", "is_not", "contains", "contains_not", "matches", "matches_not"]
FILTER_OPERATORS: tuple[FilterOperator, ...] = (
    "is", "is_not", "contains", "contains_not", "matches", "matches_not",
)  # fmt: skip
MAX_FILTER_VALUES = 100  # per condition: a filter is a user's list, not a table
# Regular expressions (matches, matches_not) are the one filter whose cost the user sets: RE2
# runs in time linear in the text but proportional to the compiled program, and every pattern
# is run against every event of the range. A query carries at most MAX_PATTERNS of them, each at
# most MAX_PATTERN_LENGTH characters whose RE2 program has at most MAX_PATTERN_PROGRAM
# instructions: `^/blog/[a-z0-9-]+/?$` has 10, a 256-character literal about 260, while counted
# repetitions multiply (`.{1,1000}` has 9003, `((a|b)?){200}` over 1000).
MAX_PATTERNS = 5
MAX_PATTERN_LENGTH = 256
MAX_PATTERN_PROGRAM = 1000


@dataclass(frozen=True)
class Condition:
    """`dimension` (an EVENT_DIMENSIONS name or props.KEY) compared with `values` by `operator`."""

    operator: FilterOperator
    dimension: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Logic:
    """`and` / `or` of its operands, or `not` of its one operand."""

    operator: Literal["and", "or", "not"]
    operands: tuple[Condition | Logic, ...]


Expression = Condition | Logic


@dataclass(frozen=True)
class VisitEvents:
    """The archive's events of the visits passing a report's visit filters, as a relation read
    through the stream jobs' `sessions` (storage/queries/visit_events.py), and its parameters."""

    sql: str
    parameters: dict[str, object]


@dataclass(frozen=True)
class StatsQuery:
    """What a report asks about: one site, the half-open UTC range [start, end), and
    optional filters that restrict the events counted: an event-level dimension → value,
    `goal` → a goal's name, `props.KEY` → a property value (module docstring: filters).
    `goal` is the named goal itself, looked up by the query layer (storage.queries)."""

    site: str
    start: datetime
    end: datetime
    filters: dict[str, str] = field(default_factory=dict)
    session_gap_s: int = SESSION_GAP_S
    goal: Goal | None = None
    engaged_bounce_ms: int = ENGAGED_BOUNCE_MS
    where: Expression | None = None
    # The site's IANA zone: where a timeseries' hours, days, weeks and months start (storage/calendar.py).
    timezone: str = UTC_NAME
    # The channel rules checked before the default grouping (storage/channels.py): None for the
    # site's stored rules, looked up by the query layer when a channel is asked for; a tuple
    # (a what-if's proposed rules) is used as given.
    channel_rules: tuple[ChannelRule, ...] | None = None
    # Set by the query layer (storage/queries/visit_events.py): the events the flat reports count
    # are those of the visits passing the visit filters taken out of `filters` and `where`.
    visit_events: VisitEvents | None = None

    @property
    def filtered(self) -> bool:
        """Whether any filter (dict or expression) restricts the events."""
        return bool(self.filters) or self.where is not None

    def parameters(self) -> dict[str, object]:
        parameters: dict[str, object] = {
            "site": self.site,
            "start": self.start,
            "end": self.end,
            "gap_ms": self.session_gap_s * 1000,
            "engaged_bounce_ms": self.engaged_bounce_ms,
            "tz": self.timezone,
            **rules_parameters(self.channel_rules or ()),
        }
        for index, (name, value) in enumerate(self.filters.items()):
            parameters[f"filter_{index}"] = plausible_name(name, value)  # `Mac OS X` is `Mac`
            if name.startswith(PROPS_FILTER):
                parameters[f"filter_{index}_key"] = name.removeprefix(PROPS_FILTER)
        if self.goal is not None:
            parameters |= goal_condition(self.goal, "filter")[1]
        if self.where is not None:
            parameters |= expression_sql(self.where)[1]
        if self.visit_events is not None:
            parameters |= self.visit_events.parameters
        return parameters

    def events_sql(self) -> str:
        """What the reports reading events flat read them from: the archive, or the events of the
        visits passing the visit filters (`visit_events`)."""
        return self.visit_events.sql if self.visit_events is not None else EVENTS

    def filter_sql(self) -> str:
        """An `AND …` per filter; columns come from EVENT_DIMENSIONS only, values and
        property keys are parameters."""
        sql = ""
        for index, name in enumerate(self.filters):
            if name == GOAL_FILTER:
                sql += self.goal_filter_sql()
            elif name.startswith(PROPS_FILTER):
                sql += f" AND props[{{filter_{index}_key:String}}] = {{filter_{index}:String}}"
                sql += f" AND mapContains(props, {{filter_{index}_key:String}})"
            elif name in SESSION_FILTERS:  # the events of the sessions with that property
                sql += f" AND {members_condition(f'{name} = {{filter_{index}:String}}', name)}"
            else:
                sql += f" AND {EVENT_DIMENSIONS[name]} = {{filter_{index}:String}}"
        if self.where is not None:
            sql += f" AND {expression_sql(self.where)[0]}"
        return sql

    def goal_filter_sql(self) -> str:
        """The visitors (day, visitor) who converted on the goal in the range."""
        if self.goal is None:
            raise UnsupportedQuery("the goal filter's goal was not looked up")
        condition = goal_condition(self.goal, "filter")[0]
        return (
            f" AND {GOAL_VISITOR} IN (SELECT {GOAL_VISITOR} FROM events WHERE site = {{site:String}} "
            "AND ts >= {start:DateTime64(3, 'UTC')} AND ts < {end:DateTime64(3, 'UTC')} "
            f"AND {condition})"
        )


@dataclass(frozen=True)
class Point:
    t: datetime
    pageviews: int
    visitors: int


@dataclass(frozen=True)
class BreakdownRow:
    value: str
    pageviews: int
    visitors: int


@dataclass(frozen=True)
class SessionPoint:
    """The sessions starting in a bucket: their count, bounces and summed duration (integer ms,
    so buckets add up into weeks and months exactly)."""

    t: datetime
    sessions: int
    bounces: int
    duration_ms: int


def fill_sessions(q: StatsQuery, interval: Interval, rows: list[tuple]) -> list[SessionPoint]:
    """Session points from (t, sessions, bounces, duration_ms) rows, every bucket present."""
    counted = {as_utc(t): tuple(int(number) for number in numbers) for t, *numbers in rows}
    return [SessionPoint(t, *counted.get(t, (0, 0, 0))) for t in buckets(q, interval)]


@dataclass(frozen=True)
class SessionBreakdownRow:
    """A session dimension's value: its sessions' numbers as the aggregate report states them
    (`metrics()`: pageviews, visitors, sessions, bounce_rate, avg_session_duration_s)."""

    value: str
    totals: dict[str, float]


@dataclass(frozen=True)
class PageEngagement:
    """A page's engagement (module docstring): its engaged visitors and their averages."""

    path: str
    visitors: int
    time_on_page_s: float
    scroll_depth: float


def page_engagement(path: str, visitors: int, engaged_ms: int, depth_sum: int) -> PageEngagement:
    """Both sources count the same integers (visitors, Σ engaged ms, Σ visitors' deepest
    scroll) and divide here, so they round alike."""
    visitors = int(visitors)
    if not visitors:
        return PageEngagement(path, 0, 0.0, 0.0)
    return PageEngagement(
        path, visitors, round(int(engaged_ms) / visitors / 1000, 1), round(int(depth_sum) / visitors, 1)
    )


@dataclass(frozen=True)
class GoalRow:
    """One goal's numbers over a range (module docstring: goals)."""

    goal: str
    kind: str
    visitors: int
    events: int
    conversion_rate: float
    currency: str = ""
    revenue_total: Decimal = Decimal(0)
    revenue_events: int = 0

    @property
    def revenue_average(self) -> Decimal:
        return self.revenue_total / self.revenue_events if self.revenue_events else Decimal(0)


@dataclass(frozen=True)
class EventRow:
    """A custom event name or a property value: its events and visitors."""

    value: str
    events: int
    visitors: int


@dataclass(frozen=True)
class SessionRow:
    visitor_id: str
    start: datetime
    end: datetime
    duration_s: float
    pageviews: int
    entry_path: str
    exit_path: str
    is_bounce: bool
    engaged_s: float  # the session's engaged time (engaged session, module docstring)
    referrer_domain: str
    utm_source: str
    country: str
    device: str
    browser: str
    os: str


class UnsupportedQuery(Refused):
    """A parameter outside the fixed vocabulary (dimension, interval, filter)."""


def validate(q: StatsQuery) -> None:
    unknown = {name for name in q.filters if not is_filter(name)}
    if unknown:
        known = [*sorted(EVENT_DIMENSIONS), *SESSION_FILTERS, GOAL_FILTER, f"{PROPS_FILTER}KEY"]
        raise UnsupportedQuery(f"cannot filter by {sorted(unknown)}; filters: {known}")
    if q.where is not None:
        validate_expression(q.where)
    if q.end <= q.start:
        raise UnsupportedQuery("`to` must be after `from`")
    try:
        zone(q.timezone)
    except InvalidTimezone as error:
        raise UnsupportedQuery(f"timezone: {error}") from None


# --- what both sources compute from their rows, stated once ---------------------------------


def metrics(
    pageviews: int, visitors: int, sessions: int, bounces: int, duration_s: float
) -> dict[str, float]:
    """The aggregate report; duration_s is the sessions' average duration."""
    return {
        "pageviews": int(pageviews),
        "visitors": int(visitors),
        "sessions": int(sessions),
        "bounce_rate": round(bounces / sessions, 4) if sessions else 0.0,
        "avg_session_duration_s": round(float(duration_s), 1) if sessions else 0.0,
    }


def metrics_from_totals(
    pageviews: int, visitors: int, sessions: int, bounces: int, duration_ms: float
) -> dict[str, float]:
    """The aggregate report from the sessions' summed duration in ms (what the stores sum)."""
    return metrics(pageviews, visitors, sessions, bounces, duration_ms / sessions / 1000 if sessions else 0.0)


def floor_to(moment: datetime, interval: Interval) -> datetime:
    """The start of the bucket `moment` falls in (UTC)."""
    moment = as_utc(moment).replace(second=0, microsecond=0)
    if interval == "minute":
        return moment
    if interval == "hour":
        return moment.replace(minute=0)
    return moment.replace(hour=0, minute=0)


def buckets(q: StatsQuery, interval: Interval) -> list[datetime]:
    """Every bucket start in [start, end) (the first one's may be before start), in the
    site's zone, so empty buckets show as zero."""
    return bucket_starts(q.start, q.end, interval, zone(q.timezone))


def fill(q: StatsQuery, interval: Interval, rows: list[tuple]) -> list[Point]:
    """A timeseries from (t, pageviews, visitors) rows, every bucket of the range present."""
    counted = {as_utc(t): (int(pageviews), int(visitors)) for t, pageviews, visitors in rows}
    return [Point(t, *counted.get(t, (0, 0))) for t in buckets(q, interval)]


def session_row(row: dict[str, object]) -> SessionRow:
    named = {name: plausible_name(name, str(row[name])) for name in CLIENT_NAMES}
    return SessionRow(**{name: named.get(name, row[name]) for name in SessionRow.__dataclass_fields__})


def is_filter(name: str) -> bool:
    key = name.removeprefix(PROPS_FILTER)
    return (
        name in EVENT_DIMENSIONS
        or name in SESSION_FILTERS
        or name == GOAL_FILTER
        or (name.startswith(PROPS_FILTER) and 0 < len(key) <= MAX_PROPERTY_KEY)
    )


def goal_condition(goal: Goal, index: int | str) -> tuple[str, dict[str, object]]:
    """SQL true for the goal's events over columns `name` and `path` (events and
    goal_events_minute both have them); the goal's values as parameters goal_<index>_*."""
    if goal.kind == "page":
        from storage.page_patterns import pattern_regex

        sql = f"(name = 'pageview' AND match(path, {{goal_{index}_re:String}}))"
        return sql, {f"goal_{index}_re": pattern_regex(goal.page_pattern)}
    return f"(name = {{goal_{index}_name:String}})", {f"goal_{index}_name": goal.event_name}


def conversion_rate(visitors: int, site_visitors: int) -> float:
    return round(visitors / site_visitors, 4) if site_visitors else 0.0


def goal_row(
    goal: Goal, events: int, visitors: int, site_visitors: int, revenue: Decimal, revenue_events: int
) -> GoalRow:
    if not goal.currency:
        revenue, revenue_events = Decimal(0), 0
    rate = conversion_rate(int(visitors), int(site_visitors))
    return GoalRow(
        goal.name,
        goal.kind,
        int(visitors),
        int(events),
        rate,
        goal.currency,
        Decimal(revenue),
        int(revenue_events),
    )


# --- filter expressions (Plausible's filters; the module docstring defines them) -------------


def validate_expression(expression: Expression, columns: dict[str, str] | None = None) -> None:
    """UnsupportedQuery naming what no source can filter by, or a regular expression past the
    bounds (check_patterns); `columns` the dimensions allowed (default: the event-level ones and
    props.KEY)."""
    _validate_expression(expression, columns)
    check_patterns(expression)


def _validate_expression(expression: Expression, columns: dict[str, str] | None) -> None:
    if isinstance(expression, Logic):
        if expression.operator not in ("and", "or", "not") or not expression.operands:
            raise UnsupportedQuery(f"filter operator {expression.operator!r} needs operands")
        if expression.operator == "not" and len(expression.operands) != 1:
            raise UnsupportedQuery("`not` takes one filter")
        for operand in expression.operands:
            _validate_expression(operand, columns)
        return
    if expression.operator not in FILTER_OPERATORS:
        raise UnsupportedQuery(
            f"filter operator {expression.operator!r}; operators: {list(FILTER_OPERATORS)}"
        )
    if columns is None:
        allowed = expression.dimension != GOAL_FILTER and is_filter(expression.dimension)
        known = [*sorted(EVENT_DIMENSIONS), *SESSION_FILTERS, f"{PROPS_FILTER}KEY"]
    else:
        allowed, known = expression.dimension in columns, sorted(columns)
    if not allowed:
        raise UnsupportedQuery(
            f"cannot filter by {expression.dimension!r} in an expression; filters: {known}"
        )
    if not 0 < len(expression.values) <= MAX_FILTER_VALUES:
        raise UnsupportedQuery(f"a filter has 1 to {MAX_FILTER_VALUES} values")


def patterns_of(expression: Expression) -> list[str]:
    """Every regular expression an expression runs (the values of its matches / matches_not)."""
    if isinstance(expression, Logic):
        return [pattern for operand in expression.operands for pattern in patterns_of(operand)]
    return list(expression.values) if expression.operator.startswith("matches") else []


def check_patterns(*expressions: Expression | None) -> None:
    """UnsupportedQuery unless the regular expressions of one query (all of `expressions`) are
    at most MAX_PATTERNS, each within check_pattern's bounds."""
    patterns = [pattern for expression in expressions if expression for pattern in patterns_of(expression)]
    if len(patterns) > MAX_PATTERNS:
        raise UnsupportedQuery(
            f"at most {MAX_PATTERNS} regular expressions (matches, matches_not values) in one query, "
            f"not {len(patterns)}"
        )
    for pattern in patterns:
        check_pattern(pattern)


def check_pattern(pattern: str) -> None:
    """UnsupportedQuery unless `pattern` compiles as RE2 (the library ClickHouse's match() uses),
    so that a typo is a 400 naming it rather than an error of the store, and is cheap enough to
    run on every event: at most MAX_PATTERN_LENGTH characters, at most MAX_PATTERN_PROGRAM
    instructions once compiled (RE2's own measure of what evaluating it costs per character)."""
    shown = repr(pattern[:100])
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise UnsupportedQuery(
            f"regular expression {shown}… has {len(pattern)} characters, more than {MAX_PATTERN_LENGTH}"
        )
    try:
        size = re2.compile(pattern).programsize
    except re2.error as error:
        raise UnsupportedQuery(f"not an RE2 regular expression: {shown} ({error})") from None
    if size > MAX_PATTERN_PROGRAM:
        raise UnsupportedQuery(
            f"regular expression {shown} is too costly to run on every event (its RE2 program has "
            f"{size} instructions, at most {MAX_PATTERN_PROGRAM}): use fewer or smaller counted "
            "repetitions such as {1,1000}"
        )


def expression_sql(
    expression: Expression, columns: dict[str, str] | None = None, prefix: str = "where"
) -> tuple[str, dict[str, object]]:
    """The SQL condition and its parameters (<prefix>_0, _1, … in the order met): values,
    substrings, patterns and property keys are parameters; columns come from `columns`
    (default EVENT_DIMENSIONS, with props[KEY]), never from the expression."""
    parameters: dict[str, object] = {}
    return _expression_sql(expression, parameters, columns, prefix), parameters


def _expression_sql(
    expression: Expression, parameters: dict[str, object], columns: dict[str, str] | None, prefix: str
) -> str:
    if isinstance(expression, Logic):
        parts = [_expression_sql(operand, parameters, columns, prefix) for operand in expression.operands]
        if expression.operator == "not":
            return f"NOT ({parts[0]})"
        return "(" + f" {expression.operator.upper()} ".join(parts) + ")"
    name = f"{prefix}_{len(parameters)}"
    parameters[name] = list(plausible_values(expression.dimension, expression.values))
    values = f"{{{name}:Array(String)}}"
    column, key = (columns if columns is not None else EVENT_DIMENSIONS).get(expression.dimension), ""
    session = columns is None and expression.dimension in SESSION_FILTERS
    if session:  # tested inside the sessions' SQL, on the property of that name
        column = expression.dimension
    if column is None:
        if columns is not None or not expression.dimension.startswith(PROPS_FILTER):
            raise UnsupportedQuery(f"cannot filter by {expression.dimension!r}")
        key = f"{prefix}_{len(parameters)}"
        parameters[key] = expression.dimension.removeprefix(PROPS_FILTER)
        column = f"props[{{{key}:String}}]"
    positive = expression.operator.removesuffix("_not")
    test = {
        "is": f"has({values}, {column})",
        "contains": f"arrayExists(part -> position({column}, part) > 0, {values})",
        "matches": f"arrayExists(pattern -> match({column}, pattern), {values})",
    }[positive]
    if key:  # a missing property is no value: it never is, contains or matches one
        test = f"(mapContains(props, {{{key}:String}}) AND {test})"
        if positive == "is" and NOT_SET in expression.values:  # Plausible's "(none)": not set
            test = f"({test} OR NOT mapContains(props, {{{key}:String}}))"
    test = f"NOT {test}" if expression.operator.endswith("_not") else test
    # source is_not X: the events of the sessions whose source is not X
    return members_condition(test, expression.dimension) if session else test


def dimensions_of(expression: Expression) -> set[str]:
    """The dimensions an expression's conditions name."""
    if isinstance(expression, Logic):
        return set().union(*(dimensions_of(operand) for operand in expression.operands))
    return {expression.dimension}
