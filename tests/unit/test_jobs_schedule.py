"""The background-jobs process's loop (dashboard/jobs.py): each job at start and then at its
interval, a failing job tried again at its next time without stopping the others, a heartbeat
between them, and email reports scheduled only where an SMTP server is set."""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path

from dashboard.jobs import Job, run_jobs, scheduled_jobs
from tally.heartbeat import is_fresh
from tally.settings import Settings


def test_a_failing_job_is_tried_again_and_the_others_keep_running(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    stop = threading.Event()
    runs = {"failing": 0, "counting": 0}

    def failing(_: datetime) -> object:
        runs["failing"] += 1
        raise ConnectionError("the store is down")

    def counting(_: datetime) -> object:
        runs["counting"] += 1
        if runs["counting"] == 3:
            stop.set()
        return runs["counting"]

    jobs = [Job("failing", 0.01, failing), Job("counting", 0.01, counting)]
    loop = threading.Thread(target=run_jobs, args=(settings, jobs, stop))
    loop.start()
    loop.join(timeout=30)
    assert not loop.is_alive()
    assert runs["counting"] == 3 and runs["failing"] >= 2
    assert is_fresh(settings, "jobs")


def test_email_reports_are_scheduled_only_with_an_smtp_server(tmp_path: Path) -> None:
    without = [job.name for job in scheduled_jobs(Settings(home=tmp_path))]
    with_smtp = [job.name for job in scheduled_jobs(Settings(home=tmp_path, smtp_host="mail.example.com"))]
    assert without == ["funnel_precompute"]
    assert with_smtp == ["funnel_precompute", "email_reports"]
