"""`tally up --cluster` stores where its instances listen in $TALLY_HOME, so that `tally
status`, `down` and every other command find them without the user repeating the option."""

from __future__ import annotations

from pathlib import Path

import pytest

from ops.local import cluster
from ops.local.supervisor import StackError
from tally.settings import Settings


def started(home: Path, **given: object) -> Settings:
    """The settings `tally up --cluster` runs with, given these options in its environment."""
    return cluster.store_layout(Settings(home=home, **given))


def test_a_later_command_finds_the_base_port_without_the_option(tmp_path: Path) -> None:
    started(tmp_path, cluster_base_port=20300)
    later = cluster.cluster_settings(Settings(home=tmp_path))
    assert later.cluster_base_port == 20300
    assert later.kafka_bootstrap == "127.0.0.1:20300,127.0.0.1:20301,127.0.0.1:20302"
    assert cluster.controller_ports(Settings(home=tmp_path)) == [20303, 20304, 20305]


def test_the_running_cluster_wins_over_another_option(tmp_path: Path) -> None:
    started(tmp_path, cluster_base_port=20300)
    assert (
        cluster.cluster_settings(Settings(home=tmp_path, cluster_base_port=9192)).cluster_base_port == 20300
    )


def test_a_restart_keeps_the_stored_layout_unless_given_another(tmp_path: Path) -> None:
    started(tmp_path, cluster_base_port=20300, cluster_broker_hosts="10.250.7.2,10.250.7.3,10.250.7.4")
    assert started(tmp_path).cluster_base_port == 20300
    assert started(tmp_path).cluster_broker_hosts == "10.250.7.2,10.250.7.3,10.250.7.4"
    assert started(tmp_path, cluster_base_port=20350).cluster_base_port == 20350
    assert cluster.stored_layout(Settings(home=tmp_path)).cluster_base_port == 20350


def test_the_stored_layout_is_private(tmp_path: Path) -> None:
    started(tmp_path / "home", cluster_base_port=20300)
    assert (tmp_path / "home" / cluster.LAYOUT_FILE).stat().st_mode & 0o077 == 0


def test_a_damaged_layout_file_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / cluster.LAYOUT_FILE).write_text("{not json")
    with pytest.raises(StackError, match=r"cluster\.json is unreadable"):
        cluster.cluster_settings(Settings(home=tmp_path))


def test_a_home_without_a_cluster_keeps_the_environment(tmp_path: Path) -> None:
    assert cluster.stored_layout(Settings(home=tmp_path, cluster_base_port=20300)).cluster_base_port == 20300
