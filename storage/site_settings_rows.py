"""A site's settings as rows that are only ever added: one store for every per-site setting.

Every per-site setting (goals, segments, saved funnels, shared links, alert rules, channel rules,
exclusions, report subscriptions, custom properties, annotations) is kept the same way: a change
is a new row of the setting's key, stamped `changed_at` (now, by the table's default), with
`removed` 1 when the change takes the setting away; the newest row of each key is the setting
as it stands, and a key whose newest row is a removal is gone until a newer row brings it back.
No row is updated or deleted, so two processes changing settings at once never lose a row, and
ClickHouse's ReplacingMergeTree(changed_at) only tidies the older rows away in its merges.

`SettingsTable` describes one table (its name, the columns that name a setting and the columns
that hold it); `write` adds rows and `newest` reads the settings as they stand, so that each
store says only what is its own: its checks, its key, its order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from clickhouse_connect.driver.client import Client

#: Each table's stamp: the newest row of a key is the one with the latest.
CHANGED_AT = "changed_at"


@dataclass(frozen=True)
class SettingsTable:
    """One settings table: `keys` name a setting (a row per change of it), `values` hold it.

    `removed` is the column that marks a removal (None: the table's settings are never removed,
    as a shared link, which is revoked and still listed). `final`: read the newest rows with
    FINAL (ReplacingMergeTree's own choice of the newest row, the last written on a tie of the
    stamp) rather than the newest value of each column, as annotations have always been read."""

    name: str
    keys: tuple[str, ...]
    values: tuple[str, ...] = ()
    removed: str | None = "removed"
    final: bool = False

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns `write` takes and `newest` returns, in this order: keys, then values."""
        return (*self.keys, *self.values)

    def write(
        self,
        client: Client,
        rows: Sequence[Sequence[Any]],
        removed: int | Sequence[int] = 0,
        changed_at: datetime | None = None,
    ) -> None:
        """Add one row per change, each the values of `columns`, in one insert (none: nothing).

        `removed`: 1 to take the settings away, 0 to add or change them; one flag for every row,
        or one per row (a change that adds some keys and removes others at once). `changed_at`:
        a stamp of the caller's (channel rules stamp after their newest row), else the table's
        default, now."""
        if not rows:
            return
        flags = [removed] * len(rows) if isinstance(removed, int) else list(removed)
        if len(flags) != len(rows):
            raise ValueError(f"{self.name}: {len(rows)} rows, {len(flags)} removed flags")
        if self.removed is None and any(flags):
            raise ValueError(f"{self.name}: its settings are never removed")
        names = list(self.columns)
        table_rows = [list(row) for row in rows]
        for row in table_rows:
            if len(row) != len(names):
                raise ValueError(f"{self.name}: a row of {len(row)} values for columns {names}")
        if self.removed is not None:
            names.append(self.removed)
            for row, flag in zip(table_rows, flags, strict=True):
                row.append(flag)
        if changed_at is not None:
            names.append(CHANGED_AT)
            for row in table_rows:
                row.append(changed_at)
        client.insert(self.name, table_rows, column_names=names)

    def newest(
        self,
        client: Client,
        where: str = "",
        parameters: Mapping[str, Any] | None = None,
        order: Sequence[str] = (),
        having: str = "",
    ) -> list[tuple[Any, ...]]:
        """The settings as they stand: one row per key whose newest row is not a removal, each
        the values of `columns` as that row holds them.

        `where`: a condition on the stored rows, before the newest is taken (ClickHouse
        parameters in `parameters`); `having`: one on the newest values, each column written
        as `newest_of(column)`; `order`: column names, keys or values."""
        return list(client.query(self.newest_sql(where, order, having), parameters=parameters).result_rows)

    def newest_sql(self, where: str = "", order: Sequence[str] = (), having: str = "") -> str:
        conditions = [f"({where})"] if where else []
        if self.final:
            if self.removed is not None:
                conditions.append(f"{self.removed} = 0")
            if having:
                conditions.append(f"({having})")
            select = ", ".join(self.columns)
            sql = f"SELECT {select} FROM {self.name} FINAL"
            ordered = ", ".join(self._order_term(column) for column in order)
            return sql + _clause("WHERE", " AND ".join(conditions)) + _clause("ORDER BY", ordered)
        kept = [f"{self.newest_of(self.removed)} = 0"] if self.removed is not None else []
        kept += [f"({having})"] if having else []
        select = ", ".join([*self.keys, *(self.newest_of(column) for column in self.values)])
        return (
            f"SELECT {select} FROM {self.name}"
            + _clause("WHERE", " AND ".join(conditions))
            + f" GROUP BY {', '.join(self.keys)}"
            + _clause("HAVING", " AND ".join(kept))
            + _clause("ORDER BY", ", ".join(self._order_term(column) for column in order))
        )

    def newest_of(self, column: str) -> str:
        """The SQL of `column`'s value in its key's newest row (for `having`)."""
        return column if self.final else f"argMax({column}, {CHANGED_AT})"

    def _order_term(self, column: str) -> str:
        # A value column is ordered by its place in the select: its name alone is the stored
        # rows' column, which GROUP BY does not allow (and an alias of the same name would be
        # read inside argMax too).
        if column in self.keys or (self.final and column in self.values):
            return column
        if column in self.values:
            return str(self.columns.index(column) + 1)
        raise ValueError(f"{self.name}: no column {column!r} to order by")


def _clause(keyword: str, text: str) -> str:
    return f" {keyword} {text}" if text else ""
