"""The events behind a figure are read in parts of whole UTC days (storage/export.py): the parts
cover the figure's range exactly, whatever zone its edges are in, a busy day is a part of its
own, quiet days share one, and nothing but `ts` is narrowed."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from itertools import pairwise

import pytest

from storage.export import SLICE_ROWS, FigureEvents, figure_slices


def parts(
    start: datetime, end: datetime, days: tuple[tuple[date, int], ...]
) -> list[tuple[datetime, datetime]]:
    found = FigureEvents(
        "pageviews", "FROM events WHERE site = 'a'", {"start": start, "end": end}, 0, 0, days
    )
    return [(parameters["slice_start"], parameters["slice_end"]) for _, parameters in figure_slices(found)]


@pytest.mark.parametrize("hours", [-11, 0, 5, 14])
def test_the_parts_cover_the_range_once_in_any_zone(hours: int) -> None:
    zone = timezone(timedelta(hours=hours))
    start, end = datetime(2026, 11, 2, tzinfo=zone), datetime(2026, 11, 9, 23, 59, tzinfo=zone)
    first = start.astimezone(UTC).date()
    busy = tuple((first + timedelta(days=n), SLICE_ROWS) for n in range(8))
    found = parts(start, end, busy)
    assert found[0][0] == start and found[-1][1] == end
    assert all(earlier[1] == later[0] for earlier, later in pairwise(found))
    assert all(low < high for low, high in found)
    assert all(low.astimezone(UTC).time() == datetime.min.time() for low, _ in found[1:])
    assert len(found) == 8  # a day of SLICE_ROWS rows each: a part each


def test_quiet_days_share_a_part_and_an_empty_range_is_one() -> None:
    start, end = datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC)
    quiet = tuple((date(2026, 11, day), 1000) for day in range(1, 31))
    assert parts(start, end, quiet) == [(start, end)]
    assert parts(start, end, ()) == [(start, end)]


def test_each_part_keeps_the_figures_own_conditions() -> None:
    start = datetime(2026, 11, 2, 12, tzinfo=UTC)
    found = FigureEvents("pageviews", "FROM events WHERE name = 'pageview'", {"start": start,
                         "end": start + timedelta(hours=1), "site": "a"}, 0, 0)  # fmt: skip
    [(sql, parameters)] = list(figure_slices(found))
    assert sql.startswith(found.select_sql) and "ts >= {slice_start:" in sql
    assert parameters["start"] == start and parameters["site"] == "a"
