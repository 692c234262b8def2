"""The stream jobs' visitor state stays readable across encoding changes, and engaged sessions
follow the bounce rule, checked in the JVM without a Spark session.

A running deployment restores VisitorActivity's states from its checkpoint: those written
before the new dimensions (encoding v1) must decode with the new fields empty, not force a
checkpoint reset; so must those written before engaged sessions (v2, no engagement events).
The checks are JVM code (stream_jobs/jvm/test/), compiled here once with the function's source
against pyspark's jars and run on the JVM.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyspark
import pytest

JVM = Path(__file__).resolve().parents[2] / "stream_jobs" / "jvm"
SPARK_JARS = Path(pyspark.__file__).with_name("jars")
CLASSPATH = f"{SPARK_JARS}/*"


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The function and the checks, compiled."""
    into = tmp_path_factory.mktemp("jvm-classes")
    sources = [
        *(JVM / "src" / "tally" / "stream").glob("*.java"),
        *(JVM / "test/tally/stream").glob("*.java"),
    ]
    javac = ["javac", "--release", "17", "-Xlint:-options", "-d", str(into), "-cp", CLASSPATH]
    subprocess.run([*javac, *map(str, sources)], check=True)
    return into


def run_check(classes: Path, name: str) -> None:
    run = subprocess.run(
        ["java", "-cp", f"{classes}:{CLASSPATH}", f"tally.stream.{name}"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ok"


def test_v1_and_v2_visitor_states_decode_and_v3_round_trips_engagement_events(classes: Path) -> None:
    run_check(classes, "VisitorStateEncodingCheck")


def test_engagement_events_end_a_bounce_only_within_their_sessions_span(classes: Path) -> None:
    run_check(classes, "EngagedSessionsCheck")


def test_page_views_within_the_allowed_lateness_count_exactly_and_the_state_stays_a_few_days(
    classes: Path,
) -> None:
    run_check(classes, "AllowedLatenessCheck")
