"""The `channel` breakdown (storage/channels.py): sessions by acquisition channel.

The channel is a function of three properties of a session's first page view together
(referrer domain, utm_source, utm_medium). The rollups keep one dimension per row, so they hold
no such combination: both sources answer from the archive's sessions (as funnels do), and agg
equals raw by construction. Counted as every session breakdown (contract.py): the sessions
starting in the range, their page views, visitors (day, visitor) on their start's day,
bounces and durations.
"""

from __future__ import annotations

from clickhouse_connect.driver.client import Client

from storage.channels import channel_sql
from storage.queries.contract import SESSION_VISITORS, BreakdownRow, SessionBreakdownRow, StatsQuery, metrics
from storage.queries.raw import raw_sessions_sql

PROPERTIES = ("referrer_domain", "utm_source", "utm_medium")


def session_breakdown(client: Client, q: StatsQuery, limit: int) -> list[SessionBreakdownRow]:
    sql = (
        f"SELECT {channel_sql(*PROPERTIES)} AS value, sum(pageviews) AS pageviews, "
        f"{SESSION_VISITORS} AS visitors, count() AS sessions, countIf(is_bounce) AS bounces, "
        "toInt64(round(sum(duration_s) * 1000)) AS duration_ms "
        f"FROM ({raw_sessions_sql(q, PROPERTIES)}) GROUP BY value "
        "ORDER BY visitors DESC, pageviews DESC, value LIMIT {limit:UInt32}"
    )
    rows = client.query(sql, parameters={**q.parameters(), "limit": limit}).result_rows
    return [
        SessionBreakdownRow(
            value, metrics(pageviews, visitors, sessions, bounces, duration_ms / sessions / 1000)
        )
        for value, pageviews, visitors, sessions, bounces, duration_ms in rows
    ]


def breakdown(client: Client, q: StatsQuery, limit: int) -> list[BreakdownRow]:
    return [
        BreakdownRow(row.value, int(row.totals["pageviews"]), int(row.totals["visitors"]))
        for row in session_breakdown(client, q, limit)
    ]
