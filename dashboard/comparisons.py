"""A report next to the same report over the compared range (`compare=previous_period|
year_over_year`): the change of each number, stated once for the stats API.

A count's change is relative, in percent with one decimal (120 against 100 visitors: 20.0); it
is null when the compared number is 0 (no percentage of nothing). A rate's (bounce_rate, 0-1)
is the difference in percentage points (0.44 against 0.40: 4.0), as the dashboard's cards say
it: a relative change of a percentage reads as nonsense ("bounce rate +10 %" from 40 to 44 %).
"""

from __future__ import annotations

from collections.abc import Mapping

RATES = frozenset({"bounce_rate"})


def change(name: str, current: float, previous: float) -> float | None:
    if name in RATES:
        return round((current - previous) * 100, 1)
    if not previous:
        return None
    return round((current - previous) / previous * 100, 1)


def changes(current: Mapping[str, float], previous: Mapping[str, float]) -> dict[str, float | None]:
    """Per number of `current`, its change against `previous`."""
    return {name: change(name, value, previous.get(name, 0)) for name, value in current.items()}


def paired(points: list[dict[str, object]], previous: list[dict[str, object]]) -> list[dict[str, object]]:
    """Bucket i of the range with bucket i of the compared range (a 31-day month against a
    30-day one leaves its last bucket without a comparison: null)."""
    result = []
    for index, point in enumerate(points):
        other = previous[index] if index < len(previous) else None
        numbers = {name: value for name, value in point.items() if name != "t"}
        result.append(
            point
            | {
                "comparison": other,
                "change": changes(numbers, {k: v for k, v in other.items() if k != "t"}) if other else None,
            }
        )
    return result
