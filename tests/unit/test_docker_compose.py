"""docker-compose.yml cannot run here (no Docker engine), so check it against the code:
every service's image, command, settings and ports must agree with what Tally reads."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from tally.settings import PROJECT_ROOT, Settings

COMPOSE = yaml.safe_load((PROJECT_ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
TALLY_SERVICES = ["init", "collector", "archiver", "stream-jobs", "dashboard"]
SETTING_NAMES = {f"TALLY_{name.upper()}" for name in Settings.model_fields}


def test_every_component_of_the_design_is_a_service() -> None:
    expected = {"kafka", "clickhouse", "spark-master", "spark-worker", *TALLY_SERVICES}
    assert expected <= set(SERVICES)


@pytest.mark.parametrize(
    ("service", "image_prefix"),
    [
        ("kafka", "apache/kafka:4."),
        ("clickhouse", "clickhouse/clickhouse-server:"),
        ("spark-master", "apache/spark:4.0.0"),
        ("spark-worker", "apache/spark:4.0.0"),
    ],
)
def test_infrastructure_runs_upstream_images_pinned(service: str, image_prefix: str) -> None:
    image = SERVICES[service]["image"]
    assert image.startswith(image_prefix)
    assert not image.endswith(":latest")


def test_spark_images_match_the_pinned_pyspark() -> None:
    import pyspark

    for service in ("spark-master", "spark-worker"):
        assert SERVICES[service]["image"].split(":")[1].startswith(pyspark.__version__)


@pytest.mark.parametrize("service", TALLY_SERVICES)
def test_tally_service_runs_a_real_entry_point(service: str) -> None:
    command = SERVICES[service]["command"]
    if command[:2] == ["python", "-m"]:
        assert importlib.util.find_spec(command[2]) is not None, f"{service}: no module {command[2]}"
    else:
        assert command[0] == "tally"
    assert SERVICES[service]["image"].startswith("tally:")
    assert SERVICES[service]["build"] == "."


@pytest.mark.parametrize("service", TALLY_SERVICES)
def test_tally_service_settings_are_real_settings(service: str) -> None:
    environment = SERVICES[service]["environment"]
    tally_names = {name for name in environment if name.startswith("TALLY_")}
    assert tally_names - SETTING_NAMES == set()
    assert environment["TALLY_KAFKA_BOOTSTRAP"] == "kafka:9092"
    assert environment["TALLY_CLICKHOUSE_URL"].endswith("@clickhouse:8123")
    assert environment["TALLY_SPARK_MASTER"] == "spark://spark-master:7077"


@pytest.mark.parametrize(
    ("service", "port"), [("collector", Settings().collector_port), ("dashboard", Settings().dashboard_port)]
)
def test_public_services_listen_on_their_settings_port(service: str, port: int) -> None:
    environment = SERVICES[service]["environment"]
    assert int(environment[f"TALLY_{service.upper()}_PORT"]) == port
    assert environment[f"TALLY_{service.upper()}_HOST"] == "0.0.0.0"
    assert f"{port}:{port}" in SERVICES[service]["ports"]
    assert str(port) in " ".join(SERVICES[service]["healthcheck"]["test"])


def test_kafka_and_clickhouse_listen_where_the_services_look() -> None:
    assert "9092:9092" in SERVICES["kafka"]["ports"]
    assert SERVICES["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT://kafka:9092"
    assert "8123:8123" in SERVICES["clickhouse"]["ports"]


@pytest.mark.parametrize("service", ["kafka", "clickhouse", "spark-master", "collector", "dashboard"])
def test_long_running_services_have_health_checks(service: str) -> None:
    assert SERVICES[service]["healthcheck"]["test"]


def test_state_lives_on_volumes() -> None:
    assert any("/var/lib/kafka/data" in volume for volume in SERVICES["kafka"]["volumes"])
    assert any("/var/lib/clickhouse" in volume for volume in SERVICES["clickhouse"]["volumes"])
    checkpoints = {"checkpoints:/data/checkpoints"}
    assert checkpoints <= set(SERVICES["stream-jobs"]["volumes"]) and checkpoints <= set(
        SERVICES["spark-worker"]["volumes"]
    )


def test_services_start_after_topics_and_schema_exist() -> None:
    for service in ["collector", "archiver", "stream-jobs", "dashboard"]:
        assert SERVICES[service]["depends_on"]["init"]["condition"] == "service_completed_successfully"
    assert SERVICES["init"]["depends_on"]["kafka"]["condition"] == "service_healthy"


def test_dockerfile_installs_the_pinned_tree_and_the_spark_connector() -> None:
    dockerfile = (PROJECT_ROOT / "Dockerfile").read_text()
    assert "-c constraints.txt" in dockerfile
    assert "deps/spark/pom.xml" in dockerfile
    assert Path(PROJECT_ROOT / "deps/spark/pom.xml").exists()
