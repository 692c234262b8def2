"""The rate-limiting panel's numbers: clients blocked now, and the busiest clients.

Read from the tables the stream jobs derive (storage/migrations/0013_rate_limits.sql):
- `rate_limit_blocks`: the windows over the limit, what the blocklist topic is derived from;
  a client stays blocked until the end of its last window over the limit.
- `rate_limit_counters`: page views per client and minute of event time ("panes"). A client's
  count over the sliding window that ends now is the sum of its panes in that window.

Until the tables exist (an older store), the panel shows an empty state instead of failing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from clickhouse_connect.driver.client import Client

from storage import tables

COUNTERS = tables.RATE_LIMIT_COUNTERS
BLOCKS = tables.RATE_LIMIT_BLOCKS
TOP_OFFENDERS = 5
CLIENT_PREFIX = 10  # characters of the salted ip_hash shown: enough to tell clients apart

_BLOCKED_NOW = f"""
SELECT uniqExact(ip_hash) FROM {BLOCKS} FINAL WHERE window_end > {{now:DateTime64(3, 'UTC')}}
"""
_BUSIEST_CLIENTS = f"""
SELECT ip_hash, sum(pageviews) AS pageviews,
       ip_hash IN (
           SELECT ip_hash FROM {BLOCKS} FINAL WHERE window_end > {{now:DateTime64(3, 'UTC')}}
       ) AS blocked
FROM {COUNTERS}
WHERE window_start > {{now:DateTime64(3, 'UTC')}} - INTERVAL {{window_s:UInt32}} SECOND
  AND window_start <= {{now:DateTime64(3, 'UTC')}}
GROUP BY ip_hash
ORDER BY pageviews DESC, ip_hash
LIMIT {{limit:UInt32}}
"""


@dataclass(frozen=True)
class Offender:
    client: str  # a prefix of the salted ip_hash, never an IP
    pageviews: int
    blocked: bool


@dataclass(frozen=True)
class RateLimitStatus:
    available: bool
    blocked_now: int = 0
    offenders: list[Offender] = field(default_factory=list)
    note: str = ""


def rate_limit_status(client: Client, now: datetime, window_s: int = 3600) -> RateLimitStatus:
    if not all(client.command(f"EXISTS TABLE {table}") for table in (COUNTERS, BLOCKS)):
        return RateLimitStatus(False, note="Rate-limit counters are not being recorded in this store yet.")
    blocked = client.query(_BLOCKED_NOW, parameters={"now": now}).result_rows[0][0]
    busiest = client.query(
        _BUSIEST_CLIENTS, parameters={"now": now, "limit": TOP_OFFENDERS, "window_s": window_s}
    ).result_rows
    return RateLimitStatus(
        True,
        blocked_now=int(blocked),
        offenders=[
            Offender(ip_hash[:CLIENT_PREFIX], int(views), bool(is_blocked))
            for ip_hash, views, is_blocked in busiest
        ],
    )
