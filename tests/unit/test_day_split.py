"""How agg cuts a range into whole UTC days and edge minutes (storage/queries/agg.py: day_split)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from storage.queries.agg import day_split

DAY = datetime(2026, 11, 14, tzinfo=UTC)
H, M = timedelta(hours=1), timedelta(minutes=1)


def test_whole_days_have_no_edges() -> None:
    split = day_split(DAY, DAY + timedelta(days=3))
    assert (split.first_day, split.end_day) == (date(2026, 11, 14), date(2026, 11, 17))
    assert [start == end for start, end in split.edges] == [True, True]


def test_mid_day_ends_are_edge_minutes_around_the_whole_days() -> None:
    split = day_split(DAY + 7 * H + 13 * M, DAY + timedelta(days=3) + 16 * H)
    assert (split.first_day, split.end_day) == (date(2026, 11, 15), date(2026, 11, 17))
    assert split.edges == (
        (DAY + 7 * H + 13 * M, DAY + timedelta(days=1)),
        (DAY + timedelta(days=3), DAY + timedelta(days=3) + 16 * H),
    )


def test_a_range_across_one_midnight_without_a_whole_day_is_all_minutes() -> None:
    split = day_split(DAY + 23 * H + 59 * M, DAY + timedelta(days=1) + M)
    assert split.first_day >= split.end_day  # no whole day
    assert split.edges[0] == (DAY + 23 * H + 59 * M, DAY + timedelta(days=1) + M)
    assert split.edges[1][0] == split.edges[1][1]


def test_bounds_count_the_minutes_starting_in_the_range() -> None:
    """agg's minute resolution: a minute counts when its start is in [start, end)."""
    split = day_split(DAY - timedelta(seconds=30), DAY + timedelta(days=1, seconds=1))
    assert (split.first_day, split.end_day) == (date(2026, 11, 14), date(2026, 11, 15))
    assert split.edges == ((DAY, DAY), (DAY + timedelta(days=1), DAY + timedelta(days=1) + M))


def test_an_empty_range_reads_nothing() -> None:
    split = day_split(DAY + timedelta(seconds=10), DAY + timedelta(seconds=50))
    assert split.first_day >= split.end_day
    assert all(start == end for start, end in split.edges)
