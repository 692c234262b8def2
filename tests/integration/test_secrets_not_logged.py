"""No key or password ever reaches a log.

The collector and the dashboard run as real processes (`python -m collector.app`,
`python -m dashboard.app`, as under `tally up`), on the session's Kafka and ClickHouse, each
with its stdout and stderr in a log file. Their secrets come from $TALLY_HOME's files (as
`tally up` generates them) or from the environment (TALLY_API_KEY, …), one run each. The test
presents every secret, right and wrong, everywhere a client would: the stats API's Bearer key
(right, wrong, under the wrong scheme, in the query string), the dashboard's login form (right
and wrong password), the session cookie the login issues, and the collector's batch endpoint
(right key with a good and a bad batch, wrong key, key in the query string). It also makes the
dashboard fail inside a callback, so that an error with its traceback is logged. Once the
processes have stopped (their output flushed), no log holds any of the values.

The logs are checked to hold what the processes did, so that the scan is of the processes'
real output: the dashboard's startup line and the callback failure with its traceback; the
collector logs nothing in normal operation, so it is given a malformed record on its own
blocklist topic, which it reports (with the record's key) as ignored.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

import httpx
import pytest
from aiokafka import AIOKafkaProducer

from dashboard.periods import DEFAULT_PRESET, period
from tally.settings import Settings
from tally.topics import ensure_topics_sync
from tests.fixtures.collector_server import register_site
from tests.fixtures.ports import free_port
from tests.fixtures.service_process import running_module

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Secrets:
    ingest_key: str
    api_key: str
    password: str
    session_secret: str

    @classmethod
    def generated(cls) -> Secrets:
        return cls(*(secrets.token_urlsafe(32) for _ in range(4)))

    @classmethod
    def read_from(cls, home: Path) -> Secrets:
        """What the processes generated into $TALLY_HOME on first start."""
        names = ("ingest_key", "api_key", "dashboard_password", "dashboard_session_secret")
        return cls(*((home / name).read_text().strip() for name in names))


@dataclass(frozen=True)
class Service:
    url: str
    log_path: Path


def without_tally_settings(environment: Mapping[str, str]) -> dict[str, str]:
    """The caller's environment minus TALLY_*: no key of the caller's own reaches the services."""
    return {name: value for name, value in environment.items() if not name.startswith("TALLY_")}


@contextmanager
def service_process(name: str, home: Path, environment: dict[str, str]) -> Iterator[Service]:
    """`python -m <name>.app` on a free port, its output in home/<name>.log; `environment`
    holds the settings (without the port) and the secrets, if they come from there."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = home / f"{name}.log"
    env = without_tally_settings(os.environ) | environment
    env |= {"TALLY_HOME": str(home), f"TALLY_{name.upper()}_PORT": str(port)}
    with running_module(f"{name}.app", env, log_path, f"{url}/healthz"):
        yield Service(url, log_path)


def blocklist_with_a_malformed_record(settings: Settings, home: Path) -> tuple[str, str]:
    """A blocklist topic of the collector's own holding one record it cannot read: (topic, key)."""
    topic, key = f"blocklist-{uuid4().hex[:10]}", f"log-probe-{uuid4().hex}"
    ensure_topics_sync(Settings(home=home, kafka_bootstrap=settings.kafka_bootstrap, blocklist_topic=topic))

    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"not json", key=key.encode())
        finally:
            await producer.stop()

    asyncio.run(produce())
    return topic, key


def exercise_collector(collector: Service, settings: Settings, key: str, wrong_key: str) -> None:
    site = f"secrets-{uuid4().hex[:8]}.example"
    register_site(settings, collector.url, site)
    batch = [{"site": site, "url": f"https://{site}/", "user_agent": "secrets test"}]
    with httpx.Client(base_url=collector.url, timeout=10) as http:
        assert http.post("/api/events", json=batch, headers=bearer(key)).status_code == 202
        bad_batch = [{"site": site, "url": "not a url"}]
        assert http.post("/api/events", json=bad_batch, headers=bearer(key)).status_code == 400
        assert http.post("/api/events", content=b"{", headers=bearer(key)).status_code == 400
        assert http.post("/api/events", json=batch, headers=bearer(wrong_key)).status_code == 401
        assert http.post("/api/events", json=batch, headers={"Authorization": key}).status_code == 401
        assert http.post("/api/events", json=batch, params={"key": key}).status_code == 401
        assert http.post("/api/events", json=batch, params={"key": wrong_key}).status_code == 401


def exercise_stats_api(dashboard: Service, key: str, wrong_key: str) -> None:
    day = {"site": "secrets.example", "from": "2026-11-10", "to": "2026-11-11"}
    with httpx.Client(base_url=f"{dashboard.url}/api/v1", timeout=10) as http:
        assert http.get("/stats/aggregate", params=day, headers=bearer(key)).status_code == 200
        assert http.get("/stats/breakdown", params=day, headers=bearer(key)).status_code == 400  # no `by`
        assert http.get("/stats/aggregate", params=day, headers=bearer(wrong_key)).status_code == 401
        assert http.get("/sessions", params=day, headers={"Authorization": f"Basic {key}"}).status_code == 401
        in_the_url = {**day, "api_key": key}
        assert http.get("/stats/realtime", params=in_the_url).status_code == 401
        assert http.get("/stats/realtime", params=in_the_url, headers=bearer(key)).status_code == 400
        assert http.get("/stats/funnels", headers=bearer(wrong_key)).status_code == 401


def exercise_login(dashboard: Service, password: str, wrong_password: str) -> str:
    """Sign in wrongly, then rightly, use the session, and make a callback fail; the cookie."""
    with httpx.Client(base_url=dashboard.url, timeout=30) as http:
        assert http.post("/login", data={"password": wrong_password}).status_code == 401
        assert http.post("/login?next=/", data={"username": "owner", "password": password}).status_code == 302
        cookie = http.cookies["tally_session"]
        signed_in = {"Cookie": f"tally_session={cookie}"}
        assert http.get("/_dash-layout", headers=signed_in).status_code == 200
        # `filters` is an object on the page; a string makes the callback raise inside, and the
        # dashboard logs the failure with its traceback (the page gets a sentence).
        failing = http.post("/_dash-update-component", headers=signed_in, json=callback("not an object"))
        assert failing.status_code == 200 and "went wrong" in failing.text, failing.text
        assert http.post("/logout", headers=signed_in).status_code == 302
    return cookie


def callback(filters: object) -> dict[str, object]:
    shown = period(DEFAULT_PRESET, datetime.now(UTC)).to_store()
    return {
        "output": "top-metrics.children",
        "outputs": {"id": "top-metrics", "property": "children"},
        "inputs": [
            {"id": "site", "property": "value", "value": "secrets.example"},
            {"id": "period", "property": "data", "value": shown},
            {"id": "filters", "property": "data", "value": filters},
        ],
        "changedPropIds": ["filters.data"],
    }


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


# Long enough that no log holds it by chance, short enough to catch a value cut off (a wide
# repr shortened with "…") or wrapped over lines.
FRAGMENT = 16


def leaked(log: bytes, values: dict[str, str]) -> list[str]:
    """The names of the values of which the log holds any FRAGMENT consecutive characters."""
    return [
        name
        for name, value in values.items()
        if any(value[i : i + FRAGMENT].encode() in log for i in range(max(1, len(value) - FRAGMENT + 1)))
    ]


@pytest.mark.parametrize("provided_by", ["files", "environment"])
def test_no_key_or_password_reaches_a_log(settings: Settings, tmp_path: Path, provided_by: str) -> None:
    environment: dict[str, str] = {}
    if provided_by == "environment":
        given = Secrets.generated()
        environment = {
            "TALLY_INGEST_KEY": given.ingest_key,
            "TALLY_API_KEY": given.api_key,
            "TALLY_DASHBOARD_PASSWORD": given.password,
            "TALLY_DASHBOARD_SESSION_SECRET": given.session_secret,
        }
    wrong = Secrets.generated()
    home = tmp_path / "home"
    home.mkdir()
    blocklist_topic, probe = blocklist_with_a_malformed_record(settings, tmp_path)

    with (
        service_process(
            "collector",
            home,
            environment
            | {
                "TALLY_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
                "TALLY_CLICKHOUSE_URL": settings.clickhouse_url,
                "TALLY_CLICKHOUSE_PASSWORD": settings.resolved_clickhouse_password(),
                "TALLY_COLLECTOR_HOST": "127.0.0.1",
                "TALLY_BLOCKLIST_TOPIC": blocklist_topic,
            },
        ) as collector,
        service_process(
            "dashboard",
            home,
            environment
            | {
                "TALLY_CLICKHOUSE_URL": settings.clickhouse_url,
                "TALLY_CLICKHOUSE_PASSWORD": settings.resolved_clickhouse_password(),
                "TALLY_DASHBOARD_SOURCE": "raw",
            },
        ) as dashboard,
    ):
        right = given if provided_by == "environment" else Secrets.read_from(home)
        exercise_collector(collector, settings, right.ingest_key, wrong.ingest_key)
        exercise_stats_api(dashboard, right.api_key, wrong.api_key)
        cookie = exercise_login(dashboard, right.password, wrong.password)
    # Both processes have stopped: everything they wrote is in the files.

    values = {
        "ingest key": right.ingest_key,
        "API key": right.api_key,
        "dashboard password": right.password,
        "session secret": right.session_secret,
        "session cookie signature": cookie.rsplit(".", 1)[1],
        # Both processes connect to ClickHouse with it (collector: sites and salts; dashboard: queries).
        "ClickHouse password": settings.resolved_clickhouse_password(),
        "wrong ingest key": wrong.ingest_key,
        "wrong API key": wrong.api_key,
        "wrong password": wrong.password,
    }
    logs = {path: path.read_bytes() for path in (collector.log_path, dashboard.log_path)}
    # The files are the processes' output, and the failure path was taken.
    collector_log = logs[collector.log_path]
    assert b"blocklist_record_ignored" in collector_log and probe.encode() in collector_log, collector_log
    assert b"dashboard_listening" in logs[dashboard.log_path], logs[dashboard.log_path][-2000:]
    assert b"dashboard_callback_failed" in logs[dashboard.log_path], logs[dashboard.log_path][-2000:]
    assert b"Traceback" in logs[dashboard.log_path], logs[dashboard.log_path][-2000:]
    for path, log in logs.items():
        assert leaked(log, values) == [], f"{path.name} holds secrets: {leaked(log, values)}"
