"""The `salts` table: one random salt per UTC day, shared by every collector instance.

The collector (collector/salts.py) decides when to create and forget them; this module is how
they are stored. Never readable through raw SQL (storage/sql_allowlist.py).
"""

from __future__ import annotations

from datetime import date

from clickhouse_connect.driver.client import Client

from storage import tables


def load_salts(client: Client, days: list[date]) -> dict[date, str]:
    """The salt (hex) of each of `days` that has one; where two instances raced, the smallest."""
    rows = client.query(
        f"SELECT day, min(salt) FROM {tables.SALTS} WHERE day IN {{days:Array(Date)}} GROUP BY day",
        parameters={"days": days},
    ).result_rows
    return dict(rows)


def add_salts(client: Client, salts: dict[date, str]) -> None:
    client.insert(tables.SALTS, [[day, salt] for day, salt in salts.items()], column_names=["day", "salt"])


def forget_salts_before(client: Client, cutoff: date) -> None:
    client.command(
        f"ALTER TABLE {tables.SALTS} DELETE WHERE day < {{cutoff:Date}}", parameters={"cutoff": cutoff}
    )
