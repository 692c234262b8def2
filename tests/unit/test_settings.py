"""Settings: what components derive from them follows the values they were given."""

from __future__ import annotations

from pathlib import Path

import pytest

from tally.settings import Settings


def test_a_copy_with_another_home_uses_that_home(tmp_path: Path) -> None:
    # The Spark benchmark runs its own stream jobs on a copy of the stack's settings with its
    # own home: sharing the stack's checkpoints once corrupted the stack's stream jobs.
    stack = Settings(home=tmp_path / "stack")
    assert stack.checkpoints_dir == (tmp_path / "stack" / "checkpoints").resolve()
    bench = stack.model_copy(update={"home": tmp_path / "bench"})
    assert bench.home_dir == (tmp_path / "bench").resolve()
    assert bench.checkpoints_dir == (tmp_path / "bench" / "checkpoints").resolve()
    assert stack.home_dir == (tmp_path / "stack").resolve()


def test_secrets_stay_out_of_the_repr() -> None:
    settings = Settings(api_key="api-key-value-1234", dashboard_password="password-value-5678")
    assert "api-key-value-1234" not in repr(settings)
    assert "password-value-5678" not in repr(settings)


def test_a_child_process_reads_the_same_settings_back_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = Settings(
        home=tmp_path / "child",
        kafka_bootstrap="127.0.0.1:19092",
        spark_trigger_s=0.5,
        rate_limit=5,
        dashboard_cookie_secure=False,
        dashboard_source="raw",
    )
    for name, value in given.environment().items():
        monkeypatch.setenv(name, value)
    read_back = Settings()
    assert read_back.home_dir == given.home_dir
    assert read_back.model_dump(exclude={"home"}) == given.model_dump(exclude={"home"})
