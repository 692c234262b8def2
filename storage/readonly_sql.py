"""Read-only SQL over the archive (`tally query`, the dashboard's Explore tab).

Two guards, both ClickHouse's own:
1. Before running, ClickHouse parses the query (`EXPLAIN AST`) and we read what it would
   read: only a SELECT, only tables of Tally's database, never `salts` (they would let
   anyone link visitor ids back to visitors), no table functions (`file()`, `url()`,
   `remote()` … reach outside the store).
2. The query runs with readonly=1 (no write, DDL or setting change gets through), a time
   limit and a result-size limit.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import DatabaseError
from rich.console import Console
from rich.table import Table

from storage.client import connect
from tally.settings import Settings

MAX_ROWS = 10_000
LIMITS = {
    "readonly": 1,
    "max_execution_time": 30,
    "max_result_rows": MAX_ROWS,
    # 'break' stops at a block boundary: small blocks keep the overshoot small, and the
    # result is cut to MAX_ROWS on our side as well.
    "result_overflow_mode": "break",
    "max_block_size": 1024,
}
# Tables of Tally's database that raw SQL may never read.
PRIVATE_TABLES = frozenset({"salts", "schema_migrations"})
_AST_NODE = re.compile(r"^(?P<indent> *)(?P<kind>\w+)(?: (?P<name>[^ ]+))?")


class QueryRefused(Exception):
    """The query was refused, by Tally's rules or by ClickHouse; the message says why."""


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple]
    truncated: bool = False


def run(settings: Settings, sql: str, client: Client | None = None) -> QueryResult:
    client = client or connect(settings)
    check_reads(client, sql, settings.clickhouse_database)
    try:
        result = client.query(sql, settings=LIMITS)
    except DatabaseError as error:
        raise QueryRefused(_clickhouse_message(str(error))) from None
    rows = [tuple(row) for row in result.result_rows[: MAX_ROWS + 1]]
    return QueryResult(list(result.column_names), rows[:MAX_ROWS], truncated=len(rows) > MAX_ROWS)


def check_reads(client: Client, sql: str, database: str) -> None:
    """Refuse a query that is not a SELECT or reads anything but Tally's public tables."""
    try:
        ast = client.command(f"EXPLAIN AST {sql}", settings={"readonly": 1})
    except DatabaseError as error:
        raise QueryRefused(_clickhouse_message(str(error))) from None
    lines = str(ast).replace("\\n", "\n").splitlines()
    if not lines or not lines[0].startswith("SelectWithUnionQuery"):
        raise QueryRefused("only SELECT queries are allowed")
    for index, line in enumerate(lines):
        node = _AST_NODE.match(line)
        if node is None:
            continue
        if node["kind"] == "TableExpression":
            _check_table_expression(lines, index)
        elif node["kind"] == "TableIdentifier":
            _check_table(node["name"] or "", database)


def _check_table_expression(lines: list[str], index: int) -> None:
    child = _AST_NODE.match(lines[index + 1]) if index + 1 < len(lines) else None
    if child and child["kind"] == "Function":
        raise QueryRefused(
            f"table functions such as {child['name']}() are not allowed; query the archive's tables"
        )


def _check_table(name: str, database: str) -> None:
    qualifier, _, table = name.rpartition(".")
    if qualifier and qualifier != database:
        raise QueryRefused(f"reading {name} is not allowed: only the tables of the {database!r} database")
    if table in PRIVATE_TABLES:
        raise QueryRefused(f"the table {table!r} is private")


def _clickhouse_message(text: str) -> str:
    """The 'DB::Exception: …' line of a ClickHouse error, without the client's wrapping."""
    for line in text.splitlines():
        if "Exception:" in line:
            return line.split("Exception:", 1)[1].strip().split(" (version")[0]
    return text.strip().splitlines()[0] if text.strip() else "query refused"


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
