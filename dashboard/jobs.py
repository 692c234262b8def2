"""The background-jobs process (`python -m dashboard.jobs`; `jobs` in `tally up` and in
docker-compose.yml): the dashboard's scheduled work, in one process of its own rather than in
threads of the web server (DESIGN.md), so that

- serving a page never shares its process with a pass over every saved funnel or a report's
  rendering, and the web server can run as several processes (or replicas) without each one
  sending every email report again;
- `tally status` shows whether the scheduled work is alive (its heartbeat), which a thread in
  the dashboard could not.

Its jobs: email reports that are due (every TALLY_REPORTS_INTERVAL_S, when an SMTP server is
set: dashboard/email_reports.py) and saved funnels' closed days (every
TALLY_FUNNEL_PRECOMPUTE_INTERVAL_S: storage/saved_funnels.precompute). One loop runs them in
turn; a failing run (the store or the SMTP server down) is logged and tried at its next time.
The archive audit is not here: it belongs to the archiver, which owns the offsets it checks.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from dashboard.email_reports import send_due
from storage.client import connect
from storage.query_limits import stats_limits
from storage.saved_funnels import precompute
from storage.schema import apply_migrations
from tally import heartbeat, structured_logging
from tally.settings import Settings

log = structlog.get_logger()

COMPONENT = "jobs"  # its heartbeat's name, as `tally status` checks it
# The longest the loop sleeps: the heartbeat stays fresh (tally.heartbeat.STALE_AFTER_S) between
# jobs that run every few minutes.
BEAT_EVERY_S = 15.0

Clock = Callable[[], datetime]


@dataclass(frozen=True)
class Job:
    name: str
    interval_s: float
    run: Callable[[datetime], object]  # one pass at this moment; what it returns is logged when truthy


def scheduled_jobs(settings: Settings) -> list[Job]:
    """The jobs this deployment runs: email reports only when an SMTP server is configured."""
    jobs = [Job("funnel_precompute", settings.funnel_precompute_interval_s, _funnel_days(settings))]
    if settings.smtp_host:
        jobs.append(Job("email_reports", settings.reports_interval_s, _email_reports(settings)))
    return jobs


def _funnel_days(settings: Settings) -> Callable[[datetime], object]:
    def run(now: datetime) -> object:
        return precompute(connect(settings), now)  # the number of funnel days computed

    return run


def _email_reports(settings: Settings) -> Callable[[datetime], object]:
    def run(now: datetime) -> object:
        return len(send_due(settings, connect(settings, query_settings=stats_limits(settings)), now))

    return run


def run_jobs(
    settings: Settings, jobs: list[Job], stop: threading.Event, clock: Clock = lambda: datetime.now(UTC)
) -> None:
    """Run each job at start and then every `interval_s`, until `stop`; beat between them."""
    next_run = {job.name: 0.0 for job in jobs}
    while not stop.is_set():
        heartbeat.beat(settings, COMPONENT)  # alive before a job runs: the first can take minutes
        for job in jobs:
            if time.monotonic() >= next_run[job.name]:
                _run_once(job, clock())
                next_run[job.name] = time.monotonic() + job.interval_s
        heartbeat.beat(settings, COMPONENT)
        soonest = min(next_run.values(), default=time.monotonic() + BEAT_EVERY_S)
        stop.wait(max(0.0, min(BEAT_EVERY_S, soonest - time.monotonic())))


def _run_once(job: Job, now: datetime) -> None:
    try:
        done = job.run(now)
    except Exception as error:  # the store or the SMTP server down: the job's next time tries again
        log.warning("job_failed", job=job.name, error=f"{type(error).__name__}: {str(error)[:300]}")
        return
    if done:
        log.info("job_done", job=job.name, done=done)


def main() -> None:
    structured_logging.configure()
    settings = Settings()
    apply_migrations(settings)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    jobs = scheduled_jobs(settings)
    log.info("jobs_started", jobs=[job.name for job in jobs])
    run_jobs(settings, jobs, stop)
    log.info("jobs_stopped")


if __name__ == "__main__":
    main()
