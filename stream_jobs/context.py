"""Where a set of streaming queries keeps its checkpoints and writes its tables.

The live application (`python -m stream_jobs.app`) and a replay (`tally replay`) run the
same queries; only this differs: a replay writes `<table>_replay` from fresh checkpoints
with Trigger.AvailableNow (read the log up to its end as it is now, then stop). A what-if
(`tally whatif`) is a replay with other definitions into `<table>_v<N>`, version N's side
tables, from checkpoints of its own (`checkpoints_v<N>`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from tally.settings import Settings

REPLAY_SUFFIX = "_replay"


@dataclass(frozen=True)
class StreamContext:
    settings: Settings
    checkpoints_dir: Path
    table_suffix: str = ""
    available_now: bool = False
    # A rebuild over a log that has expired its beginning reads only the events from this time
    # on; the days before it come from the archive (storage/expired_history.py).
    events_from: datetime | None = None

    @classmethod
    def live(cls, settings: Settings) -> StreamContext:
        return cls(settings, settings.checkpoints_dir)

    @classmethod
    def replay(cls, settings: Settings, events_from: datetime | None = None) -> StreamContext:
        return cls(
            settings, settings.home_dir / "checkpoints-replay", REPLAY_SUFFIX, available_now=True,
            events_from=events_from,
        )  # fmt: skip

    @classmethod
    def side(cls, settings: Settings, suffix: str) -> StreamContext:
        """A replay into `<table><suffix>` with its own checkpoints, run with `settings`'
        definitions (a what-if's proposed version)."""
        return cls(settings, settings.home_dir / f"checkpoints{suffix}", suffix, available_now=True)

    def table(self, name: str) -> str:
        return name + self.table_suffix

    def query_name(self, name: str) -> str:
        """Spark's name for the query: unique among the active queries of one session."""
        return name + self.table_suffix

    def checkpoint(self, name: str) -> Path:
        return self.checkpoints_dir / name

    def start(self, writer: DataStreamWriter, name: str) -> StreamingQuery:
        writer = writer.queryName(self.query_name(name)).option(
            "checkpointLocation", str(self.checkpoint(name))
        )
        if self.available_now:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{self.settings.spark_trigger_s} seconds")
        return writer.start()
