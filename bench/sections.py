"""The sections of `tally bench`, their order and what `--events N` sizes in each.

Imports nothing heavy: the CLI reads these names to build `--only`'s choices at import time.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    name: str
    title: str
    # What `--events N` sets in this section, or None when the section has no event count.
    events_mean: str | None
    default_events: int | None
    # Whether it measures the stack `tally bench` runs in $TALLY_HOME (started if need be);
    # the cluster section starts stacks of its own instead.
    needs_stack: bool = True


# In run order, which matters on two cores: latencies first, on a stack with no backlog; then
# the throughput sections, whose bursts leave the stream jobs events to catch up on.
SECTIONS: tuple[Section, ...] = (
    Section("latency", "event-to-visible latency", "page views sent at 1,000/s", 30_000),
    Section("alerts", "alert latency (event accepted -> Kafka alerts -> webhook)", "alerts fired", 10),
    Section("dashboard", "dashboard query latency", "synthetic archive events", 10_000_000),
    Section("collector", "collector vs bare ASGI ceiling", None, None),
    Section("archiver", "archiver throughput", "backlog events archived", 200_000),
    Section("stream", "spark sustained throughput", "backlog events read by Spark", 200_000),
    # Bytes, not speed: the stack's store holds a scratch copy of `events` for a moment.
    Section("storage", "bytes per page view in the log and the archive", "realistic page views", 200_000),
    # Last: it starts a single node and a cluster of its own, one after the other.
    Section(
        "cluster",
        "single node vs cluster mode, same offered load",
        "page views offered to each mode at 600/s",
        12_000,
        needs_stack=False,
    ),
)
SECTION_NAMES: tuple[str, ...] = tuple(section.name for section in SECTIONS)


def selected(only: str | None) -> tuple[Section, ...]:
    """Every section in run order, or just the one named by `--only`."""
    if only is None:
        return SECTIONS
    if only not in SECTION_NAMES:
        raise ValueError(f"no bench section {only!r}; one of {', '.join(SECTION_NAMES)}")
    return tuple(section for section in SECTIONS if section.name == only)


def events_help() -> str:
    """`--events`'s help, generated from the table so that it cannot drift from it."""
    sized = "; ".join(
        f"{s.name}: {s.events_mean} (default {s.default_events:,})" for s in SECTIONS if s.events_mean
    )
    unsized = ", ".join(s.name for s in SECTIONS if not s.events_mean)
    return f"Size of each section that takes one — {sized}. Ignored by {unsized} (wrk runs for a fixed time)."
