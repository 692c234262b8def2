"""The soak stays out of every run that does not ask for it by marker (tests/lanes.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.lanes import keep_the_soak_out


def item(name: str, *markers: str) -> SimpleNamespace:
    return SimpleNamespace(name=name, get_closest_marker=lambda marker: marker if marker in markers else None)


def selected(markexpr: str) -> tuple[list[str], list[str]]:
    deselected: list[str] = []
    config = SimpleNamespace(
        getoption=lambda name: markexpr if name == "markexpr" else None,
        hook=SimpleNamespace(pytest_deselected=lambda items: deselected.extend(i.name for i in items)),
    )
    items = [item("unit"), item("soak", "soak"), item("fault", "fault")]
    keep_the_soak_out(config, items)  # type: ignore[arg-type]
    return [i.name for i in items], deselected


@pytest.mark.parametrize("markexpr", ["", "fault", "fast"])
def test_the_soak_is_left_out_unless_asked_for(markexpr: str) -> None:
    # (the expression itself then picks among the rest)
    assert selected(markexpr) == (["unit", "fault"], ["soak"])


def test_a_marker_expression_naming_the_soak_decides_alone() -> None:
    # `-m soak` (make soak) keeps it; `-m "not soak"` leaves it to the expression itself
    assert selected("soak") == (["unit", "soak", "fault"], [])
    assert selected("not soak") == (["unit", "soak", "fault"], [])
