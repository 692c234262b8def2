"""Definitions versions as the stream jobs' tables hold them: where a version is built (its side
tables and checkpoints), and swapping one in or dropping it. Used by `tally whatif`
(ops/local/whatif.py, which stops and starts the live stream jobs around a swap) and by the
stream jobs themselves for the dashboard's requests (definition_requests.py).
"""

from __future__ import annotations

from clickhouse_connect.driver.client import Client

from storage import definitions
from storage.definitions import DefinitionsError, Version, side_suffix
from storage.queries.whatif import side_tables_exist
from stream_jobs.context import StreamContext
from stream_jobs.replay import discard, exchange
from tally.settings import Settings


def side_context(settings: Settings, version: Version) -> StreamContext:
    """Where version `version` is built: its side tables and checkpoints, its definitions."""
    return StreamContext.side(definitions.applied(settings, version.definitions), side_suffix(version.number))


def check_swap(settings: Settings, client: Client, number: int) -> tuple[Version, Version]:
    """(current, target) if version `number` can be swapped in; DefinitionsError saying why not."""
    current = definitions.current(client, settings)
    if number == current.number:
        raise DefinitionsError(f"version {number} is already current")
    target = definitions.get(client, number)
    if not side_tables_exist(client, number):
        raise DefinitionsError(f"version {number} has no side tables (discarded, or never built)")
    if not side_context(settings, target).checkpoints_dir.exists():
        raise DefinitionsError(
            f"version {number} was built from the archive: it has no log checkpoints for the stream "
            "jobs to continue from, so it is for comparing only"
        )
    return current, target


def swap_version(
    settings: Settings, client: Client, number: int, reason: str, restore_rules: bool = False
) -> tuple[Version, Version]:
    """Make version `number` current: its side tables and checkpoints become the live ones, the
    current version's become its side ones. The live queries must be stopped. Returns
    (replaced, now current).

    Rules (goals, exclusions): a rollback (`restore_rules`) rewrites them to the version's; a
    swap keeps the rules in force, so if they changed since the version was proposed, one more
    version records them with its definitions (a rollback of it still undoes the whole swap)."""
    current, target = check_swap(settings, client, number)
    exchange(settings, side_context(settings, target), side_context(settings, current))
    definitions.switch_to(client, number, reason)
    if restore_rules:
        definitions.restore_rules(client, target.definitions)
    else:
        note = f"version {number}'s definitions with the rules in force"
        definitions.record_rules(client, note, reason, previous=current.number)
    return current, target


def discard_version(settings: Settings, client: Client, number: int) -> None:
    """Drop version `number`'s side tables and checkpoints (never the current version's)."""
    if number == definitions.current(client, settings).number:
        raise DefinitionsError(f"version {number} is current: its tables are the live ones")
    discard(settings, side_context(settings, definitions.get(client, number)))
