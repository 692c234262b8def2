"""Versioned ClickHouse schema: one SQL file per change under storage/migrations/.

Applied in file-name order at start (`tally up`, `tally init`, the archiver), each exactly
once, recorded in `schema_migrations`. Files hold `;`-separated statements and name tables
unqualified: they run in the configured database.
"""

from __future__ import annotations

from pathlib import Path

from storage.client import connect
from tally.settings import Settings

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def migration_files() -> list[Path]:
    return sorted(MIGRATIONS_DIR.glob("*.sql"))


def statements(sql: str) -> list[str]:
    """Split a migration into statements, dropping `--` comment lines."""
    lines = [line for line in sql.splitlines() if not line.lstrip().startswith("--")]
    return [part.strip() for part in "\n".join(lines).split(";") if part.strip()]


def apply_migrations(settings: Settings) -> list[str]:
    """Create the database and apply pending migrations; returns the versions applied now."""
    database = settings.clickhouse_database
    connect(settings, with_database=False).command(f"CREATE DATABASE IF NOT EXISTS {database}")
    client = connect(settings)
    client.command(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(version String, applied_at DateTime DEFAULT now()) ENGINE = MergeTree ORDER BY version"
    )
    done = {row[0] for row in client.query("SELECT version FROM schema_migrations").result_rows}
    applied = []
    for path in migration_files():
        if path.stem in done:
            continue
        for statement in statements(path.read_text()):
            client.command(statement)
        client.insert("schema_migrations", [[path.stem]], column_names=["version"])
        applied.append(path.stem)
    return applied
