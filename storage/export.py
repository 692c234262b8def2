"""`tally export`: one site's raw events for a time range, streamed out of the archive in
Parquet or CSV without holding the result in memory.

Parquet is the engine's own bytes. CSV is written here, block by block of rows, through
tally/csv_cells.py: the events hold text anyone's browser sent (paths, referrers, properties),
and a CSV file is opened in spreadsheets, which run a cell such as `=HYPERLINK(…)` as a formula
unless it is neutralised. (The engine's CSVWithNames would write it as it is.)"""

from __future__ import annotations

from datetime import datetime
from typing import BinaryIO

from clickhouse_connect.driver.client import Client

from storage.client import connect
from tally.csv_cells import csv_text
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
