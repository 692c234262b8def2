"""A what-if's numbers: one range of one site read from the live derived tables
(the current definitions' version) and from a proposed version's side tables
(`<table>_v<N>`, built by `tally whatif`), side by side.

Both sides are the agg source's reports (storage/queries/agg.py), each run with its own
version's definitions, so a number on the proposed side equals the raw source's answer with
the proposed definitions (tests/integration/test_whatif.py) wherever the live side equals
the raw source's answer with the current ones.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from clickhouse_connect.driver.client import Client

from storage.definitions import Version, side_suffix
from storage.goals import Goal, proposal
from storage.queries import agg, goals_of
from storage.queries.contract import (
    SESSION_DIMENSIONS,
    GoalRow,
    SessionBreakdownRow,
    Source,
    StatsQuery,
    UnsupportedQuery,
)

#: The numbers compared, in the order shown (metrics() keys).
METRICS = ("visitors", "sessions", "bounce_rate", "avg_session_duration_s", "pageviews")
ENTRY_PAGES = "entry_path"  # the breakdown compared unless another is asked (`by`)


@dataclass(frozen=True)
class Side:
    version: int
    definitions: dict[str, int]
    totals: dict[str, float]
    rows: list[SessionBreakdownRow]  # the top values of the comparison's breakdown (`by`)


@dataclass(frozen=True)
class Comparison:
    site: str
    start: datetime
    end: datetime
    current: Side
    proposed: Side
    by: str = ENTRY_PAGES


def query_for(q: StatsQuery, version: Version) -> StatsQuery:
    """`q` with the version's definitions (what the raw source and the raw pieces apply)."""
    definitions = version.definitions
    return replace(
        q, session_gap_s=definitions.session_gap_s, engaged_bounce_ms=definitions.engaged_bounce_ms
    )


def side(client: Client, q: StatsQuery, version: Version, suffix: str, limit: int, by: str) -> Side:
    versioned = query_for(q, version)
    return Side(
        version.number,
        version.definitions.replayed(),
        agg.aggregate(client, versioned, suffix),
        agg.session_breakdown(client, versioned, by, limit, suffix),
    )


def compare(
    client: Client, q: StatsQuery, current: Version, proposed: Version, limit: int = 5, by: str = ENTRY_PAGES
) -> Comparison:
    """`q`'s range read from the live tables (current) and version `proposed`'s side tables: the
    totals and the top `limit` values of the session breakdown `by` (SESSION_DIMENSIONS: entry
    and exit page, referrer, the UTM fields; the rollups hold them per session)."""
    if by not in SESSION_DIMENSIONS:
        raise UnsupportedQuery(f"a what-if's breakdown is one of {', '.join(sorted(SESSION_DIMENSIONS))}")
    return Comparison(
        q.site,
        q.start,
        q.end,
        side(client, q, current, "", limit, by),
        side(client, q, proposed, side_suffix(proposed.number), limit, by),
        by,
    )


def side_tables_exist(client: Client, version: int) -> bool:
    """Whether version `version` has side tables (built, not yet discarded)."""
    rows = client.query(
        "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = {name:String}",
        parameters={"name": "sessions" + side_suffix(version)},
    ).result_rows
    return bool(rows[0][0])


# --- goals: a what-if at query time ---------------------------------------------------------
# Goals apply when a report is read, not when the derived tables are built: the proposed set's
# numbers come from the same tables as the current set's, with no replay and no side tables.


@dataclass(frozen=True)
class GoalComparison:
    site: str
    start: datetime
    end: datetime
    current: list[GoalRow]
    proposed: list[GoalRow]

    def names(self) -> list[str]:
        """Every goal of either side, in name order (a removed goal is on the left only, an
        added one on the right only)."""
        return sorted({row.goal for row in self.current} | {row.goal for row in self.proposed})


def compare_goals(
    client: Client, q: StatsQuery, added: list[Goal], removed: list[str], source: Source = "agg"
) -> GoalComparison:
    """`q.site`'s goals' numbers over `q`'s range, now and with `added` and without `removed`
    (InvalidGoal if the change cannot be made)."""
    current, proposed = proposal(client, q.site, added, removed)
    return GoalComparison(
        q.site, q.start, q.end, goals_of(client, q, current, source), goals_of(client, q, proposed, source)
    )
