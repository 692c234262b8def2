"""Which rows of a batch are copies of a re-sent event (archiver/copies.py,
split_copies), given what the archive's index holds: the rule itself, pinned row by row.
tests/integration/test_archive_resent_copies.py runs it on the real archiver and store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

from archiver.copies import Seen, split_copies
from archiver.rows import ArchiveRow

WINDOW_S = 7 * 24 * 3600
AT = datetime(2026, 11, 20, 12, tzinfo=UTC)
EVENT = UUID("00000000-0000-4000-8000-000000000001")


def row(
    partition: int, offset: int, site: str = "a.example", event_id: UUID = EVENT, after_s: float = 0
) -> ArchiveRow:
    return ArchiveRow(b"{}", partition, offset, site, event_id, AT + timedelta(seconds=after_s))


def ms(after_s: float = 0) -> int:
    return int((AT + timedelta(seconds=after_s)).timestamp() * 1000)


def positions(rows: list[ArchiveRow]) -> list[tuple[int, int]]:
    return [r.position for r in rows]


def test_events_sent_once_are_all_kept() -> None:
    rows = [row(0, 1, event_id=uuid4()), row(1, 1, event_id=uuid4()), row(0, 2, event_id=uuid4())]
    assert split_copies(rows, {}, WINDOW_S) == (rows, [])


def test_within_a_batch_the_lowest_partition_then_offset_is_kept() -> None:
    rows = [row(2, 3), row(0, 9, after_s=5), row(0, 7, after_s=9)]
    kept, copies = split_copies(rows, {}, WINDOW_S)
    assert positions(kept) == [(0, 7)]
    assert [(c.row.position, (c.first.partition, c.first.offset)) for c in copies] == [
        ((0, 9), (0, 7)),
        ((2, 3), (0, 7)),
    ]


def test_a_copy_of_an_archived_event_is_dropped_and_points_at_it() -> None:
    archived = {("a.example", EVENT): [Seen(1, 40, ms())]}
    kept, copies = split_copies([row(0, 5, after_s=60)], archived, WINDOW_S)
    assert kept == [] and [(c.row.position, c.first) for c in copies] == [((0, 5), Seen(1, 40, ms()))]


def test_the_archived_row_itself_read_again_is_no_copy() -> None:
    # An audit repairing a hole, or a batch retried after a crash between the index and the rows.
    archived = {("a.example", EVENT): [Seen(0, 5, ms())]}
    rows = [row(0, 5), row(0, 6, after_s=1)]
    kept, copies = split_copies(rows, archived, WINDOW_S)
    assert positions(kept) == [(0, 5)]
    assert [(c.row.position, c.first.offset) for c in copies] == [((0, 6), 5)]


def test_the_same_id_on_another_site_is_another_event() -> None:
    archived = {("a.example", EVENT): [Seen(0, 5, ms())]}
    rows = [row(1, 9, site="b.example"), row(2, 9, site="c.example")]
    assert split_copies(rows, archived, WINDOW_S) == (rows, [])


def test_a_copy_received_after_the_window_is_archived_again() -> None:
    archived = {("a.example", EVENT): [Seen(0, 5, ms())]}
    late = row(0, 99, after_s=WINDOW_S + 1)
    just_in_time = row(1, 7, event_id=EVENT, after_s=WINDOW_S)
    kept, copies = split_copies([late], archived, WINDOW_S)
    assert kept == [late] and copies == []
    kept, copies = split_copies([just_in_time], archived, WINDOW_S)
    assert kept == [] and len(copies) == 1
