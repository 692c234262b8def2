"""docker-compose.yml cannot run here (no Docker engine), so check it against the code:
every service's image, command, settings and ports must agree with what Tally reads."""

from __future__ import annotations

import importlib.util
import re
from ipaddress import ip_address, ip_network
from pathlib import Path

import pytest
import yaml

from collector.app import KEEP_ALIVE_S
from mcp_server.serve import KEEP_ALIVE_S as MCP_KEEP_ALIVE_S
from ops.local import cluster, kafka
from tally.client_ip import parse_networks
from tally.settings import PROJECT_ROOT, Settings

COMPOSE = yaml.safe_load((PROJECT_ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
BROKERS = [f"kafka-{n}" for n in range(1, cluster.BROKERS + 1)]
WORKERS = [f"spark-worker-{n}" for n in range(1, cluster.SPARK_WORKERS + 1)]
COLLECTORS = [f"collector-{n}" for n in range(1, cluster.COLLECTORS + 1)]
ARCHIVERS = [f"archiver-{n}" for n in range(1, cluster.ARCHIVERS + 1)]
TALLY_SERVICES = ["init", *COLLECTORS, *ARCHIVERS, "alert-delivery", "jobs", "stream-jobs", "dashboard"]
SETTING_NAMES = {f"TALLY_{name.upper()}" for name in Settings.model_fields}
CADDYFILE = (PROJECT_ROOT / "deploy/Caddyfile").read_text()
# (service, the settings' name for it, its port)
PUBLIC_SERVICES = [
    *((name, "collector", Settings().collector_port) for name in COLLECTORS),
    ("dashboard", "dashboard", Settings().dashboard_port),
    ("mcp", "mcp", Settings().mcp_port),
]
# Compose's interpolation: `${NAME:-default}` or `${NAME:?message}` (a required variable).
VARIABLE = re.compile(r"\$\{(?P<name>\w+)(?::(?P<kind>[-?])(?P<rest>[^}]*))?\}")


def with_defaults(value: str) -> str:
    """`value` as compose resolves it with no variables set; a required one fails."""

    def resolve(match: re.Match[str]) -> str:
        if match["kind"] == "-":
            return match["rest"]
        raise LookupError(f"{match['name']} is required: {match['rest']}")

    return VARIABLE.sub(resolve, value)


def required_variable(value: str) -> str:
    """The variable `value` requires (fails if it has a default or none)."""
    match = VARIABLE.fullmatch(value)
    assert match and match["kind"] == "?", f"{value!r} is not a required variable"
    return match["name"]


def test_every_component_of_the_design_is_a_service() -> None:
    expected = {*BROKERS, "clickhouse", "spark-master", *WORKERS, *TALLY_SERVICES}
    assert expected <= set(SERVICES)


@pytest.mark.parametrize(
    ("service", "image_prefix"),
    [
        *((broker, "apache/kafka:4.") for broker in BROKERS),
        ("clickhouse", "clickhouse/clickhouse-server:"),
        ("spark-master", "apache/spark:4.0.0"),
        *((worker, "apache/spark:4.0.0") for worker in WORKERS),
    ],
)
def test_infrastructure_runs_upstream_images_pinned(service: str, image_prefix: str) -> None:
    image = SERVICES[service]["image"]
    assert image.startswith(image_prefix)
    assert not image.endswith(":latest")


def test_spark_images_match_the_pinned_pyspark() -> None:
    import pyspark

    for service in ("spark-master", *WORKERS):
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
    assert environment["TALLY_KAFKA_BOOTSTRAP"] == ",".join(f"{broker}:9092" for broker in BROKERS)
    assert environment["TALLY_CLICKHOUSE_URL"] == "http://clickhouse:8123"
    assert environment["TALLY_SPARK_MASTER"] == "spark://spark-master:7077"


@pytest.mark.parametrize(("service", "kind", "port"), PUBLIC_SERVICES)
def test_public_services_listen_on_their_settings_port_behind_the_proxy(
    service: str, kind: str, port: int
) -> None:
    environment = SERVICES[service]["environment"]
    assert int(environment[f"TALLY_{kind.upper()}_PORT"]) == port
    assert environment[f"TALLY_{kind.upper()}_HOST"] == "0.0.0.0"
    assert str(port) in " ".join(SERVICES[service]["healthcheck"]["test"])
    assert re.search(rf"reverse_proxy [^{{\n]*\b{service}:{port}\b", CADDYFILE), (
        f"the proxy does not forward to {service}"
    )
    assert SERVICES["proxy"]["depends_on"][service]["condition"] == "service_healthy"


def test_proxy_lets_idle_connections_go_before_the_services_do() -> None:
    # Otherwise the proxy can reuse a connection the service is closing, and lose a POST.
    keepalives = [int(seconds) for seconds in re.findall(r"keepalive (\d+)s", CADDYFILE)]
    assert len(keepalives) == len({kind for _, kind, _ in PUBLIC_SERVICES})
    assert max(keepalives) < min(KEEP_ALIVE_S, Settings().dashboard_channel_timeout_s, MCP_KEEP_ALIVE_S)


def test_the_mcp_server_holds_no_secret_and_asks_the_dashboard_service() -> None:
    # It acts with each caller's key: none of the installation's passwords or keys is given it.
    environment = SERVICES["mcp"]["environment"]
    assert set(environment) == {"TALLY_MCP_HOST", "TALLY_MCP_PORT", "TALLY_MCP_API_URL"}
    assert environment["TALLY_MCP_API_URL"] == f"http://dashboard:{Settings().dashboard_port}"
    assert SERVICES["mcp"]["command"] == ["python", "-m", "mcp_server", "--transport", "http"]
    assert SERVICES["mcp"]["depends_on"]["dashboard"]["condition"] == "service_healthy"


def test_only_the_tls_proxy_publishes_host_ports() -> None:
    published = {name for name, service in SERVICES.items() if service.get("ports")}
    assert published == {"proxy"}
    assert {"80:80", "443:443"} <= set(SERVICES["proxy"]["ports"])
    assert SERVICES["proxy"]["image"].startswith("caddy:2.")
    assert "./deploy/Caddyfile:/etc/caddy/Caddyfile:ro" in SERVICES["proxy"]["volumes"]
    # Caddy takes certificates for the names it serves: both are required, never a default.
    for name in ("COLLECTOR_DOMAIN", "DASHBOARD_DOMAIN"):
        assert "{$" + name + "}" in CADDYFILE
        assert required_variable(SERVICES["proxy"]["environment"][name]) == f"TALLY_{name}"


@pytest.mark.parametrize("broker", BROKERS)
def test_kafka_listens_where_the_services_look(broker: str) -> None:
    assert SERVICES[broker]["environment"]["KAFKA_ADVERTISED_LISTENERS"] == f"PLAINTEXT://{broker}:9092"
    assert "PLAINTEXT://:9092" in SERVICES[broker]["environment"]["KAFKA_LISTENERS"]


@pytest.mark.parametrize("service", ["clickhouse", *TALLY_SERVICES])
def test_clickhouse_password_is_a_required_variable_with_no_default(service: str) -> None:
    environment = SERVICES[service]["environment"]
    name = "CLICKHOUSE_PASSWORD" if service == "clickhouse" else "TALLY_CLICKHOUSE_PASSWORD"
    assert required_variable(environment[name]) == "TALLY_CLICKHOUSE_PASSWORD"
    with pytest.raises(LookupError, match="TALLY_CLICKHOUSE_PASSWORD"):
        with_defaults(environment[name])
    if service != "clickhouse":
        assert (
            environment["TALLY_CLICKHOUSE_USER"] == SERVICES["clickhouse"]["environment"]["CLICKHOUSE_USER"]
        )


def test_dashboard_session_cookie_is_secure() -> None:
    environment = SERVICES["dashboard"]["environment"]
    configured = Settings(dashboard_cookie_secure=with_defaults(environment["TALLY_DASHBOARD_COOKIE_SECURE"]))
    assert configured.dashboard_cookie_secure is True


def test_collector_trusts_only_the_proxy_at_its_fixed_address() -> None:
    [network] = COMPOSE["networks"]["default"]["ipam"]["config"]
    subnet, dynamic = ip_network(network["subnet"]), ip_network(network["ip_range"])
    proxy = ip_address(SERVICES["proxy"]["networks"]["default"]["ipv4_address"])
    # In the network, outside the range other containers are given addresses from.
    assert proxy in subnet and proxy not in dynamic and dynamic.subnet_of(subnet)
    for service in TALLY_SERVICES:
        trusted = parse_networks(with_defaults(SERVICES[service]["environment"]["TALLY_TRUSTED_PROXIES"]))
        assert trusted.networks == (ip_network(f"{proxy}/32"),), service


@pytest.mark.parametrize("service", [*BROKERS, "clickhouse", "spark-master", *COLLECTORS, "dashboard", "mcp"])
def test_long_running_services_have_health_checks(service: str) -> None:
    assert SERVICES[service]["healthcheck"]["test"]


def test_state_lives_on_volumes() -> None:
    # A volume per broker: three copies of the log on three disks.
    assert [SERVICES[broker]["volumes"] for broker in BROKERS] == [
        [f"{broker}-data:/var/lib/kafka/data"] for broker in BROKERS
    ]
    assert any("/var/lib/clickhouse" in volume for volume in SERVICES["clickhouse"]["volumes"])
    # Checkpoints on storage the driver and every executor see.
    checkpoints = {"checkpoints:/data/checkpoints"}
    for service in ["stream-jobs", *WORKERS]:
        assert checkpoints <= set(SERVICES[service]["volumes"]), service


def test_services_start_after_topics_and_schema_exist() -> None:
    for service in [*COLLECTORS, *ARCHIVERS, "stream-jobs", "dashboard"]:
        assert SERVICES[service]["depends_on"]["init"]["condition"] == "service_completed_successfully"
    for broker in BROKERS:
        assert SERVICES["init"]["depends_on"][broker]["condition"] == "service_healthy"


def test_dockerfile_installs_the_pinned_tree_and_the_spark_connector() -> None:
    dockerfile = (PROJECT_ROOT / "Dockerfile").read_text()
    assert "-c constraints.txt" in dockerfile
    assert "deps/spark/pom.xml" in dockerfile
    assert Path(PROJECT_ROOT / "deps/spark/pom.xml").exists()


# --- the same cluster as `tally up --cluster` (ops/local/cluster.py) -------------------------

# What each broker of `tally up --cluster` is configured with that decides replication and
# failover; compose must say the same (KAFKA_<PROPERTY> in the apache/kafka image).
REPLICATION_PROPERTIES = [
    "offsets.topic.replication.factor",
    "default.replication.factor",
    "min.insync.replicas",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
    "broker.session.timeout.ms",
    "broker.heartbeat.interval.ms",
    "replica.lag.time.max.ms",
    "unclean.leader.election.enable",
    "auto.create.topics.enable",
    "group.initial.rebalance.delay.ms",
]


def cluster_broker_properties() -> dict[str, str]:
    settings = cluster.cluster_settings(Settings())
    nodes = cluster.layout(settings).brokers(settings.kafka_dir)
    text = kafka.server_properties(settings, nodes[0], voters=nodes)
    return dict(line.split("=", 1) for line in text.splitlines() if line)


@pytest.mark.parametrize("broker", BROKERS)
def test_brokers_are_configured_as_the_cluster_mode_runs_them(broker: str) -> None:
    environment = SERVICES[broker]["environment"]
    local = cluster_broker_properties()
    for name in REPLICATION_PROPERTIES:
        assert str(environment["KAFKA_" + name.upper().replace(".", "_")]).lower() == local[name], name
    voters = environment["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(",")
    assert voters == [f"{n}@kafka-{n}:9093" for n in range(1, cluster.BROKERS + 1)]
    assert f"{environment['KAFKA_NODE_ID']}@{broker}:9093" in voters
    assert environment["KAFKA_PROCESS_ROLES"] == local["process.roles"]


def test_one_cluster_id_for_all_brokers() -> None:
    ids = {with_defaults(SERVICES[broker]["environment"]["CLUSTER_ID"]) for broker in BROKERS}
    assert len(ids) == 1


@pytest.mark.parametrize("service", TALLY_SERVICES)
def test_services_replicate_topics_as_the_cluster_mode(service: str) -> None:
    environment = SERVICES[service]["environment"]
    assert int(environment["TALLY_KAFKA_REPLICATION_FACTOR"]) == cluster.REPLICATION_FACTOR
    assert int(environment["TALLY_KAFKA_MIN_INSYNC_REPLICAS"]) == cluster.MIN_INSYNC_REPLICAS
    assert cluster.REPLICATION_FACTOR == len(BROKERS) > cluster.MIN_INSYNC_REPLICAS


@pytest.mark.parametrize("collector", COLLECTORS)
def test_collectors_wait_out_a_failover_as_in_the_cluster_mode(collector: str) -> None:
    environment = SERVICES[collector]["environment"]
    assert float(environment["TALLY_COLLECTOR_SEND_TIMEOUT_S"]) == cluster.COLLECTOR_SEND_TIMEOUT_S


def test_spark_executors_fit_the_workers() -> None:
    environment = SERVICES["stream-jobs"]["environment"]
    cores = [int(SERVICES[worker]["environment"]["SPARK_WORKER_CORES"]) for worker in WORKERS]
    # One executor per worker: either can take the other's tasks when it is lost.
    assert int(environment["TALLY_SPARK_CORES_MAX"]) == sum(cores)
    assert all(int(environment["TALLY_SPARK_EXECUTOR_CORES"]) == n for n in cores)
    for worker in WORKERS:
        worker_memory = mebibytes(SERVICES[worker]["environment"]["SPARK_WORKER_MEMORY"])
        assert mebibytes(environment["TALLY_SPARK_EXECUTOR_MEMORY"]) <= worker_memory


def mebibytes(size: str) -> int:
    return int(size[:-1]) * (1024 if size.endswith("g") else 1)


ARCHIVER_COMMAND = ["python", "-m", "archiver"]


def test_collectors_and_archivers_are_as_many_as_in_the_cluster_mode() -> None:
    collectors = [name for name, service in SERVICES.items() if "collector.app" in service.get("command", [])]
    archivers = [name for name, service in SERVICES.items() if service.get("command") == ARCHIVER_COMMAND]
    assert collectors == COLLECTORS and archivers == ARCHIVERS
