"""`tally export`: one site's raw events for a time range, streamed out of the archive in
Parquet or CSV without holding the result in memory.

Parquet is the engine's own bytes. CSV is written here, block by block of rows, through
tally/csv_cells.py: the events hold text anyone's browser sent (paths, referrers, properties),
and a CSV file is opened in spreadsheets, which run a cell such as `=HYPERLINK(…)` as a formula
unless it is neutralised. (The engine's CSVWithNames would write it as it is.)"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from itertools import pairwise
from typing import BinaryIO, cast

import pyarrow as pa
import pyarrow.parquet as pq
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
        whole = (EXPORT_SQL, parameters)
        for chunk in _csv_chunks(client, whole, [whole]):
            target.write(chunk)
    else:
        with client.raw_stream(EXPORT_SQL, parameters=parameters, fmt="Parquet") as chunks:
            for chunk in chunks:
                target.write(chunk)
    count_sql = "SELECT count() FROM (" + EXPORT_SQL.replace("ORDER BY ts", "") + ")"
    return int(client.query(count_sql, parameters=parameters).result_rows[0][0])


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
FIGURE_COLUMNS = (
    "* EXCEPT (ip_hash) REPLACE (toString(event_id) AS event_id), "
    "{definitions_version:UInt32} AS definitions_version"
)
# An export is read in parts of whole UTC days of about this many rows (each a bounded answer of
# the engine, which the local endpoint holds whole before sending it).
SLICE_ROWS = 200_000
SLICE_START, SLICE_END = "slice_start", "slice_end"
ROW_GROUP_ROWS = 65_536  # Parquet row groups of this many rows: a few MiB held at a time


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
    days: tuple[tuple[date, int], ...] = ()  # the UTC days holding rows, and how many each

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
    # Per UTC day: a visitor is one per day, so the days' visitors add up to the range's.
    per_day = client.query(
        f"SELECT toDate(ts) AS day, count(), {RAW_VISITORS} {source_sql} GROUP BY day ORDER BY day",
        parameters=parameters,
    ).result_rows
    rows, visitors = sum(int(r[1]) for r in per_day), sum(int(r[2]) for r in per_day)
    days = tuple((day, int(count)) for day, count, _ in per_day)
    return FigureEvents(metric, source_sql, parameters, rows, visitors, days)


def stream_figure(client: Client, found: FigureEvents, output_format: str) -> Iterator[bytes]:
    """The figure's events as Parquet or CSV, chunk by chunk, a part of the range at a time
    (figure_slices): memory stays one block here and one part's answer in the engine, whatever
    the count (the local endpoint holds an answer whole before sending it)."""
    if output_format == "csv":
        yield from _csv_chunks(client, (found.select_sql, found.parameters), figure_slices(found))
    else:
        yield from _parquet_chunks(client, found)


def figure_slices(found: FigureEvents) -> Iterator[tuple[str, dict[str, object]]]:
    """The figure's SELECT over consecutive parts of its range that cover it exactly, each cut at a
    UTC midnight once the days before it hold SLICE_ROWS rows (a day holding more is a part of its
    own). Only `ts` is narrowed: every other condition keeps the whole range's parameters."""
    start, end = cast(datetime, found.parameters["start"]), cast(datetime, found.parameters["end"])
    start, end = start.astimezone(UTC), end.astimezone(UTC)  # UTC days, whatever the site's zone
    edges, held = [start], 0
    for day, count in found.days:
        midnight = datetime.combine(day, time(), UTC)
        if held and held + count > SLICE_ROWS and edges[-1] < midnight < end:
            edges.append(midnight)
            held = 0
        held += count
    edges.append(end)
    for low, high in pairwise(edges):
        yield (
            found.select_sql + f" AND ts >= {{{SLICE_START}:DateTime64(3, 'UTC')}} "
            f"AND ts < {{{SLICE_END}:DateTime64(3, 'UTC')}}",
            {**found.parameters, SLICE_START: low, SLICE_END: high},
        )


def _csv_chunks(
    client: Client, columns_of: tuple[str, dict[str, object]], parts: Iterable[tuple[str, dict[str, object]]]
) -> Iterator[bytes]:
    """A header line (the columns of the query `columns_of`), then each block of rows the engine
    streams for each part in turn (a few thousand rows at a time)."""
    sql, parameters = columns_of
    described = client.query(f"DESCRIBE ({sql})", parameters=parameters).result_rows
    yield csv_text([[row[0] for row in described]]).encode()
    for sql, parameters in parts:
        with client.query_row_block_stream(sql, parameters=parameters) as blocks:
            for block in blocks:
                yield csv_text(block).encode()


class _Chunks:
    """A file pyarrow writes into; what it wrote is taken out after each row group."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def taken(self) -> bytes:
        data, self.parts = b"".join(self.parts), []
        return data


def _parquet_chunks(client: Client, found: FigureEvents) -> Iterator[bytes]:
    """One Parquet file written here from the Arrow blocks the engine streams, a row group per
    ROW_GROUP_ROWS rows (at most that many held); the figure and the definitions version also
    in the file's metadata."""
    sink = _Chunks()
    writer: pq.ParquetWriter | None = None
    held: list[pa.RecordBatch] = []
    for sql, parameters in figure_slices(found):
        with client.query_arrow_stream(sql, parameters=parameters, use_strings=True) as batches:
            for batch in batches:
                if writer is None:
                    schema = batch.schema.with_metadata(_parquet_metadata(found))
                    writer = pq.ParquetWriter(pa.PythonFile(sink, mode="w"), schema, compression="zstd")
                held.append(batch.cast(writer.schema))
                if sum(b.num_rows for b in held) >= ROW_GROUP_ROWS:
                    writer.write_table(pa.Table.from_batches(held))
                    held = []
                    yield sink.taken()
    if writer is None:  # no rows: an empty file with the columns
        columns_only = found.select_sql + " LIMIT 0"
        empty = client.query_arrow(columns_only, parameters=found.parameters, use_strings=True)
        writer = pq.ParquetWriter(
            pa.PythonFile(sink, mode="w"), empty.schema.with_metadata(_parquet_metadata(found))
        )
    if held:
        writer.write_table(pa.Table.from_batches(held))
    writer.close()
    yield sink.taken()


def _parquet_metadata(found: FigureEvents) -> dict[str, str]:
    return {
        "tally.figure": f"{found.metric}={found.figure}",
        "tally.figure_rule": found.figure_rule,
        "tally.definitions_version": str(found.parameters["definitions_version"]),
    }
