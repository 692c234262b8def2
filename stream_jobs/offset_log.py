"""What a streaming query's checkpoint says about one micro-batch: its watermarks.

Spark writes `<checkpoint>/offsets/<batch_id>` before it runs a batch (the "v1" offset log:
a version line, a JSON line of batch metadata with `batchWatermarkMs`, then one line per
source with that source's end offsets).

Two watermarks matter for batch N (Spark's WatermarkPropagator, multiple stateful operators
allowed, the default since 3.4):
* rows of batch N are dropped as late against the watermark of batch N-1;
* state is evicted, and windows become final, against the watermark of batch N.
So after batch N is written, a window ending at or before watermark(N) is closed.

The sinks read this on the driver, which is the process that wrote it; the checkpoint is a
local (or locally mounted) directory under TALLY_HOME.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path


def read_end_offsets(checkpoint: Path, batch_id: int) -> dict[str, dict[int, int]]:
    """Per topic and partition, the end offset (exclusive) of `batch_id`'s read, as the offset
    log's source lines record it (one JSON object per source, `{"topic": {"0": 42, ...}}`);
    empty if there is no entry or no Kafka source."""
    path = checkpoint / "offsets" / str(batch_id)
    if batch_id < 0 or not path.exists():
        return {}
    offsets: dict[str, dict[int, int]] = {}
    for line in path.read_text().splitlines()[2:]:
        source = json.loads(line) if line.strip().startswith("{") else None
        for topic, partitions in (source or {}).items():
            if isinstance(partitions, dict):
                offsets[topic] = {int(p): int(end) for p, end in partitions.items()}
    return offsets


def read_watermark(checkpoint: Path, batch_id: int) -> int | None:
    """The watermark the offset log records for `batch_id`, or None if there is no entry
    (before batch 0)."""
    path = checkpoint / "offsets" / str(batch_id)
    if batch_id < 0 or not path.exists():
        return None
    lines = path.read_text().splitlines()
    if not lines or lines[0] != "v1":
        raise ValueError(f"{path}: unknown offset log version {lines[:1]}")
    return int(json.loads(lines[1]).get("batchWatermarkMs", 0))


@dataclass(frozen=True)
class BatchProgress:
    """The watermarks of one micro-batch, as its checkpoint records them."""

    batch_id: int
    late_watermark_ms: int  # events behind this were dropped in this batch
    watermark_ms: int  # windows ending at or before this are closed once the batch is written

    def shifted(self, shift_ms: int) -> BatchProgress:
        """With the query's own watermarks, when Spark's lag by `shift_ms` (activity.py);
        0 stays 0: no event has moved the watermark yet."""

        def shift(watermark_ms: int) -> int:
            return watermark_ms + shift_ms if watermark_ms > 0 else 0

        return replace(
            self, late_watermark_ms=shift(self.late_watermark_ms), watermark_ms=shift(self.watermark_ms)
        )


def batch_progress(checkpoint: Path, batch_id: int) -> BatchProgress:
    current = read_watermark(checkpoint, batch_id)
    if current is None:
        raise FileNotFoundError(f"no offset log entry for batch {batch_id} in {checkpoint}")
    previous = read_watermark(checkpoint, batch_id - 1)
    return BatchProgress(batch_id=batch_id, late_watermark_ms=previous or 0, watermark_ms=current)
