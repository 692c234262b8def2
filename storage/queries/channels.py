"""The `channel` breakdown (storage/channels.py): sessions by acquisition channel.

The channel is a function of three properties of a session's first page view together
(referrer domain, utm_source, utm_medium). The rollups keep one dimension per row, so they hold
no such combination: both sources answer from the archive's sessions (as funnels do), and agg
equals raw by construction. Counted as every session breakdown (contract.py): the sessions
starting in the range, their page views, visitors (day, visitor) on their start's day,
bounces and durations.

compare_rules is the what-if on a site's channel rules (`tally whatif channels`): the same
breakdown under the current and the proposed rules, and the sources that change channel.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from clickhouse_connect.driver.client import Client

from storage.channels import ChannelRule, channel_sql, rules_parameters, source_sql
from storage.queries.contract import (
    SESSION_VISITORS,
    BreakdownRow,
    SessionBreakdownRow,
    StatsQuery,
    metrics_from_totals,
)
from storage.queries.raw import raw_sessions_sql

PROPERTIES = ("referrer_domain", "utm_source", "utm_medium")


def session_breakdown(client: Client, q: StatsQuery, limit: int) -> list[SessionBreakdownRow]:
    sql = (
        f"SELECT {channel_sql(*PROPERTIES)} AS value, sum(matched_pageviews) AS pageviews, "
        f"{SESSION_VISITORS} AS visitors, count() AS sessions, countIf(is_bounce) AS bounces, "
        "toInt64(round(sum(duration_s) * 1000)) AS duration_ms "
        f"FROM ({raw_sessions_sql(q, PROPERTIES)}) GROUP BY value "
        "ORDER BY visitors DESC, pageviews DESC, value LIMIT {limit:UInt32}"
    )
    rows = client.query(sql, parameters={**q.parameters(), "limit": limit}).result_rows
    return [
        SessionBreakdownRow(value, metrics_from_totals(pageviews, visitors, sessions, bounces, duration_ms))
        for value, pageviews, visitors, sessions, bounces, duration_ms in rows
    ]


def breakdown(client: Client, q: StatsQuery, limit: int) -> list[BreakdownRow]:
    return [
        BreakdownRow(row.value, int(row.totals["pageviews"]), int(row.totals["visitors"]))
        for row in session_breakdown(client, q, limit)
    ]


# The parameter holding a what-if's proposed rules, beside the current ones (RULES_PARAMETER).
PROPOSED_RULES = "proposed_channel_rules"


@dataclass(frozen=True)
class SourceMove:
    """A source whose sessions change channel under the proposed rules."""

    source: str
    current: str
    proposed: str
    sessions: int
    visitors: int


@dataclass(frozen=True)
class RulesComparison:
    """The channel breakdown of one site and range under two sets of rules, and what moves."""

    site: str
    start: datetime
    end: datetime
    current_rules: tuple[ChannelRule, ...]
    proposed_rules: tuple[ChannelRule, ...]
    current: list[SessionBreakdownRow]
    proposed: list[SessionBreakdownRow]
    moves: list[SourceMove]


def compare_rules(
    client: Client,
    q: StatsQuery,
    current: tuple[ChannelRule, ...],
    proposed: tuple[ChannelRule, ...],
    limit: int = 50,
) -> RulesComparison:
    """A what-if on channel rules, at query time: channels are derived when read, so the proposed
    side is the breakdown the site will show once the proposed rules are stored (no replay)."""
    return RulesComparison(
        q.site,
        q.start,
        q.end,
        current,
        proposed,
        session_breakdown(client, replace(q, channel_rules=current), limit),
        session_breakdown(client, replace(q, channel_rules=proposed), limit),
        source_moves(client, replace(q, channel_rules=current), proposed, limit),
    )


def source_moves(
    client: Client, q: StatsQuery, proposed: tuple[ChannelRule, ...], limit: int
) -> list[SourceMove]:
    """The sources whose sessions land in another channel under `proposed` than under q's rules."""
    sql = (
        f"SELECT {source_sql('referrer_domain', 'utm_source')} AS source, "
        f"{channel_sql(*PROPERTIES)} AS old_channel, "
        f"{channel_sql(*PROPERTIES, parameter=PROPOSED_RULES)} AS new_channel, "
        f"count() AS sessions, {SESSION_VISITORS} AS visitors FROM ({raw_sessions_sql(q, PROPERTIES)}) "
        "WHERE old_channel != new_channel GROUP BY source, old_channel, new_channel "
        "ORDER BY sessions DESC, source, old_channel LIMIT {limit:UInt32}"
    )
    parameters = {**q.parameters(), **rules_parameters(proposed, PROPOSED_RULES), "limit": limit}
    return [SourceMove(*row) for row in client.query(sql, parameters=parameters).result_rows]
