"""The realtime view: the last 30 minutes, broken down by page, source or country (raw).

Thirty minutes of one site's page views are few, so the archive answers on either source (the
rollups would need their open minutes stitched for nothing). Definitions, over the page views
whose `ts` is in [now - 30 min, now]:
- visitors: distinct (UTC day, visitor_id), as everywhere (contract.py); page views: their count;
- by page (`pages`): per path, its page views and their visitors;
- by country (`countries`): per country, likewise;
- by source (`sources`): per visitor active in the window, the referrer domain of its first page
  view of that UTC day (a visitor is a day's visitor id, so its day's first referrer is where it
  came from, even for a visit begun before the window); its page views in the window count.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from clickhouse_connect.driver.client import Client

from storage.queries.contract import RAW_VISITORS, BreakdownRow
from storage.tables import EVENTS

REALTIME_WINDOW = timedelta(minutes=30)
# The API's names → the dimension each is.
REALTIME_BREAKDOWNS = {"pages": "path", "sources": "referrer_domain", "countries": "country"}

_WINDOW = (
    "site = {site:String} AND name = 'pageview' "
    "AND ts >= {since:DateTime64(3, 'UTC')} AND ts <= {now:DateTime64(3, 'UTC')}"
)
_EVENT_LEVEL = (
    f"SELECT {{column:Identifier}} AS value, count() AS pageviews, {RAW_VISITORS} AS visitors "
    f"FROM {EVENTS} WHERE {_WINDOW} GROUP BY value"
)
# Per visitor (day, id) active in the window: its day's first referrer, its page views in the window.
_SOURCES = f"""
SELECT value, sum(in_window) AS pageviews, count() AS visitors
FROM
(
    SELECT visitor_key, toDate(ts) AS day, argMin(referrer_domain, ts) AS value,
           countIf(ts >= {{since:DateTime64(3, 'UTC')}}) AS in_window
    FROM {EVENTS}
    WHERE site = {{site:String}} AND name = 'pageview'
      AND ts >= toStartOfDay({{since:DateTime64(3, 'UTC')}}) AND ts <= {{now:DateTime64(3, 'UTC')}}
      AND visitor_key IN (SELECT visitor_key FROM {EVENTS} WHERE {_WINDOW})
    GROUP BY visitor_key, day
    HAVING in_window > 0
)
GROUP BY value
"""


@dataclass(frozen=True)
class RealtimeReport:
    since: datetime
    visitors: int
    pageviews: int
    rows: list[BreakdownRow]


def realtime_breakdown(
    client: Client, site: str, breakdown: str, now: datetime, limit: int = 10
) -> RealtimeReport:
    """The last 30 minutes' totals and the top `limit` rows of `breakdown` (REALTIME_BREAKDOWNS)."""
    since = now - REALTIME_WINDOW
    parameters = {"site": site, "since": since, "now": now, "limit": limit}
    visitors, pageviews = client.query(
        f"SELECT {RAW_VISITORS}, count() FROM {EVENTS} WHERE {_WINDOW}", parameters=parameters
    ).result_rows[0]
    column = REALTIME_BREAKDOWNS[breakdown]  # a KeyError for a name the caller did not check
    sql = _SOURCES if column == "referrer_domain" else _EVENT_LEVEL
    rows = client.query(
        f"SELECT value, pageviews, visitors FROM ({sql}) "
        "ORDER BY visitors DESC, pageviews DESC, value LIMIT {limit:UInt32}",
        parameters={**parameters, "column": column},
    ).result_rows
    return RealtimeReport(
        since, int(visitors), int(pageviews), [BreakdownRow(value, int(pv), int(v)) for value, pv, v in rows]
    )
