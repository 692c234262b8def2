"""Versioned definitions without a store: durations as typed on the command line, a version's
JSON, the environment told apart from the stored version, side-table suffixes."""

from __future__ import annotations

import pytest

from storage.definitions import Definitions, applied, duration_ms, environment_differences, side_suffix
from storage.queries.agg import side_tables
from tally.settings import Settings


@pytest.mark.parametrize(
    ("text", "ms"), [("20m", 1_200_000), ("90s", 90_000), ("1h", 3_600_000), ("500ms", 500), ("45", 45_000)]
)
def test_durations_read_as_typed(text: str, ms: int) -> None:
    assert duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "twenty", "20 minutes", "-5s", "1.5h"])
def test_anything_else_is_no_duration(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        duration_ms(text)


def test_a_version_round_trips_through_json() -> None:
    version = Definitions(1200, 5000, 120, {"channels": "abc"})
    assert Definitions.from_json(version.to_json()) == version


def test_the_environment_that_differs_is_named_and_the_stored_version_applies() -> None:
    stored = Definitions(1200, 10_000, 120)
    settings = Settings(session_gap_s=600)
    assert environment_differences(settings, stored) == ["TALLY_SESSION_GAP_S=600 (current: 1200)"]
    assert applied(settings, stored).session_gap_s == 1200
    assert environment_differences(applied(settings, stored), stored) == []


def test_side_tables_are_named_by_their_version_and_nothing_else_passes() -> None:
    assert side_suffix(3) == "_v3"
    assert side_tables("_v3") == "_v3" and side_tables("") == ""
    for bad in ("_replay", "_v3; DROP TABLE events", "_v"):
        with pytest.raises(ValueError, match="side-table suffix"):
            side_tables(bad)
