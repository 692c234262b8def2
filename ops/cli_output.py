"""How `tally query` prints a result on the terminal: a table, CSV or JSON.

Terminal output is the CLI's concern, not the store's: storage/readonly_sql.py runs the query
and hands back rows; this module only formats them.
"""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from storage.readonly_sql import QueryResult
from tally.csv_cells import csv_text


def print_result(result: QueryResult, output_format: str, console: Console) -> None:
    if output_format == "json":
        rows = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
        console.print_json(json.dumps(rows, default=str))
    elif output_format == "csv":
        # Collector-supplied text is neutralised: the file may be opened in a spreadsheet.
        print(csv_text([result.columns, *result.rows]), end="")
    else:
        table = Table(*result.columns)
        for row in result.rows:
            table.add_row(*(str(value) for value in row))
        console.print(table)
