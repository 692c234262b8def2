"""`tally loadgen` refuses impossible traffic on the command line, before it touches the stack:
a negative rate or no process at all is a typo, not a store that is down."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ops.cli import main as tally


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        (["--rate", "-1"], "tally: invalid value for '--rate': -1.0 is not in the range x>0"),
        (["--rate", "0"], "tally: invalid value for '--rate': 0.0 is not in the range x>0"),
        (["--duration", "-5"], "tally: invalid value for '--duration': -5.0 is not in the range x>=0"),
        (["--sites", "0"], "tally: invalid value for '--sites': 0 is not in the range x>=1"),
        (["--processes", "0"], "tally: invalid value for '--processes': 0 is not in the range x>=1"),
        (
            ["--bot-fraction", "2"],
            "tally: invalid value for '--bot-fraction': 2.0 is not in the range 0<=x<=1",
        ),
        (["--late-fraction", "-0.1"], "tally: invalid value for '--late-fraction': -0.1 is not in the range"),
        (["--batch", "-3"], "tally: invalid value for '--batch': -3 is not in the range x>=0"),
        (["--scrapers", "-1"], "tally: invalid value for '--scrapers': -1 is not in the range x>=0"),
        (["--target", "http://example.com"], "tally: invalid value: example.com is not a loopback address"),
        (["--target", "https://127.0.0.1:8080"], "tally: invalid value: https://127.0.0.1:8080: give the"),
    ],
)
def test_loadgen_typo_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arguments: list[str], complaint: str
) -> None:
    # No stack in this home: the complaint must be about the option, not the store.
    monkeypatch.setenv("TALLY_HOME", str(tmp_path / "home"))

    result = CliRunner().invoke(tally, ["loadgen", *arguments], prog_name="tally")

    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(complaint) and line.endswith("see 'tally loadgen --help'")
