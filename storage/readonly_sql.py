"""Read-only SQL over the archive (`tally query`, the dashboard's Explore tab).

Two guards, both ClickHouse's own:
1. Before running, ClickHouse parses the query (`EXPLAIN AST`, which executes nothing) and
   every node of the tree is checked against allow-lists (storage/sql_allowlist.py): only a
   SELECT; node kinds of a SELECT's parts only (no INTO OUTFILE, FORMAT, SETTINGS or query
   parameters: the product picks the format and the limits); listed functions only (no
   `file()`, `url()`, dictionaries, introspection); every table named anywhere — FROM, JOIN,
   the right side of IN, subqueries, CTEs — one of Tally's readable tables, never `salts`,
   never another database. chDB runs ClickHouse in local mode, where readonly=1 stops neither
   INTO OUTFILE nor `file()`: this check is what does.
2. The query runs with readonly=1 and resource limits, so that a query too big for the
   machine fails fast with one line instead of taking the store down with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError

from storage.client import connect
from storage.literals import quote_string
from storage.sql_allowlist import (
    IN_FUNCTIONS,
    NODE_KINDS,
    PRIVATE_TABLES,
    READABLE_TABLES,
    function_allowed,
)
from tally.refusal import Refused
from tally.settings import Settings

MAX_ROWS = 10_000
#: A query may use this much memory: enough for a GROUP BY over the whole archive of a
#: busy site; far below what the machine (and the stack on it) needs to stay up.
MAX_MEMORY_BYTES = 1 << 30
LIMITS = {
    "readonly": 1,
    "max_execution_time": 30,
    "max_memory_usage": MAX_MEMORY_BYTES,
    # IN (subquery) sets live in memory before the memory limit sees the whole query.
    "max_rows_in_set": 10_000_000,
    # Two cores, shared with the collector, the archiver and Spark: one query gets two threads.
    "max_threads": 2,
    "max_result_rows": MAX_ROWS,
    # The rows a user is shown, with room for wide rows; beyond it the result is cut.
    "max_result_bytes": 64 << 20,
    # 'break' stops at a block boundary: small blocks keep the overshoot small, and the
    # result is cut to MAX_ROWS on our side as well.
    "result_overflow_mode": "break",
    "max_block_size": 1024,
}
#: The EXPLAIN runs read-only too; readonly=2 so that a SETTINGS clause reaches the check
#: (and is refused there, by name) instead of failing as a setting change.
EXPLAIN_LIMITS = {"readonly": 2, "max_execution_time": 10}
_PRODUCT_CHOOSES = "Tally picks the output format and sets the query's limits itself"
#: What each error code of a user query means to the user (ClickHouse's own wording is long
#: and names internals).
_MESSAGES_BY_CODE = {
    241: f"the query needs more than {MAX_MEMORY_BYTES >> 30} GiB of memory; narrow it (WHERE, LIMIT)",
    159: f"the query ran longer than {LIMITS['max_execution_time']} s; narrow it (WHERE, LIMIT)",
    191: f"an IN (subquery) set holds more than {LIMITS['max_rows_in_set']:,} rows; narrow the subquery",
    456: "query parameters ({name:Type}) are not supported; write the value into the query",
    # Only a SETTINGS clause changes a setting in a SELECT; readonly=1 refuses it.
    164: f"SETTINGS is not allowed (readonly): {_PRODUCT_CHOOSES}",
}
_AST_LINE = re.compile(r"^(?P<indent> *)(?P<kind>[\w:]+) ?(?P<rest>.*)$")
_CHILDREN = re.compile(r" ?\(children \d+\)$")
_ALIAS = re.compile(r" ?\(alias .*\)$")
#: What a clause after a SELECT is, by the node ClickHouse hangs it on the query.
_OUTPUT_CLAUSES = {
    "Literal": "INTO OUTFILE",
    "Identifier": "FORMAT",
    "Set": "SETTINGS",
}


class QueryRefused(Refused):
    """The query was refused, by Tally's rules or by ClickHouse; the message says why."""


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple]
    truncated: bool = False


@dataclass
class AstNode:
    """One node of `EXPLAIN AST`: its kind, the name it carries (function, table, column…)."""

    kind: str
    name: str
    children: list[AstNode] = field(default_factory=list)


@dataclass(frozen=True)
class Catalog:
    """What names mean in the store right now: Tally's database, its tables, other databases."""

    database: str
    tables: frozenset[str]
    other_databases: frozenset[str]

    @classmethod
    def read(cls, client: Client, database: str) -> Catalog:
        tables = client.query(
            "SELECT name FROM system.tables WHERE database = {database:String}",
            parameters={"database": database},
        )
        databases = client.query("SELECT name FROM system.databases")
        return cls(
            database=database,
            tables=frozenset(row[0] for row in tables.result_rows),
            other_databases=frozenset(row[0].lower() for row in databases.result_rows) - {database.lower()},
        )

    @cached_property
    def private_tables(self) -> frozenset[str]:
        """Tally's tables that raw SQL may not read, lowercased (a refused look-alike costs nothing)."""
        return frozenset(name.lower() for name in (self.tables - READABLE_TABLES) | PRIVATE_TABLES)


def run(
    settings: Settings, sql: str, client: Client | None = None, timeout_s: float | None = None
) -> QueryResult:
    """The guarded query's result (at most MAX_ROWS rows); `timeout_s` shortens its time limit
    (the stats API's door runs it under the stats path's timeout)."""
    limits = LIMITS
    if timeout_s is not None:
        limits = LIMITS | {"max_execution_time": min(float(LIMITS["max_execution_time"]), timeout_s)}
    try:
        client = client or connect(settings)
        check_reads(client, sql, settings.clickhouse_database)
        result = client.query(sql, settings=limits)
    except DatabaseError as error:
        if isinstance(error, OperationalError) and error.code is None:
            raise  # the store is not answering: not a refusal (the CLI says how to start it)
        raise QueryRefused(_refusal(error)) from None
    rows = [tuple(row) for row in result.result_rows[: MAX_ROWS + 1]]
    return QueryResult(list(result.column_names), rows[:MAX_ROWS], truncated=len(rows) > MAX_ROWS)


def check_reads(client: Client, sql: str, database: str) -> None:
    """Refuse a query unless every node of its syntax tree is on the allow-lists."""
    root = parse_ast(client.raw_query(f"EXPLAIN AST {sql}", settings=EXPLAIN_LIMITS).decode())
    if root is None or root.kind != "SelectWithUnionQuery":
        raise QueryRefused("only SELECT queries are allowed")
    _SelectGuard(Catalog.read(client, database)).check(root)


def parse_ast(text: str) -> AstNode | None:
    """The tree of `EXPLAIN AST` output: one node a line, children indented one space deeper.

    The output is TabSeparated, so a line break inside a literal arrives escaped and every
    line is one node. A line that is not a node is an error: refuse rather than guess.
    """
    root: AstNode | None = None
    parents: list[AstNode] = []
    for line in text.splitlines():
        found = _AST_LINE.match(line)
        if found is None or len(found["indent"]) > len(parents) or (root and not found["indent"]):
            raise QueryRefused("the query could not be checked (unexpected EXPLAIN AST output)")
        rest = _ALIAS.sub("", _CHILDREN.sub("", found["rest"]))
        node = AstNode(found["kind"], rest)
        del parents[len(found["indent"]) :]
        if parents:
            parents[-1].children.append(node)
        else:
            root = node
        parents.append(node)
    return root


class _SelectGuard:
    """Walks the tree of one SELECT and raises QueryRefused at the first node not allowed."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def check(self, node: AstNode) -> None:
        if node.kind not in NODE_KINDS:
            raise QueryRefused(_unknown_node_message(node))
        if node.kind == "SelectWithUnionQuery":
            self._check_output_clauses(node)
        elif node.kind == "TableExpression":
            self._check_table_expression(node)
        elif node.kind == "TableIdentifier":
            self._check_table(node.name)
        elif node.kind == "Function":
            self._check_function(node)
        elif node.kind == "Identifier":
            self._check_identifier(node.name)
        for child in node.children:
            self.check(child)

    def _check_output_clauses(self, node: AstNode) -> None:
        # A SELECT's own children are its list of selects; anything after it is an output
        # clause: INTO OUTFILE (a Literal, then COMPRESSION's), FORMAT (an Identifier), SETTINGS.
        if len(node.children) > 1:
            clause = node.children[1]
            named = _OUTPUT_CLAUSES.get(clause.kind, f"the {clause.kind} clause")
            raise QueryRefused(f"{named} is not allowed: {_PRODUCT_CHOOSES}")

    def _check_table_expression(self, node: AstNode) -> None:
        source = node.children[0] if node.children else None
        if source is not None and source.kind == "Function":
            raise QueryRefused(
                f"table functions such as {source.name}() are not allowed; query the archive's tables"
            )

    def _check_function(self, node: AstNode) -> None:
        if not function_allowed(node.name):
            raise QueryRefused(f"the function {node.name}() is not allowed in raw SQL")
        arguments = node.children[0].children if node.children else []
        if node.name.lower() in IN_FUNCTIONS and len(arguments) == 2 and arguments[1].kind == "Identifier":
            # `x IN name` reads the table `name`: the right side is a table reference.
            self._check_table(arguments[1].name)

    def _check_identifier(self, name: str) -> None:
        parts = name.lower().split(".")
        for part in parts:
            if part in self._catalog.private_tables:
                raise QueryRefused(f"the table {part!r} is private")
        if len(parts) > 1 and parts[0] in self._catalog.other_databases:
            raise QueryRefused(self._other_database_message(name))

    def _check_table(self, name: str) -> None:
        """A table reference: one of the readable tables, bare or in Tally's database.

        A bare name that is no table of Tally's is a CTE's (or unknown, which ClickHouse
        refuses itself); one that is a table of Tally's must be readable, so a CTE cannot
        lend its name to an out-of-scope read of a private table."""
        qualifier, _, table = name.rpartition(".")
        if qualifier and qualifier != self._catalog.database:
            raise QueryRefused(self._other_database_message(name))
        if table.lower() in self._catalog.private_tables:
            raise QueryRefused(f"the table {table!r} is private")
        if qualifier and table not in READABLE_TABLES:
            raise QueryRefused(
                f"{name} is not one of the tables raw SQL reads: {', '.join(sorted(READABLE_TABLES))}"
            )

    def _other_database_message(self, name: str) -> str:
        return f"reading {name} is not allowed: only the tables of the {self._catalog.database!r} database"


def _unknown_node_message(node: AstNode) -> str:
    if node.kind == "Set":  # SETTINGS inside a subquery
        return f"SETTINGS is not allowed: {_PRODUCT_CHOOSES}"
    return f"{node.kind} is not allowed in raw SQL"


def _refusal(error: DatabaseError) -> str:
    if error.code in _MESSAGES_BY_CODE:
        return _MESSAGES_BY_CODE[error.code]
    return _clickhouse_message(str(error))


def _clickhouse_message(text: str) -> str:
    """The 'DB::Exception: …' line of a ClickHouse error, without the client's wrapping."""
    for line in text.splitlines():
        if "Exception:" in line:
            # The endpoint may wrap the engine's error in its own: the innermost is the cause.
            return line.rsplit("Exception:", 1)[1].strip().split(" (version")[0]
    return text.strip().splitlines()[0] if text.strip() else "query refused"


# --- the SQL a user starts from (the dashboard's Explore tab) -------------------------------

#: Before a site is chosen: the sites in the archive, busiest first.
SITES_SQL = "SELECT site, count() AS events FROM events GROUP BY site ORDER BY events DESC"
EXPLORE_COLUMNS = "ts, path, referrer_domain, utm_source, country, device, browser, os, visitor_id"


def starting_sql(site: str, start: datetime, end: datetime, filters: dict[str, str], limit: int) -> str:
    """A site's page views in [start, end) matching `filters` (column → value), newest first.

    Written out with literals, not parameters: the user reads and edits it before it runs."""
    conditions = [
        f"site = {quote_string(site)}",
        f"ts >= toDateTime64({quote_string(_clickhouse_time(start))}, 3, 'UTC')",
        f"ts < toDateTime64({quote_string(_clickhouse_time(end))}, 3, 'UTC')",
        *(f"{column} = {quote_string(value)}" for column, value in filters.items()),
    ]
    where = "\n  AND ".join(conditions)
    return f"SELECT {EXPLORE_COLUMNS}\nFROM events\nWHERE {where}\nORDER BY ts DESC\nLIMIT {int(limit)}"


def _clickhouse_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
