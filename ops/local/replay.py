"""`tally replay` on the local stack: stop the live stream jobs, rebuild, swap, start them again.

The rebuild and the swap are the stream jobs' own (stream_jobs/replay.py, where the steps and
their guarantees are described); stopping and starting the `spark` component through
supervisord is the operator's part, so it lives here and the stream jobs never reach into
the local stack.
"""

from __future__ import annotations

import xmlrpc.client
from collections.abc import Callable
from datetime import date

from ops.local.supervisor import rpc, supervisor_running
from storage import definitions
from storage.client import connect
from storage.expired_history import ExpiredHistory, expired_history
from storage.schema import apply_migrations
from storage.tables import DERIVED_TABLES
from stream_jobs.replay import ReplayError, ReplaySummary, beginning_offsets, rebuild_with_history, swap
from tally import heartbeat
from tally.settings import Settings

__all__ = ["ReplayError", "run_replay"]

SPARK_COMPONENT = "spark"


def run_replay(
    settings: Settings,
    progress: Callable[[str], None],
    force: bool = False,
    history_progress: Callable[[ExpiredHistory], Callable[[str, date], None]] | None = None,
) -> ReplaySummary:
    """`tally replay`: stop the live stream jobs, rebuild, swap, start them again. Where the log
    has expired its beginning, the days before the first it holds whole come from the archive;
    `history_progress(history)` gives the callback told of each (site, day) rebuilt from it."""
    client = connect(settings)  # a store that does not answer is said first, in one line
    beginnings = beginning_offsets(settings)
    history = expired_history(client, beginnings)
    expired = {p: offset for p, offset in beginnings.items() if offset > 0}
    if expired and history is None and not force:
        raise ReplayError(
            f"the log no longer starts at offset 0 (partition → first offset: {expired}) and the archive "
            "holds none of the expired events: their derived rows cannot be rebuilt and the swap would "
            "drop them; --force to go on"
        )
    restart = stop_live_stream_jobs(settings, progress)
    from stream_jobs.session import build_spark_session

    # Once the live stream jobs are stopped: a migration may change the tables they write.
    applied = apply_migrations(settings)
    progress(f"replay: migrations applied: {', '.join(applied) if applied else 'none'}")

    # A replay rebuilds with the current definitions version, as the live stream jobs run.
    settings = definitions.applied(settings, definitions.current(client, settings).definitions)
    if history is not None:
        progress(
            f"replay: the log has expired {history.expired_events} archived events: the days before "
            f"{history.cut} ({history.days} site-days) are rebuilt from the archive, the log from then on"
        )
    progress("replay: starting Spark")
    spark = build_spark_session(settings, app_name="tally-replay")
    try:
        progress("replay: recomputing every derived table into <table>_replay")
        on_day = history_progress(history) if history is not None and history_progress else None
        summary = rebuild_with_history(spark, settings, history, on_day)
    finally:
        spark.stop()
    progress(f"replay: {summary.events} events from the log, micro-batches per query {summary.batches}")
    swap(settings)
    progress(f"replay: swapped in {', '.join(DERIVED_TABLES)}; checkpoints replaced")
    if restart:
        rpc(settings).supervisor.startProcess(SPARK_COMPONENT, True)
        progress("replay: stream jobs started again")
    else:
        progress("replay: done; the stream jobs were not running (start them with `tally up`)")
    return summary


def stop_live_stream_jobs(settings: Settings, progress: Callable[[str], None]) -> bool:
    """Stop the `spark` component under the local stack; True if it was running."""
    if supervisor_running(settings):
        state = rpc(settings).supervisor.getProcessInfo(SPARK_COMPONENT)["statename"]
        if state in ("RUNNING", "STARTING", "BACKOFF"):
            progress("replay: stopping the stream jobs (spark) for the swap")
            try:
                rpc(settings).supervisor.stopProcess(SPARK_COMPONENT, True)
            except xmlrpc.client.Fault as fault:
                if "NOT_RUNNING" not in fault.faultString:
                    raise
            return True
        return False
    if heartbeat.is_fresh(settings, SPARK_COMPONENT):
        raise ReplayError(
            "stream jobs are running outside `tally up` (fresh spark heartbeat): stop them first, "
            "a live run must not write while its tables are swapped"
        )
    return False
