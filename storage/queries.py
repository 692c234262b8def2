"""The query layer: the one module the dashboard and the stats API read through.

Parameterised SQL only: user values travel as `{name:Type}` parameters, never spliced
into the SQL text. Each metric is defined once per source: `raw` (the archive, `events`)
and `agg` (the tables the Spark jobs derive from the same log).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from clickhouse_connect.driver.client import Client

Source = Literal["raw", "agg"]


@dataclass(frozen=True)
class Point:
    t: datetime
    pageviews: int
    visitors: int


def sites(client: Client) -> list[str]:
    """Sites that have events in the archive, busiest first."""
    rows = client.query("SELECT site FROM events GROUP BY site ORDER BY count() DESC LIMIT 1000").result_rows
    return [row[0] for row in rows]


def total_pageviews(client: Client, site: str | None = None) -> int:
    if site is None:
        return int(client.query("SELECT count() FROM events WHERE name = 'pageview'").result_rows[0][0])
    return int(
        client.query(
            "SELECT count() FROM events WHERE site = {site:String} AND name = 'pageview'",
            parameters={"site": site},
        ).result_rows[0][0]
    )


_RAW_PER_MINUTE = """
SELECT toStartOfMinute(ts) AS t, count() AS pageviews, uniqExact(visitor_id) AS visitors
FROM events
WHERE site = {site:String} AND name = 'pageview' AND ts >= {from:DateTime64(3)} AND ts < {to:DateTime64(3)}
GROUP BY t ORDER BY t
"""

_AGG_PER_MINUTE = """
SELECT window_start AS t, sum(pageviews) AS pageviews, uniqExact(visitor_id) AS visitors
FROM pageviews_per_minute FINAL
WHERE site = {site:String} AND window_start >= {from:DateTime64(3)} AND window_start < {to:DateTime64(3)}
GROUP BY t ORDER BY t
"""


def pageviews_per_minute(
    client: Client, site: str, start: datetime, end: datetime, source: Source
) -> list[Point]:
    sql = _RAW_PER_MINUTE if source == "raw" else _AGG_PER_MINUTE
    rows = client.query(sql, parameters={"site": site, "from": start, "to": end}).result_rows
    return [Point(t, int(pageviews), int(visitors)) for t, pageviews, visitors in rows]
