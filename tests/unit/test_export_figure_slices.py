"""The events behind a figure are read one UTC day at a time (storage/export.py): the days cover
the figure's range exactly, whatever zone its edges are in, and narrow nothing but `ts`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from itertools import pairwise

import pytest

from storage.export import FigureEvents, figure_slices


@pytest.mark.parametrize("hours", [-11, 0, 5, 14])
def test_the_days_cover_the_range_once_in_any_zone(hours: int) -> None:
    zone = timezone(timedelta(hours=hours))
    start, end = datetime(2026, 11, 2, tzinfo=zone), datetime(2026, 11, 4, 23, 59, tzinfo=zone)
    found = FigureEvents("pageviews", "FROM events WHERE site = 'a'", {"start": start, "end": end}, 0, 0)
    days = [(parameters["slice_start"], parameters["slice_end"]) for _, parameters in figure_slices(found)]
    assert days[0][0] == start and days[-1][1] == end
    assert all(earlier[1] == later[0] for earlier, later in pairwise(days))
    assert all(start < end for start, end in days)
    inner_edges = [edge for edge, _ in days[1:]]
    assert all(edge.astimezone(UTC).time() == datetime.min.time() for edge in inner_edges)


def test_each_day_keeps_the_figures_own_conditions() -> None:
    start = datetime(2026, 11, 2, 12, tzinfo=UTC)
    found = FigureEvents("pageviews", "FROM events WHERE name = 'pageview'", {"start": start,
                         "end": start + timedelta(hours=1), "site": "a"}, 0, 0)  # fmt: skip
    [(sql, parameters)] = list(figure_slices(found))
    assert sql.startswith(found.select_sql) and "ts >= {slice_start:" in sql
    assert parameters["start"] == start and parameters["site"] == "a"
