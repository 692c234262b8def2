"""Read-only SQL over the archive (`tally query`, the dashboard's Explore tab).

Enforced by ClickHouse itself (readonly=1, so no write, DDL or setting change gets
through) with limits on time and result size.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass

from clickhouse_connect.driver.exceptions import DatabaseError
from rich.console import Console
from rich.table import Table

from storage.client import connect
from tally.settings import Settings

LIMITS = {
    "readonly": 1,
    "max_execution_time": 30,
    "max_result_rows": 10_000,
    "result_overflow_mode": "break",
}


class QueryRefused(Exception):
    """ClickHouse refused the query; the message says why."""


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple]


def run(settings: Settings, sql: str) -> QueryResult:
    client = connect(settings)
    try:
        result = client.query(sql, settings=LIMITS)
    except DatabaseError as error:
        raise QueryRefused(_clickhouse_message(str(error))) from None
    return QueryResult(list(result.column_names), [tuple(row) for row in result.result_rows])


def _clickhouse_message(text: str) -> str:
    """The 'DB::Exception: …' line of a ClickHouse error, without the client's wrapping."""
    for line in text.splitlines():
        if "Exception:" in line:
            return line.split("Exception:", 1)[1].strip().split(" (version")[0]
    return text.strip().splitlines()[0] if text.strip() else "query refused"


def print_result(result: QueryResult, output_format: str, console: Console) -> None:
    if output_format == "json":
        console.print_json(
            json.dumps([dict(zip(result.columns, row, strict=True)) for row in result.rows], default=str)
        )
    elif output_format == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(result.columns)
        writer.writerows(result.rows)
        print(buffer.getvalue(), end="")
    else:
        table = Table(*result.columns)
        for row in result.rows:
            table.add_row(*(str(value) for value in row))
        console.print(table)
