"""`POST /api/v1/query`: Explore's read-only SQL over the archive, over HTTP, for the operator's
key only (dashboard/access.py declares it `operator`: raw SQL reads every tenant's rows, and a
member was once found reading every site through Explore). `tally mcp`'s `sql` tool calls it.

The query goes through storage/readonly_sql.py's guard (only a SELECT of listed node kinds,
functions and tables: no `file()`, INTO OUTFILE, INSERT or second statement) and runs read-only
under its limits, with the stats path's time limit on top; the answer holds at most `limit` rows
and says when it was cut. No Flask here: the blueprint (stats.py) hands in the body and a client.
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from uuid import UUID

from clickhouse_connect.driver.client import Client

from dashboard.http_api.parameters import MAX_LIMIT, BadParameter
from storage import readonly_sql
from tally.settings import Settings

DEFAULT_ROWS = 100
#: The longest SQL text taken (Explore's editor holds far less; the guard parses all of it).
MAX_SQL_LENGTH = 20_000
JSONValue = str | int | float | bool | None | list["JSONValue"] | dict[str, "JSONValue"]


def parse(body: object) -> tuple[str, int]:
    """The SQL and the row cap of a request body `{"sql": "...", "limit": N}`; BadParameter
    naming the field otherwise."""
    if not isinstance(body, dict):
        raise BadParameter("body", 'a JSON object, e.g. {"sql": "SELECT count() FROM events"}')
    unknown = sorted(set(body) - {"sql", "limit"})
    if unknown:
        raise BadParameter(unknown[0], "unknown field; the body has sql and limit")
    sql = body.get("sql")
    if not isinstance(sql, str) or not sql.strip():
        raise BadParameter("sql", "required, one SELECT over the archive (table events)")
    if len(sql) > MAX_SQL_LENGTH:
        raise BadParameter("sql", f"too long: at most {MAX_SQL_LENGTH:,} characters")
    limit = body.get("limit", DEFAULT_ROWS)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise BadParameter("limit", f"must be a whole number from 1 to {MAX_LIMIT}")
    return sql, limit


def answer(settings: Settings, client: Client, sql: str, limit: int) -> dict[str, object]:
    """The guarded query's columns and first `limit` rows; `truncated` when there were more."""
    result = readonly_sql.run(settings, sql, client, timeout_s=settings.stats_query_timeout_s)
    rows = result.rows[:limit]
    truncated = result.truncated or len(result.rows) > limit
    return {
        "columns": result.columns,
        "rows": [[cell(value) for value in row] for row in rows],
        "row_count": len(rows),
        "truncated": truncated,
        "limit": limit,
    }


def cell(value: object) -> JSONValue:
    """A value of a result row as JSON: times as ISO-8601, ids and decimals as strings."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, UUID | Decimal | bytes):
        return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
    if isinstance(value, list | tuple):
        return [cell(item) for item in value]
    if isinstance(value, dict):
        return {str(key): cell(item) for key, item in value.items()}
    return str(value)
