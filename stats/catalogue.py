"""Every metric and dimension Tally answers, as data: one entry each, in one tuple each.

An entry says what the thing is called (Tally's name, Plausible's, a person's label), whether it
is a property of an event or of a visit (scope), how the archive computes it (raw SQL over
`events`, or over a visit's page views for a visit property), where the aggregates hold it (the
rollups' `dimension` value, the `sessions` column) and which field of the stream feeds it
(stream_jobs/activity.py EVENT_FIELDS, VisitorActivity.java EVENT_FIELDS). Everything else is
derived: storage/queries/contract.py's EVENT_DIMENSIONS and SESSION_DIMENSIONS,
dashboard/http_api/plausible/query.py's DIMENSIONS, the dashboard's labels, and stats/raw_sql.py's
columns; tests/unit/test_stats_catalogue.py checks every entry is complete and that the Java
operator's positional field list agrees with the stream fields here.

Adding a dimension over an existing column of `events` is one Dimension entry below (and, for
the rollups to hold it, the stream operator's list, which the unit test then demands).

No import of storage here: storage.queries.contract imports this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from storage.client_names import plausible_name_sql

Scope = Literal["event", "session", "time"]

# Screen-size classes: (class, widths below this many px); wider is SCREEN_SIZE_WIDEST, an
# unknown width (0) is ''. Plausible's thresholds for visit:device; the stream jobs classify with
# the same table (stream_jobs/activity.py).
SCREEN_SIZES = (("Mobile", 576), ("Tablet", 992), ("Laptop", 1440))
SCREEN_SIZE_WIDEST = "Desktop"


def screen_size_sql(width: str) -> str:
    """The ClickHouse expression classing the column `width` (fixed constants, no user value)."""
    classes = "".join(f"{width} < {below}, '{name}', " for name, below in SCREEN_SIZES)
    return f"multiIf({width} = 0, '', {classes}'{SCREEN_SIZE_WIDEST}')"


@dataclass(frozen=True)
class Dimension:
    """A dimension: what each event (scope event), each visit (scope session) or each bucket of
    time (scope time) is grouped and filtered by.

    raw_sql: for an event dimension, the expression over a row of `events`; for a visit
    dimension, the column of the visit's page view it is taken from (`view`: 1 its first, -1 its
    last); for a time dimension, the bucket (storage/calendar.py's interval).

    sessions_array: for an event dimension, the `sessions` column holding every distinct value
    of it among the visit's page views (Array(String), in order of first view). A condition on
    the dimension then reads, per visit, "the visit contains a page view passing it":
    `has(paths, v)`, `arrayExists(p -> <condition on p>, paths)`, which is what a filter on it
    means for visit metrics (the whole visits containing a matching event: DESIGN.md
    "Definitions"). Exact for page views only: the array holds no custom event's value, and the
    archive (stats/raw_sql.py) also keeps a visit whose custom event passes the condition
    (migration 0063's header says when the two agree)."""

    tally: str
    plausible: str | None  # None: Plausible has no such dimension
    label: str
    scope: Scope
    raw_sql: str
    view: int = 0  # visit dimensions: the page view the value is taken from
    rollup: str | None = None  # the rollups' `dimension` value holding it (None: not rolled up)
    # the `sessions` table's column holding it: for a visit dimension its value; for an event
    # dimension the visit's first page view's value only (a visit may have several: only a
    # visit-scope reading, e.g. Plausible's visit:device, may be answered from it)
    sessions_column: str | None = None
    sessions_array: str | None = None  # see the docstring (None: sessions cannot tell)
    stream_field: str | None = None  # the stream field that feeds it (None: derived or none)
    filterable: bool = True  # whether Plausible's filters may name it
    groupable: bool = True  # whether the engine groups by it (a goal only filters: storage/goals.py)
    column: str | None = None  # the archive column raw_sql reads, where it is an expression over one

    @property
    def archive_column(self) -> str | None:
        """The column of `events` this dimension reads (None: derived from others, or time)."""
        if self.column:
            return self.column
        return self.raw_sql if self.scope != "time" and self.raw_sql.isidentifier() else None


DIMENSIONS: tuple[Dimension, ...] = (
    # event scope, in the rollups' order (VisitorActivity.java EVENT_DIMENSIONS)
    Dimension("path", "event:page", "Page", "event", "path", rollup="path", sessions_array="paths",
              stream_field="path"),
    Dimension("country", "visit:country", "Country", "event", "country", rollup="country",
              sessions_column="country", stream_field="country"),
    # named as Plausible's API names them, stored rows of older names too (storage/client_names.py)
    Dimension("browser", "visit:browser", "Browser", "event", plausible_name_sql("browser"),
              rollup="browser", sessions_column="browser", stream_field="browser", column="browser"),
    Dimension("os", "visit:os", "Operating system", "event", plausible_name_sql("os"), rollup="os",
              sessions_column="os", stream_field="os", column="os"),
    # Tally's device is the user agent's type (desktop, mobile, tablet); Plausible's visit:device
    # is the screen-size class below.
    Dimension("device", None, "Device", "event", "device", rollup="device", sessions_column="device",
              stream_field="device"),
    Dimension("language", None, "Language", "event", "language", rollup="language",
              sessions_column="language", stream_field="language"),
    Dimension("screen_size", "visit:device", "Screen size", "event", screen_size_sql("screen_width"),
              rollup="screen_size", sessions_column="screen_size", stream_field="screen_size",
              column="screen_width"),
    # the page view's host (a site served on several hostnames; never in the rollups)
    Dimension("hostname", "event:hostname", "Hostname", "event", "hostname"),
    # Plausible's event name: custom events' names and `pageview` (never in the rollups)
    Dimension("name", "event:name", "Event name", "event", "name"),
    # a goal's events (storage/goals.py: a custom event's name, or page views matching a pattern);
    # the engine filters by it, the goals report (storage.queries.goals) breaks down by it
    Dimension("goal", "event:goal", "Goal", "event", "goal_condition(goal)", groupable=False, column="path"),
    # visit scope: properties of the visit's first (1) or last (-1) page view
    Dimension("entry_path", "visit:entry_page", "Entry page", "session", "path", view=1,
              rollup="entry_path", sessions_column="entry_path", stream_field="path"),
    Dimension("exit_path", "visit:exit_page", "Exit page", "session", "path", view=-1,
              rollup="exit_path", sessions_column="exit_path", stream_field="path"),
    Dimension("referrer_domain", "visit:source", "Referrer", "session", "referrer_domain", view=1,
              rollup="referrer_domain", sessions_column="referrer_domain", stream_field="referrer_domain"),
    Dimension("utm_source", "visit:utm_source", "UTM source", "session", "utm_source", view=1,
              rollup="utm_source", sessions_column="utm_source", stream_field="utm_source"),
    Dimension("utm_medium", "visit:utm_medium", "UTM medium", "session", "utm_medium", view=1,
              rollup="utm_medium", sessions_column="utm_medium", stream_field="utm_medium"),
    Dimension("utm_campaign", "visit:utm_campaign", "UTM campaign", "session", "utm_campaign", view=1,
              rollup="utm_campaign", sessions_column="utm_campaign", stream_field="utm_campaign"),
    Dimension("utm_content", "visit:utm_content", "UTM content", "session", "utm_content", view=1,
              rollup="utm_content", sessions_column="utm_content", stream_field="utm_content"),
    Dimension("utm_term", "visit:utm_term", "UTM term", "session", "utm_term", view=1,
              rollup="utm_term", sessions_column="utm_term", stream_field="utm_term"),
    # derived from the visit's referrer and UTM source and medium (storage/channels.py)
    Dimension("channel", "visit:channel", "Channel", "session", "channel", view=1, column="referrer_domain"),
    # time: the bucket an event's time (a visit's start, for visit metrics) falls in, in the site's zone
    Dimension("hour", "time:hour", "Hour", "time", "hour", filterable=False),
    Dimension("day", "time:day", "Day", "time", "day", filterable=False),
    Dimension("week", "time:week", "Week", "time", "week", filterable=False),
    Dimension("month", "time:month", "Month", "time", "month", filterable=False),
)  # fmt: skip
# Plausible's `time` is its day.
TIME_ALIASES = {"time": "time:day"}
CHANNEL = "channel"
# The visit properties channel is computed from (storage/channels.py channel_sql's arguments).
CHANNEL_INPUTS = ("referrer_domain", "utm_source", "utm_medium")


@dataclass(frozen=True)
class Metric:
    """A metric: Tally's name (None where Tally's own reports have none), Plausible's, a label,
    its scope (counted over events, or over visits), the SQL aggregate over stats/raw_sql.py's
    rows (events with their visit's columns; visit metrics over one row per visit), where the
    aggregates hold it, and whether the engine answers it."""

    tally: str | None
    plausible: str
    label: str
    scope: Literal["event", "session"]
    raw_sql: str
    rollup: str | None = None  # the rollup column(s) it is computed from
    sessions_column: str | None = None
    engine: bool = True  # answered by stats.raw_sql (False: by storage.queries' reports only)


# Visitors: a distinct (UTC day, visitor) among the matching events (DESIGN.md "Definitions").
VISITOR = "cityHash64(visitor_key, toDate(ts))"

METRICS: tuple[Metric, ...] = (
    Metric("visitors", "visitors", "Visitors", "event", f"uniqExact({VISITOR})", rollup="visitors"),
    Metric("pageviews", "pageviews", "Page views", "event", "countIf(name = 'pageview')", rollup="pageviews"),
    Metric(None, "events", "Events", "event", "count()", rollup="pageviews"),
    Metric("sessions", "visits", "Visits", "session", "count()", rollup="sessions",
           sessions_column="session_start"),
    Metric("bounce_rate", "bounce_rate", "Bounce rate", "session",
           "if(count() = 0, 0, countIf(is_bounce) / count())", rollup="bounces", sessions_column="is_bounce"),
    Metric("avg_session_duration_s", "visit_duration", "Visit duration", "session",
           "if(count() = 0, 0, sum(duration_ms) / count() / 1000)", rollup="duration_ms",
           sessions_column="duration_s"),
    Metric(None, "views_per_visit", "Views per visit", "session",
           "if(count() = 0, 0, sum(visit_pageviews) / count())", rollup="pageviews",
           sessions_column="pageviews"),
    # the share of all visitors (with the same filters, no dimension), in percent
    Metric(None, "percentage", "Share of visitors", "event", f"uniqExact({VISITOR})"),
    # by page: the visits leaving from it over its page views, in percent
    Metric(None, "exit_rate", "Exit rate", "session", "countIf(exit_path = page)"),
    Metric("conversion_rate", "conversion_rate", "Conversion rate", "event", f"uniqExact({VISITOR})",
           engine=False),
    Metric("time_on_page_s", "time_on_page", "Time on page", "event", "sum(engagement_ms)", engine=False),
    Metric("scroll_depth", "scroll_depth", "Scroll depth", "event", "max(scroll_depth)", engine=False),
)  # fmt: skip


def breakdowns() -> dict[str, str]:
    """Plausible's name → Tally's of the dimensions the reports break down by one at a time
    (storage.queries.breakdown / session_breakdown from the rollups' dimensions; channels). The
    others the stats engine answers (dashboard/http_api/plausible/engine.py)."""
    return {
        entry.plausible: entry.tally
        for entry in DIMENSIONS
        if entry.plausible and (entry.rollup or entry.tally == CHANNEL)
    }


def archive_columns() -> tuple[str, ...]:
    """The columns of `events` the dimensions read, each once, in catalogue order."""
    return tuple(dict.fromkeys(entry.archive_column for entry in DIMENSIONS if entry.archive_column))


def dimension(plausible: str) -> Dimension | None:
    """The dimension Plausible calls `plausible` (`time` is time:day), or None."""
    name = TIME_ALIASES.get(plausible, plausible)
    return next((entry for entry in DIMENSIONS if entry.plausible == name), None)


def metric(plausible: str) -> Metric | None:
    return next((entry for entry in METRICS if entry.plausible == plausible), None)


def by_tally(name: str) -> Dimension:
    return next(entry for entry in DIMENSIONS if entry.tally == name)


def rolled_up(scope: Scope) -> tuple[Dimension, ...]:
    """The dimensions of `scope` the rollups hold, in their order."""
    return tuple(entry for entry in DIMENSIONS if entry.scope == scope and entry.rollup)


def stream_fields() -> tuple[str, ...]:
    """The stream fields the catalogue's dimensions read, each once, in catalogue order."""
    return tuple(dict.fromkeys(entry.stream_field for entry in DIMENSIONS if entry.stream_field))
