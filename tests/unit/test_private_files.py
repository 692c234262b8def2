"""Secrets and folders under $TALLY_HOME are created private, whatever the process's umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tally.settings import Settings


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    # The worst case: a process whose umask would leave everything it creates world-writable.
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("permissive_umask")
def test_generated_password_and_the_homes_folders_are_private(tmp_path: Path) -> None:
    home = tmp_path / "a" / "new" / "home"

    password = Settings(home=home).resolved_clickhouse_password()

    assert (home / "clickhouse_password").read_text().strip() == password
    assert mode(home / "clickhouse_password") == 0o600
    assert [mode(folder) for folder in (tmp_path / "a", tmp_path / "a" / "new", home)] == [0o700] * 3


def test_a_given_password_wins_and_writes_nothing(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, clickhouse_password="given-in-the-environment")

    assert settings.resolved_clickhouse_password() == "given-in-the-environment"
    assert not (tmp_path / "clickhouse_password").exists()


def test_the_password_is_generated_once(tmp_path: Path) -> None:
    first = Settings(home=tmp_path).resolved_clickhouse_password()

    assert Settings(home=tmp_path).resolved_clickhouse_password() == first
