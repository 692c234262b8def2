"""The `salts` table: one random salt per period of each rotation (a UTC day, an ISO week, a
month: storage/site_identity.py), shared by every collector instance.

The collector (collector/salts.py) decides when to create and forget them; this module is how
they are stored. A salt is keyed by its rotation (`period`, migration 0073; the rows before
are daily) and the first day of its period (`day`). Never readable through raw SQL
(storage/sql_allowlist.py).
"""

from __future__ import annotations

from datetime import date

from clickhouse_connect.driver.client import Client

from storage import tables
from storage.site_identity import Rotation

Period = tuple[Rotation, date]  # (rotation, the period's first day)


def load_salts(client: Client, periods: list[Period]) -> dict[Period, str]:
    """The salt (hex) of each of `periods` that has one; where two instances raced, the smallest."""
    rows = client.query(
        f"SELECT period, day, min(salt) FROM {tables.SALTS} "
        "WHERE period IN {rotations:Array(String)} AND day IN {days:Array(Date)} GROUP BY period, day",
        parameters={"rotations": sorted({r for r, _ in periods}), "days": sorted({d for _, d in periods})},
    ).result_rows
    wanted = set(periods)
    return {(period, day): salt for period, day, salt in rows if (period, day) in wanted}


def add_salts(client: Client, salts: dict[Period, str]) -> None:
    client.insert(
        tables.SALTS,
        [[period, day, salt] for (period, day), salt in salts.items()],
        column_names=["period", "day", "salt"],
    )


def forget_salts_ended_before(client: Client, cutoff: date) -> None:
    """Delete every salt whose period was over before `cutoff` began (its last day is before the
    day before `cutoff`): no collector hashes with it any more."""
    client.command(
        f"ALTER TABLE {tables.SALTS} DELETE WHERE "
        "multiIf(period = 'weekly', day + 7, period = 'monthly', addMonths(day, 1), day + 1) < {cutoff:Date}",
        parameters={"cutoff": cutoff},
    )
