"""`tally whatif` on the local stack: record a proposed definitions version, rebuild the
derived tables with it into side tables, compare, and swap it in, roll it back or discard it.

The rebuild is `tally replay`'s (stream_jobs/replay.py, into `<table>_v<N>` from checkpoints
`checkpoints_v<N>` instead of `_replay`); it runs beside the live stream jobs, which keep
writing the live tables meanwhile. A swap stops the live stream jobs (as a replay does),
exchanges every derived table with the version's side table and its checkpoints with the live
ones, keeping the replaced version's as its own side tables, records the switch, and starts
the stream jobs again: they read the current version at start (stream_jobs/app.py) and resume
from the swapped-in checkpoints. A rollback is the same swap back: the previous version's
tables resume from the offsets they were left at and catch up on the log, and its rules
(goals, exclusions) are restored; a version that differs only in rules (an edit) shares the
live tables, so rolling back to it exchanges nothing and stops nothing.

Beyond the log's retention the build splits history as `tally replay` does
(storage/expired_history.py): the days before the first day the log holds whole are built from
the archive with SQL (storage/rollup_backfill.py), the rest replayed from the log, so the
version is whole and can be swapped in. `--from-archive` builds only the range's days, every one
from ClickHouse `events`: quicker for a comparison, but such a version has no log checkpoints,
so it is for comparing only and cannot be swapped in. (The archive holds what was accepted and
archived; the log also holds what the stream jobs saw and when: events behind the watermark are
counted as late by the stream jobs and not in the rollups, while the archive's rebuild counts
them.)
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta

from clickhouse_connect.driver.client import Client
from pyspark.sql import SparkSession

from ops.local.replay import SPARK_COMPONENT, stop_live_stream_jobs
from ops.local.supervisor import rpc
from storage import definitions
from storage.client import connect
from storage.definitions import DefinitionsError, Version, side_suffix
from storage.expired_history import expired_history
from storage.queries import sites as archived_sites
from storage.rollup_backfill import backfill_rollups
from storage.schema import apply_migrations
from stream_jobs import versions
from stream_jobs.context import StreamContext
from stream_jobs.replay import beginning_offsets, prepare, rebuild_with_history
from stream_jobs.versions import check_swap, side_context, swap_version
from tally.settings import Settings

Progress = Callable[[str], None]


def propose(settings: Settings, changes: dict[str, int], note: str) -> tuple[Version, Version]:
    """Record the proposed version; returns (current, proposed)."""
    apply_migrations(settings)
    client = connect(settings)
    current = definitions.current(client, settings)
    return current, definitions.propose(client, settings, changes, note)


def build(
    settings: Settings,
    proposed: Version,
    start: datetime,
    end: datetime,
    progress: Progress,
    from_archive: bool = False,
    spark: SparkSession | None = None,
) -> None:
    """Build the proposed version's side tables: from the log (and from the archive for the days
    the log has expired), or from the archive alone for the range's days (`from_archive`).
    Spark: `spark` if given (left running), else a session of its own."""
    client = connect(settings)
    context = side_context(settings, proposed)
    if from_archive:
        progress(f"whatif: building version {proposed.number} from the archive (events), {start:%Y-%m-%d} on")
        build_from_archive(client, context, start, end)
        return
    # Where the log has expired its beginning, the days before the first it holds whole come
    # from the archive, as in a replay (storage/expired_history.py): the version stays whole, so
    # it can be swapped in. `--from-archive` builds only the range's days, for comparing.
    history = expired_history(client, beginning_offsets(settings))
    if history is not None:
        progress(
            f"whatif: the log has expired {history.expired_events} archived events: the days before "
            f"{history.cut} ({history.days} site-days) come from the archive, the log from then on"
        )
    progress(f"whatif: replaying the log into side tables {side_suffix(proposed.number)} (Spark)")
    if spark is not None:
        summary = rebuild_with_history(spark, context.settings, history, context=context)
    else:
        from stream_jobs.session import build_spark_session

        own = build_spark_session(settings, app_name="tally-whatif")
        try:
            summary = rebuild_with_history(own, context.settings, history, context=context)
        finally:
            own.stop()
    progress(f"whatif: {summary.events} events replayed with version {proposed.number}")


def build_from_archive(client: Client, context: StreamContext, start: datetime, end: datetime) -> None:
    """Side tables from the archive's events of the range's UTC days, every site's."""
    prepare(context.settings, context)
    first, last = start.astimezone(UTC).date(), (end.astimezone(UTC) - timedelta(milliseconds=1)).date()
    for site in archived_sites(client):
        backfill_rollups(
            client, site, first, last + timedelta(days=1), table_suffix=context.table_suffix,
            session_gap_s=context.settings.session_gap_s,
            engaged_bounce_ms=context.settings.engaged_bounce_ms,
        )  # fmt: skip
    # prepare() left no checkpoints: swap_to refuses a version without them.


def swap_to(
    settings: Settings, number: int, progress: Progress, reason: str = "swap", restore_rules: bool = False
) -> int:
    """Make version `number` current (its side tables become the live ones); returns the
    version it replaced, whose tables become its side tables."""
    client = connect(settings)
    check_swap(settings, client, number)  # refused before anything stops
    restart = stop_live_stream_jobs(settings, progress)
    replaced, _ = swap_version(settings, client, number, reason, restore_rules=restore_rules)
    kept = side_suffix(replaced.number)
    progress(f"whatif: version {number} is current; version {replaced.number}'s tables kept as {kept}")
    if restart:
        rpc(settings).supervisor.startProcess(SPARK_COMPONENT, True)
        progress(f"whatif: stream jobs started again with version {number}'s definitions")
    return replaced.number


def rollback(settings: Settings, progress: Progress) -> int:
    """Go back to the version the last switch replaced; returns it. Its rules (goals,
    exclusions) are restored; the derived tables are exchanged only if its replayed
    definitions differ from the current ones (a rules-only version shares the live tables)."""
    client = connect(settings)
    previous = definitions.previous_number(client)
    current, target = definitions.current(client, settings), definitions.get(client, previous)
    if target.definitions.replayed() != current.definitions.replayed():
        swap_to(settings, previous, progress, reason="rollback", restore_rules=True)
        unrecorded = target.definitions.unrecorded()
    else:
        definitions.switch_to(client, previous, "rollback")
        unrecorded = definitions.restore_rules(client, target.definitions)
        progress(f"whatif: version {previous} has the same replayed definitions: no table exchanged")
    if unrecorded:
        progress(
            f"whatif: version {previous}'s rules were not recorded ({', '.join(unrecorded)}): "
            "they stay as they are"
        )
    return previous


def discard_version(settings: Settings, number: int) -> None:
    """Drop version `number`'s side tables and checkpoints (never the current version's)."""
    versions.discard_version(settings, connect(settings), number)


def range_or_default(start: date | None, end: date | None, today: date) -> tuple[datetime, datetime]:
    """[start, end] as whole UTC days, both included; by default the last 7 days and today."""
    last = end or today
    first = start or last - timedelta(days=7)
    if first > last:
        raise DefinitionsError("--from must not be after --to")
    return datetime.combine(first, time(), UTC), datetime.combine(last + timedelta(days=1), time(), UTC)
