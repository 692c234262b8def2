"""Journeys: where the visits go next from a page, or came from into it.

What a row counts (DESIGN.md "Journeys"): the visits starting in [start, end) (session_start, as
the other visit reports count them), each through its journey — its page views' paths in time
order, consecutive repeats folded (migration 0071). Pages matching one of the asked patterns
(storage/page_patterns.py, e.g. `/blog/*`) become that pattern's node, and repeats are folded
again after (/blog/a → /blog/b is one step on /blog/*). From the anchor:

- `page` given: the visit's FIRST occurrence of it (a later return to it starts no second path);
  a visit that never viewed it is not counted;
- no page: the visit's entry (direction next) or its exit (direction previous).

A row's `steps` are the anchor and up to `steps` nodes after it (next), or up to `steps` nodes
before it and the anchor (previous): shorter where the visit ends (or starts) sooner. A row
counts its visits and distinct visitors; steps taken by fewer than `min_visitors` visitors, and
with a `limit` those past the `limit` with the most visitors (ties: more visits, then the steps'
order), are folded into one row "(other)" (its visitors distinct over all the folded visits, not
a sum). The rows come by visitors, then visits, then steps; "(other)" last.

agg reads `sessions.journey` (the newest version of each visit, FINAL); raw sessionises the
archive (raw.raw_sessions_sql's `journey`, the same fold over the same page views): the same
per-visit steps are counted over either (agg in two reads joined, raw in one: _PATHS,
_PATHS_ONE_READ), so both give the same rows to the unit. A range holding a visit
written before migration 0071 (its journey [] although every visit has a page view) is answered
from the archive, so an upgrade before `tally replay` never changes an answer.

Filters: a journey is a whole visit's path, so it is filtered by the visit's properties
alone (JOURNEY_FILTERS), dict filters and expressions alike, a saved segment of them too: source
(referrer_domain), channel (the site's rules), the UTMs, entry and exit page, and country, device,
browser, os, screen_size, language, which for a journey are the visit's own, its first page view's
(as `sessions` keeps them, migration 0062, and as Plausible's visit:country is). agg tests them on
the newest version of each `sessions` row, raw on the same properties of the archive's sessions,
one condition over columns of the same names. A filter on an event (the page, a goal, a custom
property, hostname, event name) is refused (UnsupportedQuery naming `filters`): a page view
passing it is part of a visit, not a visit, and following only the visits holding one would
answer another question than the filter asks of every other report. Rows written before 0062
carry '' for utm_content, utm_term, screen_size and language; they were written before 0071 too
(journey []), so such a range is answered from the archive already.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from clickhouse_connect.driver.client import Client

from storage.channel_rules import list_rules
from storage.channels import CHANNEL, channel_sql
from storage.client_names import plausible_name_sql
from storage.page_patterns import pattern_regex
from storage.queries.contract import Source, StatsQuery, UnsupportedQuery, dimensions_of, expression_sql
from storage.queries.raw import raw_sessions_sql
from storage.queries.session_filters import CHANNEL_PROPERTIES, SESSION_FILTER_PROPERTIES
from storage.queries.session_versions import newest_visits_sql
from storage.tables import SESSIONS

Direction = Literal["next", "previous"]
DIRECTIONS: tuple[Direction, ...] = ("next", "previous")
MAX_STEPS = 5
MAX_PATTERNS = 20
OTHER = "(other)"
SqlWithParameters = tuple[str, dict[str, object]]

# The visit properties a journey is filtered by (the module docstring), each as a condition reads
# it over a visit's row: agg's `sessions` columns and raw's session properties share the names.
# Browser and OS as Plausible names them (an older stored name read as its new one).
_VISIT_COLUMNS = (*SESSION_FILTER_PROPERTIES, "country", "device", "browser", "os", "screen_size", "language")
JOURNEY_FILTERS: dict[str, str] = {
    **{name: name for name in _VISIT_COLUMNS},
    "browser": plausible_name_sql("browser"),
    "os": plausible_name_sql("os"),
    CHANNEL: channel_sql(*CHANNEL_PROPERTIES),
}
WHERE_PREFIX = "journey_where"  # the expression's parameters


@dataclass(frozen=True)
class JourneyQuestion:
    """What to follow: from `page` (a path or one of `patterns`; None: the visit's entry or
    exit), `steps` nodes in `direction`, pages grouped by `patterns`, paths of fewer than
    `min_visitors` visitors folded into OTHER."""

    page: str | None = None
    direction: Direction = "next"
    steps: int = 3
    patterns: tuple[str, ...] = ()
    min_visitors: int = 1
    limit: int | None = None  # at most this many paths, those of the most visitors; the rest: OTHER


@dataclass(frozen=True)
class JourneyRow:
    steps: tuple[str, ...]
    visits: int
    visitors: int


# One row if a visit starting in the range was written before `journey` existed (empty).
_VISITS_BEFORE_JOURNEY = f"""
SELECT 1 FROM {SESSIONS}
WHERE site = {{site:String}} AND is_deleted = 0 AND empty(journey)
  AND session_start >= {{start:DateTime64(3, 'UTC')}} AND session_start < {{end:DateTime64(3, 'UTC')}}
LIMIT 1
"""
_FOLD = "arrayFilter((v, i) -> i = 1 OR v != {nodes}[i - 1], {nodes}, arrayEnumerate({nodes}))"
# Per visit: its nodes (patterns applied, repeats folded), the anchor's index (0: not there),
# the steps from it.
_VISIT_STEPS = """
    SELECT visitor_id, {nodes} AS nodes, {anchor} AS anchor, {slice} AS steps
    FROM ({visits})
    WHERE notEmpty(journey){condition}
"""
# Per path (its visits grouped by a hash of their steps, `path_key`): its visits and its distinct
# visitors, counted in two levels — per (path, visitor) first, then the rows per path — and its
# steps from a second grouping by the key alone, joined. At 10M events (3.3M visits a month, the
# entry's next 3 steps: 7,620 paths) that took 0.6 s where uniqExact(visitor_id) per path with
# the steps as the key took 1.1 s: a GROUP BY on an array serialises it, and keeping the steps
# in the (path, visitor) groups copied 3.3M arrays (docs/architecture.md, "Journeys").
# The key is xxh3; a second hash (cityHash64) is checked to be one per key, so that two paths
# sharing a key (about n^2 / 2^65 for n paths) raise an error, never a merged row.
_PATHS = """
SELECT shown, visits, visitors, path_key, collided
FROM
(
    SELECT path_key, sum(path_visits) AS visits, count() AS visitors,
        throwIf(min(check_min) != max(check_max), 'journeys: two paths share a hash; ask again') AS collided
    FROM
    (
        SELECT xxh3(steps) AS path_key, visitor_id, count() AS path_visits,
            min(cityHash64(steps)) AS check_min, max(cityHash64(steps)) AS check_max
        FROM ({visit_steps})
        WHERE anchor > 0
        GROUP BY path_key, visitor_id
    )
    GROUP BY path_key
) AS counts
INNER JOIN
(
    SELECT xxh3(steps) AS path_key, any(steps) AS shown
    FROM ({visit_steps})
    WHERE anchor > 0
    GROUP BY path_key
) AS names USING path_key
ORDER BY visitors DESC, visits DESC, shown
"""
# The same rows in one read of the visits, for raw: there each read sessionises the archive (seconds
# at 10M events), so reading it twice for the join above would cost more than it saves.
_PATHS_ONE_READ = """
SELECT any(steps) AS shown, count() AS visits, uniqExact(visitor_id) AS visitors, xxh3(steps) AS path_key,
    throwIf(min(cityHash64(steps)) != max(cityHash64(steps)), 'journeys: two paths share a hash; ask again')
        AS collided
FROM ({visit_steps})
WHERE anchor > 0
GROUP BY path_key
ORDER BY visitors DESC, visits DESC, shown
"""
# The distinct visitors of the visits whose paths fold into OTHER (those not kept).
_FOLDED_VISITORS = """
SELECT uniqExact(visitor_id)
FROM ({visit_steps})
WHERE anchor > 0 AND xxh3(steps) NOT IN {{kept:Array(UInt64)}}
"""


def journeys(
    client: Client, q: StatsQuery, question: JourneyQuestion, source: Source = "agg"
) -> list[JourneyRow]:
    """The journeys of the visits starting in q's range that pass its visit filters (the module
    docstring); UnsupportedQuery naming `filters` for a filter on an event."""
    check_filters(q)
    if CHANNEL in _named(q) and q.channel_rules is None:
        q = replace(q, channel_rules=tuple(list_rules(client, q.site)))
    answering = answering_source(client, q, source)
    sql, parameters = journeys_sql(q, question, answering)
    paths = client.query(sql, parameters=parameters).result_rows  # by visitors, visits, steps
    rows = {
        int(key): JourneyRow(tuple(steps), int(visits), int(visitors))
        for steps, visits, visitors, key, _ in paths
    }
    kept = {
        key: row
        for rank, (key, row) in enumerate(rows.items())
        if rank < (question.limit or len(rows)) and row.visitors >= question.min_visitors
    }
    if len(kept) == len(rows):
        return list(rows.values())
    folded_visitors_sql, parameters = folded_visitors(q, question, answering)
    parameters["kept"] = list(kept)  # the kept paths' keys
    visitors = client.query(folded_visitors_sql, parameters=parameters).result_rows[0][0]
    folded_visits = sum(row.visits for row in rows.values()) - sum(row.visits for row in kept.values())
    return [*kept.values(), JourneyRow((OTHER,), folded_visits, int(visitors))]


def answering_source(client: Client, q: StatsQuery, source: Source) -> Source:
    """The source that answers when `source` is asked: agg (`sessions`, under visit filters too)
    unless the range holds a visit written before `journey` existed, then raw."""
    if source == "agg" and client.query(_VISITS_BEFORE_JOURNEY, parameters=q.parameters()).result_rows:
        return "raw"
    return source


def check_filters(q: StatsQuery) -> None:
    """UnsupportedQuery naming `filters` and the first filter that is not a visit's property."""
    on_events = sorted(_named(q) - set(JOURNEY_FILTERS))
    if on_events:
        raise UnsupportedQuery(
            f"filters: journeys take filters on a visit's properties only ({', '.join(JOURNEY_FILTERS)}), "
            f"not {on_events[0]!r}: it is a property of single events (a page view, a goal, a custom "
            "property), and a journey is a whole visit's path. To follow the visits through a page, give "
            "it as `page`; to keep those that entered or left on it, filter by entry_path or exit_path.",
            field="filters",
        )


def _named(q: StatsQuery) -> set[str]:
    return set(q.filters) | (dimensions_of(q.where) if q.where is not None else set())


def journeys_sql(q: StatsQuery, question: JourneyQuestion, source: Source) -> SqlWithParameters:
    """The SQL of every path (none folded) over agg's or raw's visits passing q's visit filters,
    and its parameters: rows (steps, visits, visitors, path_key, 0) by visitors, visits, steps."""
    visit_steps, parameters = _visit_steps_sql(q, question, source)
    return (_PATHS if source == "agg" else _PATHS_ONE_READ).format(visit_steps=visit_steps), parameters


def folded_visitors(q: StatsQuery, question: JourneyQuestion, source: Source) -> SqlWithParameters:
    """The SQL of the distinct visitors on the paths not kept (parameter `kept`: the kept paths'
    path_key), and its parameters."""
    visit_steps, parameters = _visit_steps_sql(q, question, source)
    return _FOLDED_VISITORS.format(visit_steps=visit_steps), parameters


def _visit_steps_sql(q: StatsQuery, question: JourneyQuestion, source: Source) -> SqlWithParameters:
    """Each visit's steps from the anchor (_VISIT_STEPS) over agg's or raw's visits passing q's
    visit filters, and the parameters."""
    check_filters(q)
    condition, parameters = _visit_condition(q)
    read = _columns_read(q)
    if source == "agg":
        # The filters are tested on the newest version: a visit's exit page changes between them.
        visits = newest_visits_sql("journey", *read)
    else:  # every visit sessionised from all of the site's page views, tested below as agg's are
        visits = raw_sessions_sql(replace(q, filters={}, where=None, goal=None), ("journey", *read))
    parameters |= {**q.parameters(), "steps": question.steps, "page": question.page or ""}
    visit_steps = _VISIT_STEPS.format(
        nodes=_nodes(question, parameters),
        anchor=_anchor(question),
        slice=_slice(question),
        visits=visits,
        condition=condition,
    )
    return visit_steps, parameters


def _nodes(question: JourneyQuestion, parameters: dict[str, object]) -> str:
    """A visit's nodes: its `journey` (repeats folded already), or with the pages matching a
    pattern as the pattern, repeats folded again (/blog/a → /blog/b is one step on /blog/*);
    the patterns' parameters go into `parameters`."""
    if not question.patterns:
        return "journey"
    for i, pattern in enumerate(question.patterns):
        parameters[f"pattern_{i}"], parameters[f"regex_{i}"] = pattern, pattern_regex(pattern)
    cases = ", ".join(
        f"match(p, {{regex_{i}:String}}), {{pattern_{i}:String}}" for i in range(len(question.patterns))
    )
    return _FOLD.format(nodes=f"arrayMap(p -> multiIf({cases}, p), journey)")


def _columns_read(q: StatsQuery) -> tuple[str, ...]:
    """The visit columns q's filters read (the channel: those it is computed from)."""
    read = (CHANNEL_PROPERTIES if name == CHANNEL else (name,) for name in sorted(_named(q)))
    return tuple(dict.fromkeys(column for columns in read for column in columns))


def _visit_condition(q: StatsQuery) -> tuple[str, dict[str, object]]:
    """`AND …` per dict filter (equal, its value q.parameters()' filter_<i>) and for the
    expression, over the visit's columns; the expression's parameters."""
    condition = "".join(
        f" AND {JOURNEY_FILTERS[name]} = {{filter_{index}:String}}" for index, name in enumerate(q.filters)
    )
    if q.where is None:
        return condition, {}
    sql, parameters = expression_sql(q.where, JOURNEY_FILTERS, WHERE_PREFIX)
    return f"{condition} AND {sql}", parameters


def _anchor(question: JourneyQuestion) -> str:
    """The 1-based index of the anchor in `nodes` (0 when the visit has none)."""
    if question.page is not None:
        return "toInt64(indexOf(nodes, {page:String}))"  # the first occurrence
    return "toInt64(1)" if question.direction == "next" else "toInt64(length(nodes))"


def _slice(question: JourneyQuestion) -> str:
    """The anchor and up to `steps` nodes after it (next), or before it and the anchor."""
    if question.direction == "next":
        return "arraySlice(nodes, anchor, {steps:Int64} + 1)"
    return "arraySlice(nodes, greatest(1, anchor - {steps:Int64}), least(anchor, {steps:Int64} + 1))"
