"""The one settings object: every component reads its configuration from here.

Values come from `TALLY_*` environment variables (see ../shared/DESIGN.md); defaults
describe the single-machine local stack.
"""

from __future__ import annotations

import secrets
from contextlib import suppress
from pathlib import Path
from typing import Literal
from urllib.parse import urlparse

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from tally.private_files import create_private_file

# Where the checked-out project lives: poms, migrations and the resolved jars hang off it.
PROJECT_ROOT = Path(__file__).resolve().parent.parent
# The longest deduplication window for re-sent events: 7 days, as long as `pageviews` keeps them.
DEDUP_WINDOW_MAX_S = 7 * 24 * 3600


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TALLY_", frozen=True, extra="ignore")

    home: Path = Path(".tally")

    collector_host: str = "127.0.0.1"
    collector_port: int = 8080
    dashboard_host: str = "127.0.0.1"
    dashboard_port: int = 8050
    # Slow clients: the collector answers 408 to request headers not complete this long after
    # the request began, and to a body not complete this long after its headers; the
    # dashboard's server (waitress) closes a connection idle this long.
    collector_header_timeout_s: float = 10.0
    collector_body_timeout_s: float = 10.0
    # How long a request waits for Kafka's acknowledgement before the collector answers 503.
    # 10 s on one broker (dead: supervisord restarts it, or the user must act); 30 s on a
    # cluster (`tally up --cluster`), where a broker's death costs a failover: a KRaft
    # controller election plus the dead broker's fencing, measured at ~10 s on a loaded
    # 2-core machine (docs/operations.md), so that it costs latency, not 503s.
    collector_send_timeout_s: float = Field(default=10.0, gt=0)
    dashboard_channel_timeout_s: int = 30
    # Every query the dashboard server sends (stats, Plausible API, funnels, segments, Explore)
    # stops after this long and this much memory (storage/query_limits.py): one request must not
    # hold the store every tenant shares.
    stats_query_timeout_s: float = Field(default=10.0, gt=0)
    stats_query_memory_bytes: int = Field(default=4 * 1024**3, gt=0)
    # The largest request body the dashboard's server (waitress) reads at all; the dashboard then
    # allows 1 MiB to callbacks and JSON APIs, more only to imports (dashboard/request_bodies.py).
    # 32 MiB: a 20 MiB import uploaded through the dashboard arrives base64-encoded (~27 MiB).
    dashboard_max_body_bytes: int = Field(default=32 * 2**20, ge=2**20)

    kafka_bootstrap: str = "127.0.0.1:9092"
    # The local broker's KRaft controller listener (only used by `tally up` / test fixtures).
    kafka_controller_port: int = 9093
    kafka_heap: str = "512m"
    pageviews_topic: str = "pageviews"
    blocklist_topic: str = "blocklist"
    deadletter_topic: str = "deadletter"
    alerts_topic: str = "alerts"
    pageviews_partitions: int = 3
    # Copies of every Tally topic (and of Kafka's own), and how many of them must hold a
    # write before an acks=all producer (the collector) is answered: 1 and 1 on the single
    # local broker; 3 and 2 on a cluster (`tally up --cluster`, docker-compose.yml), so that
    # one broker down costs no 202.
    kafka_replication_factor: int = Field(default=1, ge=1)
    kafka_min_insync_replicas: int = Field(default=1, ge=1)
    # How long the broker waits for a silent archiver (a GC pause, a frozen VM, SIGSTOP)
    # before expiring it from its consumer group; 6 s is the broker's minimum.
    archiver_session_timeout_s: float = 10.0
    # How often the archiver checks itself against the log and repairs holes (it also does
    # at start); see archiver/audit.py.
    archive_audit_interval_s: float = 300.0
    # The archiver's first retry of a write the store refused (or an archive position it did
    # not answer), doubled each time up to 30 s: the store restarting or briefly full.
    archiver_retry_base_s: float = Field(default=0.5, gt=0)
    # Each archiver writes a partition's offsets only while it holds the partition's fence, checked
    # by the store in the insert itself (archiver/fences.py): a thawed archiver's stale batch lands
    # nothing. Off only to show, in a test, the duplicates it prevents.
    archiver_fencing: bool = True
    # A sender's re-sent event (same site and event_id) is archived once if it was received
    # within this long of the first copy (docs/architecture.md, "Retries count once"). The
    # archive's index of ids keeps them a day longer (migration 0021's TTL): the window can be
    # shortened here, not lengthened without raising that TTL.
    dedup_window_s: int = Field(default=DEDUP_WINDOW_MAX_S, gt=0, le=DEDUP_WINDOW_MAX_S)

    clickhouse_url: str = "http://127.0.0.1:8123"
    clickhouse_database: str = "tally"
    # The one account the local endpoint accepts (and clients send); ClickHouse's own default.
    clickhouse_user: str = "default"
    # Secrets (here and below) are left out of the repr: never in a log or a traceback.
    # Empty means: read from (or generate into) $TALLY_HOME/clickhouse_password.
    clickhouse_password: str = Field(default="", repr=False)

    spark_master: str = "local[2]"
    spark_driver_memory: str = "768m"
    # The address executors use to reach the driver (a cluster needs the driver's hostname).
    spark_driver_host: str = "127.0.0.1"
    spark_trigger_s: float = 1.0
    # Executors on a cluster (spark://…): each this big, and at most this many cores in all
    # (one executor per worker at 1 core each on `tally up --cluster`).
    spark_executor_memory: str = "512m"
    spark_executor_cores: int = 1
    spark_cores_max: int = 2

    # `tally up --cluster` (ops/local/cluster.py) takes this port and the next 12: brokers,
    # their controllers, the Spark master and workers, the second collector.
    cluster_base_port: int = 9192
    # Where the cluster's three brokers listen, comma-separated (default: all on loopback),
    # and the network namespaces (`ip netns`) each runs in: brokers on addresses of their
    # own, behind links that can be cut (the cluster tests create both; docs/operations.md).
    cluster_broker_hosts: str = ""
    cluster_broker_netns: str = ""
    # Which instance of a component this process is, where several run (`tally up --cluster`
    # runs two collectors and two archivers): it names the instance's heartbeat. Empty: the one.
    instance: str = ""

    # Alert delivery (alerts/delivery.py): attempts per alert, the first retry's delay
    # (doubled each time, capped), the timeout of one POST. 6 attempts: ~15 s of retries.
    alert_delivery_attempts: int = Field(default=6, ge=1, le=20)
    alert_retry_base_s: float = Field(default=0.5, gt=0)
    alert_retry_max_s: float = Field(default=30.0, gt=0)
    alert_webhook_timeout_s: float = Field(default=5.0, gt=0)
    # Let webhooks reach loopback and private addresses (a receiver on this host or the LAN);
    # link-local (cloud metadata), multicast and reserved addresses are always refused.
    alert_webhook_private: bool = False

    rate_limit: int = 100
    rate_window_s: int = 3600
    session_gap_s: int = 1800
    # A session with at least this much engaged time (ms, from engagement events) is no bounce
    # (GA4's engaged session; storage/queries/contract.py). Changing it changes the stream
    # jobs' rollups only for what they process next: `tally replay` rebuilds the rest.
    engaged_bounce_ms: int = Field(default=10_000, ge=0)
    # How long the live views wait before closing a session (is_closed) or a rate-limit pane.
    watermark_s: int = 120
    # An event up to this late (behind the watermark) is still counted in every derived table
    # exactly as raw counts it (GA4's 72 h); the stream jobs keep each visitor's page views until
    # it has passed their days, so their state holds the visitors of this long plus a day. An
    # older event is reported late and answered from the archive (storage/queries/contract.py).
    allowed_lateness_s: int = Field(default=259_200, ge=0, le=30 * 86_400)

    # Empty means: read from (or generate into) $TALLY_HOME/ingest_key and api_key.
    ingest_key: str = Field(default="", repr=False)
    api_key: str = Field(default="", repr=False)

    # The dashboard's login password; empty means: read from (or generate into)
    # $TALLY_HOME/dashboard_password. The session cookie is signed with a secret kept likewise.
    dashboard_password: str = Field(default="", repr=False)
    dashboard_session_secret: str = Field(default="", repr=False)
    # The email the operator's password signs in under: the first owner of every site
    # (storage/users.py). Signing in with this email, or with no email, uses that password.
    owner_email: str = "owner@localhost"
    # The address members open the dashboard at (e.g. https://stats.example.com): invitation
    # links sent by mail start with it, never with a request's Host header, which the inviter
    # chooses. Empty: http://TALLY_DASHBOARD_HOST:TALLY_DASHBOARD_PORT.
    dashboard_url: str = ""
    # Browsers accept Secure cookies over plain HTTP on loopback only: turn off solely for a
    # dashboard served over plain HTTP on another address (better: put TLS in front).
    dashboard_cookie_secure: bool = True
    # Where the dashboard's numbers come from: `agg`, the stream jobs' derived tables (as the
    # stats API defaults to), or `raw`, the archive (a store without stream jobs running).
    dashboard_source: Literal["agg", "raw"] = "agg"

    # Email reports (dashboard/email_reports.py) go through this SMTP server; with no host the
    # dashboard sends none. STARTTLS upgrades the connection before any login.
    smtp_host: str = ""
    smtp_port: int = 587
    smtp_user: str = ""
    smtp_password: str = Field(default="", repr=False)
    smtp_from: str = "tally@localhost"
    smtp_starttls: bool = True
    reports_interval_s: float = 300.0  # how often the jobs process looks for due email reports
    # How often the jobs process computes saved funnels' closed days (storage/saved_funnels.py).
    funnel_precompute_interval_s: float = 300.0

    # `tally mcp` (mcp_server/): the read-only MCP server. Over HTTP (`--transport http`) it listens
    # here and each request brings its caller's key (Authorization: Bearer); over stdio the key is
    # TALLY_MCP_KEY (a member's key, or the operator's from $TALLY_HOME/api_key). Either way it asks
    # the dashboard's APIs at mcp_api_url (empty: http://TALLY_DASHBOARD_HOST:TALLY_DASHBOARD_PORT)
    # with that key, waits at most mcp_timeout_s for an answer and hands back at most mcp_max_rows rows.
    mcp_host: str = "127.0.0.1"
    mcp_port: int = 8060
    mcp_api_url: str = ""
    mcp_key: str = Field(default="", repr=False)
    mcp_timeout_s: float = Field(default=30.0, gt=0)
    mcp_max_rows: int = Field(default=100, ge=1, le=1000)

    # The CLI prints a traceback instead of its one-line error (for bug reports).
    debug: bool = False

    trusted_proxies: str = "127.0.0.1/8,::1/128"
    supervisor_port: int = 9001

    jars_dir: Path = Field(default=PROJECT_ROOT / ".deps")

    def environment(self) -> dict[str, str]:
        """These settings as the TALLY_* variables a child process reads them back from."""
        values = {name: str(value) for name, value in self}
        return {f"TALLY_{name.upper()}": value for name, value in values.items()} | {
            "TALLY_HOME": str(self.home_dir)
        }

    @property
    def home_dir(self) -> Path:
        # Not cached: model_copy(update={"home": …}) copies a cached value along, and the
        # copy would keep using the original home (its checkpoints, its keys).
        return self.home.expanduser().resolve()

    @property
    def logs_dir(self) -> Path:
        return self.home_dir / "logs"

    @property
    def kafka_dir(self) -> Path:
        return self.home_dir / "kafka"

    @property
    def clickhouse_dir(self) -> Path:
        return self.home_dir / "clickhouse"

    @property
    def checkpoints_dir(self) -> Path:
        return self.home_dir / "checkpoints"

    @property
    def kafka_jars(self) -> Path:
        return self.jars_dir / "kafka"

    @property
    def spark_jars(self) -> list[Path]:
        """Spark's Kafka connector (.deps/spark) and the stream jobs' own JVM code (.deps/spark-app)."""
        connector = sorted((self.jars_dir / "spark").glob("*.jar"))
        return connector + sorted((self.jars_dir / "spark-app").glob("*.jar"))

    @property
    def kafka_port(self) -> int:
        return int(self.kafka_bootstrap.rsplit(":", 1)[1])

    @property
    def clickhouse_port(self) -> int:
        return urlparse(self.clickhouse_url).port or 8123

    def resolved_clickhouse_password(self) -> str:
        return self.clickhouse_password or _read_or_create_key(self.home_dir / "clickhouse_password")

    def resolved_ingest_key(self) -> str:
        return self.ingest_key or _read_or_create_key(self.home_dir / "ingest_key")

    def resolved_api_key(self) -> str:
        return self.api_key or _read_or_create_key(self.home_dir / "api_key")

    def resolved_dashboard_password(self) -> str:
        return self.dashboard_password or _read_or_create_key(self.home_dir / "dashboard_password")

    def resolved_dashboard_session_secret(self) -> str:
        return self.dashboard_session_secret or _read_or_create_key(
            self.home_dir / "dashboard_session_secret"
        )


def _read_or_create_key(path: Path) -> str:
    """A secret kept in $TALLY_HOME, generated on first use (created 0600, never chmod-ed after)."""
    if not path.exists():
        # If another process generated it first, everyone uses that one.
        with suppress(FileExistsError):
            create_private_file(path, secrets.token_urlsafe(32) + "\n")
    return path.read_text().strip()
