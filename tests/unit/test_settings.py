"""Settings: what components derive from them follows the values they were given."""

from __future__ import annotations

from pathlib import Path

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
