"""How `tally query` prints a result on the terminal: a table, CSV or JSON.

Terminal output is the CLI's concern, not the store's: storage/readonly_sql.py runs the query
and hands back rows; this module only formats them.
"""

from __future__ import annotations

import csv
import io
import json

from rich.console import Console
from rich.table import Table

from storage.readonly_sql import QueryResult


def print_result(result: QueryResult, output_format: str, console: Console) -> None:
    if output_format == "json":
        rows = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
        console.print_json(json.dumps(rows, default=str))
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
