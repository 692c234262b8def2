"""The stream jobs' progress a stats answer's provenance publishes: the end offsets of a
micro-batch as Spark's offset log records them (stream_jobs/offset_log.py)."""

from __future__ import annotations

from pathlib import Path

from stream_jobs.offset_log import read_end_offsets

# A Spark 4 offset log entry: the version, the batch's metadata, one line per source.
ENTRY = """v1
{"batchWatermarkMs":1700000000000,"batchTimestampMs":1700000005000,"conf":{"spark.sql.shuffle.partitions":"2"}}
{"pageviews-a1":{"2":10,"1":5,"0":7}}"""


def test_end_offsets_per_topic_and_partition(tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "3").write_text(ENTRY)
    assert read_end_offsets(tmp_path, 3) == {"pageviews-a1": {0: 7, 1: 5, 2: 10}}


def test_no_entry_no_offsets(tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    assert read_end_offsets(tmp_path, 0) == {}
    assert read_end_offsets(tmp_path, -1) == {}
