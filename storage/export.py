"""`tally export`: one site's raw events for a time range, streamed out of the archive in
Parquet or CSV without holding the result in memory.

Parquet is the engine's own bytes. CSV is written here, block by block of rows, through
tally/csv_cells.py: the events hold text anyone's browser sent (paths, referrers, properties),
and a CSV file is opened in spreadsheets, which run a cell such as `=HYPERLINK(…)` as a formula
unless it is neutralised. (The engine's CSVWithNames would write it as it is.)"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import BinaryIO

from clickhouse_connect.driver.client import Client

from storage import queries
from storage.client import connect
from storage.goals import InvalidGoal, find_goal
from storage.queries import StatsQuery, raw
from storage.queries.contract import RAW_VISITORS
from tally.csv_cells import csv_text
from tally.refusal import Refused
from tally.settings import Settings

# Everything a user sent us, minus Kafka bookkeeping.
EXPORT_SQL = """
SELECT * EXCEPT (kafka_partition, kafka_offset)
FROM events
WHERE site = {site:String} AND ts >= {start:DateTime64(3, 'UTC')} AND ts < {end:DateTime64(3, 'UTC')}
ORDER BY ts
"""


def export_events(
    settings: Settings, site: str, start: datetime, end: datetime, output_format: str, target: BinaryIO
) -> int:
    """Write the events to `target` chunk by chunk; returns how many events there were."""
    client = connect(settings)
    parameters = {"site": site, "start": start, "end": end}
    if output_format == "csv":
        _write_csv(client, parameters, target)
    else:
        with client.raw_stream(EXPORT_SQL, parameters=parameters, fmt="Parquet") as chunks:
            for chunk in chunks:
                target.write(chunk)
    count_sql = "SELECT count() FROM (" + EXPORT_SQL.replace("ORDER BY ts", "") + ")"
    return int(client.query(count_sql, parameters=parameters).result_rows[0][0])


def _write_csv(client: Client, parameters: dict[str, object], target: BinaryIO) -> None:
    """A header line, then each block of rows the engine streams (a few thousand at a time)."""
    with client.query_row_block_stream(EXPORT_SQL, parameters=parameters) as blocks:
        target.write(csv_text([blocks.source.column_names]).encode())
        for block in blocks:
            target.write(csv_text(block).encode())


# --- the events behind a figure -------------------------------------------------------------
# `GET /api/v1/export/events`, `tally export --figure`: exactly the archived events a figure of
# the stats API counts, found by the SQL the raw path counts them with (storage/queries/raw.py:
# pageviews_sql, custom_events_sql, goal_events_sql), so export and figure cannot drift.

# A figure, what its events are, and what the rows add up to.
FIGURES = {
    "pageviews": "rows: the page views passing the filters",
    "visitors": "distinct (UTC day of ts, visitor_id) over the rows: page views passing the filters",
    "events": "rows: the custom events (or the goal's events) passing the filters",
    "conversions": "distinct (UTC day of ts, visitor_id) over the rows: goal events passing the filters",
}
# What every exported row carries: the archived event as it was on the log (minus ip_hash, the
# rate limiter's salted client hash, no analytics field), where on the log it was, and the
# definitions version the figure was made with (0: none recorded yet).
FIGURE_COLUMNS = "* EXCEPT (ip_hash), {definitions_version:UInt32} AS definitions_version"


class FigureRefused(Refused):
    """A figure that is no count of events, or a goal it needs and does not name."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}", field=field)


@dataclass(frozen=True)
class FigureEvents:
    """The SQL selecting a figure's events, its parameters, and the figure's value."""

    metric: str
    source_sql: str  # `FROM events WHERE …`
    parameters: dict[str, object]
    rows: int
    visitors: int

    @property
    def figure(self) -> int:
        return self.visitors if self.metric in ("visitors", "conversions") else self.rows

    @property
    def figure_rule(self) -> str:
        return FIGURES[self.metric]

    @property
    def select_sql(self) -> str:
        return f"SELECT {FIGURE_COLUMNS} {self.source_sql}"


def figure_events(
    client: Client, q: StatsQuery, metric: str, goal: str = "", definitions_version: int = 0
) -> FigureEvents:
    """The events behind `metric` of `q` (the goal's events for a goal's), and its value now."""
    if metric not in FIGURES:
        raise FigureRefused(
            "metric",
            f"{metric!r} is not a count of events; exported are those of {', '.join(FIGURES)}",
        )
    q = queries.with_goal(client, q)
    if metric in ("pageviews", "visitors"):
        if goal:
            raise FigureRefused("goal", "only with metric=events or metric=conversions")
        source_sql, parameters = raw.pageviews_sql(q), {}
    elif goal:
        try:
            found = find_goal(client, q.site, goal)
        except InvalidGoal as refusal:
            raise FigureRefused("goal", str(refusal)) from None
        source_sql, parameters = raw.goal_events_sql(q, found)
    elif metric == "conversions":
        raise FigureRefused("goal", "required with metric=conversions: a goal's name")
    else:
        source_sql, parameters = raw.custom_events_sql(q), {}
    parameters = {**q.parameters(), **parameters, "definitions_version": definitions_version}
    rows, visitors = client.query(
        f"SELECT count(), {RAW_VISITORS} {source_sql}", parameters=parameters
    ).result_rows[0]
    return FigureEvents(metric, source_sql, parameters, int(rows), int(visitors))


def stream_figure(client: Client, found: FigureEvents, output_format: str) -> Iterator[bytes]:
    """The figure's events as Parquet (the engine's bytes) or CSV (header, then each block of
    rows the engine streams), chunk by chunk: memory stays one block, whatever the count."""
    if output_format == "csv":
        with client.query_row_block_stream(found.select_sql, parameters=found.parameters) as blocks:
            yield csv_text([blocks.source.column_names]).encode()
            for block in blocks:
                yield csv_text(block).encode()
        return
    with client.raw_stream(found.select_sql, parameters=found.parameters, fmt="Parquet") as chunks:
        yield from chunks
