"""The Web Vitals report: per page, device, country or browser, the p50, p75 and
p95 of each vital and the share of page views Google's thresholds rate good, needs
improvement or poor (docs/architecture.md, "Web Vitals").

Exact percentiles that a merged state and a scan of the archive both give: a measurement is
counted in a FIXED histogram bucket, and a percentile is the upper bound of the bucket holding
its rank. Both sources only count page views per (value, vital, bucket) — `raw` by a scan of
`events`, `agg` from `vitals_quarter`, the bucket counts a materialized view on the archive
keeps (migration 0070) — and one function here turns counts into the report, so the two answer
the same number to the unit whenever they count the same page views.

The buckets: every integer up to 40 is its own bucket; above, each upper bound is
floor(1.05 x the previous one), so a reported percentile is at most 5 % above the measured
value of its rank and never below it. Google's thresholds are bounds too, so a bucket is rated
whole. CLS is counted in thousandths (tally/event.py), so the same bounds serve it.

Both sources read the quarter-hours starting in the range (agg's resolution, which every
time zone's midnight falls on): a range of whole quarter-hours, as every period is, is
answered exactly.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Literal

from clickhouse_connect.driver.client import Client

from storage.queries.contract import Source, StatsQuery
from storage.tables import EVENTS, VITALS_QUARTER

#: The largest value the collector takes (collector/payload.py): ms, and CLS in thousandths (at most 100,000).
LARGEST = 120_000

Vital = Literal["lcp", "cls", "inp", "fcp", "ttfb"]
#: Each vital's archive column (tally/event.py), in the report's order.
COLUMNS: dict[Vital, str] = {
    "lcp": "lcp_ms",
    "cls": "cls_milli",
    "inp": "inp_ms",
    "fcp": "fcp_ms",
    "ttfb": "ttfb_ms",
}
#: Google's thresholds, in the archive's units: good up to the first, poor above the second.
THRESHOLDS: dict[Vital, tuple[int, int]] = {
    "lcp": (2500, 4000),
    "cls": (100, 250),
    "inp": (200, 500),
    "fcp": (1800, 3000),
    "ttfb": (800, 1800),
}
#: The report's breakdowns (Plausible's property names) → the archive's column.
PROPERTIES = {
    "event:page": "path",
    "visit:device": "device",
    "visit:country": "country",
    "visit:browser": "browser",
}
PERCENTILES = (50, 75, 95)


def bucket_bounds() -> list[int]:
    """The buckets' upper bounds, ascending: a value v is counted in the first bound >= v.
    Migration 0070 holds the same list as a literal (tests/unit/test_vitals_buckets.py)."""
    bounds = [0]
    while bounds[-1] < LARGEST:
        bounds.append(max(bounds[-1] + 1, math.floor(bounds[-1] * 1.05)))
    thresholds = {bound for pair in THRESHOLDS.values() for bound in pair}
    return sorted({bound for bound in bounds if bound < LARGEST} | thresholds | {LARGEST})


BOUNDS = bucket_bounds()


@dataclass(frozen=True)
class VitalSummary:
    """One vital of one row: its percentiles (the vital's unit: ms, CLS unitless) and the
    page views measured and rated, in percent of the measured ones (one decimal)."""

    measured: int
    p50: float
    p75: float
    p95: float
    good: float
    needs_improvement: float
    poor: float


@dataclass(frozen=True)
class VitalsRow:
    value: str | None  # the page, device, country or browser; None for the whole site
    vitals: dict[str, VitalSummary]  # the vitals measured on its page views


def percentile(counts: dict[int, int], p: int) -> int:
    """The upper bound of the bucket holding the nearest rank ceil(p % of the count)."""
    total = sum(counts.values())
    rank = max(1, math.ceil(total * p / 100))
    seen = 0
    for upper in sorted(counts):
        seen += counts[upper]
        if seen >= rank:
            return upper
    raise ValueError("no measurements")


def in_unit(vital: Vital, upper: int) -> float:
    """A bucket bound in the vital's unit: ms as they are (an integer), CLS from thousandths."""
    return upper / 1000 if vital == "cls" else upper


def summary(vital: Vital, counts: dict[int, int]) -> VitalSummary:
    """A vital's percentiles and ratings from its bucket counts (upper bound → page views)."""
    good_up_to, poor_above = THRESHOLDS[vital]
    measured = sum(counts.values())
    good = sum(n for upper, n in counts.items() if upper <= good_up_to)
    poor = sum(n for upper, n in counts.items() if upper > poor_above)

    def share(n: int) -> float:
        return round(100 * n / measured, 1)

    p50, p75, p95 = (in_unit(vital, percentile(counts, p)) for p in PERCENTILES)
    return VitalSummary(measured, p50, p75, p95, share(good), share(measured - good - poor), share(poor))


# Per (value, vital, bucket) the page views measured: from the archive, each engagement event's
# measured vitals (NULL: not measured) counted in their bucket.
_RAW = f"""
SELECT {{value}} AS value, measurement.1 AS vital,
       arrayFirst(bound -> bound >= assumeNotNull(measurement.2), {{{{bounds:Array(UInt32)}}}}) AS upper,
       count() AS measured
FROM {EVENTS}
ARRAY JOIN [{", ".join(f"('{vital}', {column})" for vital, column in COLUMNS.items())}] AS measurement
WHERE site = {{{{site:String}}}} AND name = 'engagement' AND measurement.2 IS NOT NULL
  AND toStartOfFifteenMinutes(ts) >= {{{{start:DateTime64(3, 'UTC')}}}}
  AND toStartOfFifteenMinutes(ts) < {{{{end:DateTime64(3, 'UTC')}}}}
GROUP BY value, vital, upper
"""
# The same counts, summed from the quarter-hours' (SummingMergeTree: never FINAL, parts add up).
_AGG = f"""
SELECT {{value}} AS value, vital, upper, sum(measured) AS measured
FROM {VITALS_QUARTER}
WHERE site = {{{{site:String}}}}
  AND quarter >= {{{{start:DateTime64(3, 'UTC')}}}} AND quarter < {{{{end:DateTime64(3, 'UTC')}}}}
GROUP BY value, vital, upper
"""


#: The trend's rows: the day in the site's zone of each quarter-hour (agg keeps no event times).
DAY = "day"
_DAY_SQL = {
    "agg": "toString(toDate(quarter, {tz:String}))",
    "raw": "toString(toDate(toStartOfFifteenMinutes(ts), {tz:String}))",
}


def bucket_counts(
    client: Client, q: StatsQuery, property: str | None, source: Source
) -> list[tuple[str, str, int, int]]:
    """(value, vital, upper bound, page views) of the range, from the archive or vitals_quarter;
    the value is the site's day with `property` DAY."""
    # format() inserts the day's SQL as it is: its {tz:String} stays a parameter.
    value = _DAY_SQL[source] if property == DAY else PROPERTIES[property] if property else "''"
    sql = (_AGG if source == "agg" else _RAW).format(value=value)
    parameters = {"site": q.site, "start": q.start, "end": q.end, "bounds": BOUNDS, "tz": q.timezone}
    return [tuple(row) for row in client.query(sql, parameters=parameters).result_rows]


def vitals(
    client: Client, q: StatsQuery, property: str | None = None, limit: int = 10, source: Source = "raw"
) -> list[VitalsRow]:
    """The report: a row per value of `property` (one for the site without), most measured
    page views first, at most `limit`."""
    if property is not None and property not in PROPERTIES:
        raise ValueError(f"property must be one of {', '.join(PROPERTIES)}")
    rows = summarised(bucket_counts(client, q, property, source), whole_site=property is None)
    rows.sort(key=lambda row: (-max(s.measured for s in row.vitals.values()), row.value or ""))
    return rows[:limit]


def vitals_by_day(client: Client, q: StatsQuery, source: Source = "raw") -> list[VitalsRow]:
    """The report per day of the site's time zone (ISO dates, in order): the days with a
    measurement, for a trend line."""
    return sorted(summarised(bucket_counts(client, q, DAY, source)), key=lambda row: row.value or "")


def summarised(counted: list[tuple[str, str, int, int]], whole_site: bool = False) -> list[VitalsRow]:
    counts: dict[str, dict[str, dict[int, int]]] = defaultdict(lambda: defaultdict(dict))
    for value, vital, upper, measured in counted:
        counts[value][vital][int(upper)] = int(measured)
    return [
        VitalsRow(
            None if whole_site else value,
            {vital: summary(vital, by_vital[vital]) for vital in COLUMNS if vital in by_vital},
        )
        for value, by_vital in counts.items()
    ]
