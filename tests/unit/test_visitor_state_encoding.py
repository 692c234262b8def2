"""The stream jobs' visitor state stays readable across the encoding change of issue 16.

A running deployment restores VisitorActivity's states from its checkpoint: those written
before the new dimensions (encoding v1) must decode with the new fields empty, not force a
checkpoint reset; so must those written before engaged sessions (v2, no engagement events).
The check is JVM code (stream_jobs/jvm/test/), compiled here with the
function's source against pyspark's jars and run on the JVM: no Spark session needed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyspark

JVM = Path(__file__).resolve().parents[2] / "stream_jobs" / "jvm"
SPARK_JARS = Path(pyspark.__file__).with_name("jars")


def test_v1_and_v2_visitor_states_decode_and_v3_round_trips_engagement_events(tmp_path: Path) -> None:
    sources = [
        *(JVM / "src" / "tally" / "stream").glob("*.java"),
        JVM / "test/tally/stream/VisitorStateEncodingCheck.java",
    ]
    classpath = f"{SPARK_JARS}/*"
    subprocess.run(
        [
            "javac",
            "--release",
            "17",
            "-Xlint:-options",
            "-d",
            str(tmp_path),
            "-cp",
            classpath,
            *map(str, sources),
        ],
        check=True,
    )
    run = subprocess.run(
        ["java", "-cp", f"{tmp_path}:{classpath}", "tally.stream.VisitorStateEncodingCheck"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ok"
