"""Filters on a session's properties (source, referrer, UTM fields, entry/exit page, channel).

A session's source is a property of its first page view only, so "source is google" cannot be a
condition on each event. It restricts the events to those belonging to a session whose
properties pass (contract.py, "session filters"): the SQL here sessionises the site's events of
the range (the day before and after too, as raw sessions do), keeps the sessions passing the
condition and lists their members' event ids — every page view of the session, and the
engagement and custom events of its visitor within [first page view, last page view + gap],
the same rule that gives an engagement event its session. A report then counts the events whose
`event_id` is among them, so every report (totals, sessions, breakdowns, goals, funnels) takes
a session filter unchanged, and `agg` answers it from the archive like every filtered report.
"""

from __future__ import annotations

from functools import lru_cache

from storage.channels import CHANNEL, channel_sql
from storage.tables import EVENTS

# Each session property and the page view it is taken from: 1 its first, -1 its last; the
# column of `events` it reads. Channel is derived from three of them (storage/channels.py).
SESSION_FILTER_PROPERTIES = {
    "entry_path": ("path", 1),
    "exit_path": ("path", -1),
    "referrer_domain": ("referrer_domain", 1),
    "utm_source": ("utm_source", 1),
    "utm_medium": ("utm_medium", 1),
    "utm_campaign": ("utm_campaign", 1),
    "utm_content": ("utm_content", 1),
    "utm_term": ("utm_term", 1),
}
SESSION_FILTERS = (*SESSION_FILTER_PROPERTIES, CHANNEL)
CHANNEL_PROPERTIES = ("referrer_domain", "utm_source", "utm_medium")

# One row per session of the site around the range: its properties (named as the dimensions)
# and `members`, the ids of the events that belong to it. A page view is the tuple (ts,
# UUIDToNum(event_id), event_id, columns…), sorted as raw sessions sort them.
_MEMBERS = """
SELECT {properties},
    arrayConcat(
        arrayMap(view -> view.3, session),
        arrayMap(other -> other.2, arrayFilter(
            other -> other.1 >= session[1].1
                AND dateDiff('millisecond', session[-1].1, other.1) <= {{gap_ms:UInt64}}, others))
    ) AS members
FROM
(
    SELECT
        arraySort(groupArrayIf((ts, UUIDToNum(event_id), event_id, {columns}), name = 'pageview')) AS views,
        groupArrayIf((ts, event_id), name != 'pageview') AS others,
        arrayJoin(arraySplit(
            (view, i) -> i > 1 AND dateDiff('millisecond', views[i - 1].1, view.1) > {{gap_ms:UInt64}},
            views, arrayEnumerate(views)
        )) AS session
    FROM {events}
    WHERE site = {{site:String}}
      AND ts >= toStartOfDay({{start:DateTime64(3, 'UTC')}}) - INTERVAL 1 DAY
      AND ts < toStartOfDay({{end:DateTime64(3, 'UTC')}} - INTERVAL 1 MILLISECOND) + INTERVAL 2 DAY
    GROUP BY visitor_key
)
"""


def _properties(dimension: str) -> tuple[str, ...]:
    """The session properties a condition on `dimension` reads."""
    return CHANNEL_PROPERTIES if dimension == CHANNEL else (dimension,)


@lru_cache(maxsize=len(SESSION_FILTERS))
def sessions_with_members_sql(dimension: str) -> str:
    """The sessions with `dimension` as a column, and their members. Only the columns it needs
    travel in the page views' tuples, so the sort and the arrays carry less (a month of 1M page
    views, by channel: 277 ms against 334 ms with every column; docs/architecture.md)."""
    names = _properties(dimension)
    columns = list(dict.fromkeys(SESSION_FILTER_PROPERTIES[name][0] for name in names))

    def property_sql(name: str) -> str:
        column, view = SESSION_FILTER_PROPERTIES[name]
        return f"session[{view}].{4 + columns.index(column)}"

    selected = [f"{property_sql(name)} AS {name}" for name in names]
    if dimension == CHANNEL:
        selected.append(f"{channel_sql(*(property_sql(name) for name in names))} AS {CHANNEL}")
    return _MEMBERS.format(properties=", ".join(selected), columns=", ".join(columns), events=EVENTS)


def members_condition(condition: str, dimension: str) -> str:
    """SQL true for an event belonging to a session for which `condition` holds; `condition`
    names the session's property `dimension` (one of SESSION_FILTERS) by its name, its values
    are parameters (the caller's)."""
    sessions = sessions_with_members_sql(dimension)
    return f"event_id IN (SELECT arrayJoin(members) FROM ({sessions}) WHERE {condition})"
