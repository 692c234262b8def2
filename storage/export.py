"""`tally export`: one site's raw events for a time range, streamed out of the archive in
Parquet or CSV without holding the result in memory."""

from __future__ import annotations

from datetime import datetime
from typing import BinaryIO

from storage.client import connect
from tally.settings import Settings

FORMATS = {"parquet": "Parquet", "csv": "CSVWithNames"}
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
    with client.raw_stream(EXPORT_SQL, parameters=parameters, fmt=FORMATS[output_format]) as chunks:
        for chunk in chunks:
            target.write(chunk)
    count_sql = "SELECT count() FROM (" + EXPORT_SQL.replace("ORDER BY ts", "") + ")"
    return int(client.query(count_sql, parameters=parameters).result_rows[0][0])
