"""The walking skeleton, end to end, through the user's own commands:
`tally up -d` → POST /api/event → Kafka → archiver → ClickHouse `events` and Spark's
per-minute counts → `tally query` and the dashboard → `tally status` → `tally down`.

The stack is the one the fault tests share (tests/fault/conftest.py starts it with `tally up -d`):
a second one cost 46-80 s. Its `tally down` test runs after all of theirs."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import httpx
import psutil
import pytest

from ops.local.ports import port_open
from tally.settings import Settings
from tests.fixtures.local_stack import LocalStack, eventually

pytestmark = pytest.mark.integration

SITE = "skeleton.example.com"


def tally(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return LocalStack(env, Settings()).tally(*args, timeout=timeout)


@pytest.fixture(scope="module")
def stack(local_stack: LocalStack) -> dict[str, str]:
    return local_stack.env


def post(collector: str, path: str) -> int:
    response = httpx.post(
        f"{collector}/api/event",
        content=json.dumps({"site": SITE, "url": f"https://{SITE}{path}"}),
        headers={"Content-Type": "text/plain", "User-Agent": "Mozilla/5.0 (X11; Linux x86_64)"},
    )
    return response.status_code


def _count_in_archive(env: dict[str, str]) -> int:
    result = tally(
        env, "query", f"SELECT count() FROM events WHERE site = '{SITE}'", "--format", "csv", timeout=60
    )
    lines = result.stdout.strip().splitlines()
    return int(lines[-1]) if result.returncode == 0 and len(lines) == 2 else -1


def _dashboard_session(env: dict[str, str]) -> str:
    """Sign in as the site owner does, with the password generated into $TALLY_HOME: every
    dashboard callback needs the session. Returned as a Cookie header, because the cookie is
    Secure and httpx keeps Secure cookies off plain-HTTP requests (browsers allow loopback)."""
    password = (Path(env["TALLY_HOME"]) / "dashboard_password").read_text().strip()
    response = httpx.post(
        f"http://127.0.0.1:{env['TALLY_DASHBOARD_PORT']}/login", data={"password": password}, timeout=30
    )
    assert response.status_code == 302, response.text
    return f"tally_session={response.cookies['tally_session']}"  # not the device mark beside it


def _dashboard_total(env: dict[str, str]) -> str:
    """What the dashboard's live callback renders for the site (as the browser would ask for it)."""
    response = httpx.post(
        f"http://127.0.0.1:{env['TALLY_DASHBOARD_PORT']}/_dash-update-component",
        headers={"Cookie": _dashboard_session(env)},
        json={
            "output": "..total-pageviews.children...pageviews-per-minute.figure..",
            "outputs": [
                {"id": "total-pageviews", "property": "children"},
                {"id": "pageviews-per-minute", "property": "figure"},
            ],
            "inputs": [
                {"id": "site", "property": "value", "value": SITE},
                {"id": "refresh", "property": "n_intervals", "value": 1},
            ],
            "changedPropIds": ["site.value"],
        },
        timeout=30,
    )
    response.raise_for_status()
    body = response.json()["response"]
    figure = body["pageviews-per-minute"]["figure"]
    per_minute = sum(sum(trace.get("y", [])) for trace in figure["data"]) if figure.get("data") else 0
    return f"{body['total-pageviews']['children']}|{per_minute}"


def test_event_posted_to_collector_is_archived_counted_and_shown(stack: dict[str, str]) -> None:
    collector = f"http://127.0.0.1:{stack['TALLY_COLLECTOR_PORT']}"
    added = tally(stack, "sites", "add", SITE)
    assert added.returncode == 0, added.stderr
    assert SITE in tally(stack, "sites", "list").stdout.split()
    # The collector picks up new sites within seconds; until then it answers 400.
    eventually(lambda: post(collector, "/") != 400, "the new site accepted", timeout_s=30)
    for path in ("/pricing", "/"):
        assert post(collector, path) == 202

    eventually(lambda: _count_in_archive(stack) == 3, "3 events in `tally query`")
    # The total comes from the raw archive, the per-minute bars from Spark's derived table.
    eventually(lambda: _dashboard_total(stack) == "3|3", "3 page views on the dashboard", timeout_s=120)


def test_status_reports_every_component_healthy(stack: dict[str, str]) -> None:
    result = tally(stack, "status", "--json")
    statuses = {s["name"]: s for s in json.loads(result.stdout)}
    components = {"kafka", "clickhouse", "archiver", "spark", "alerts", "jobs", "collector", "dashboard"}
    assert set(statuses) == components
    assert all(s["healthy"] and s["pid"] for s in statuses.values()), statuses
    assert result.returncode == 0


def test_status_shows_the_archives_audit_against_the_log(stack: dict[str, str]) -> None:
    def archiver_row() -> str:
        # Wide enough that rich keeps each row on one line.
        table = tally(stack | {"COLUMNS": "250"}, "status").stdout
        return next(line for line in table.splitlines() if "archiver" in line)

    eventually(lambda: "archive audits" in archiver_row(), "the archiver's first audit in tally status")
    assert "holes found 0 (0 offsets)" in archiver_row()


def test_query_refuses_writes(stack: dict[str, str]) -> None:
    result = tally(stack, "query", "INSERT INTO events (site) VALUES ('x')")
    assert result.returncode == 2
    assert "only select" in (result.stdout + result.stderr).lower()


def _expected_mode(path: Path, mode: int) -> int:
    if stat.S_ISDIR(mode):
        return 0o700
    if path.suffix == ".jar" and path.parent.name.startswith("userFiles-"):
        # Spark copies each of spark.jars here and chmods the copy a+x itself (Utils.fetchFile):
        # Maven Central's jars, and execute alone lets no other account read them.
        return 0o711
    if "detached" in path.parent.parts:
        # A data part set aside (`tally verify`/the archiver detach a broken one, storage/
        # broken_parts.py): ClickHouse makes a detached part's files read-only for their owner.
        return 0o400
    return 0o600


def _modes_not_private(home: Path) -> list[str]:
    """Paths under `home` (itself included) that are not 0700 folders or 0600 files (or the
    exceptions `_expected_mode` names, none readable by another account)."""
    found = []
    # os.walk, not Path.rglob: a folder Spark deletes mid-walk is skipped instead of raising.
    walked = [Path(root) / name for root, folders, files in os.walk(home) for name in folders + files]
    for path in [home, *walked]:
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            continue  # a temporary file the running stack has renamed or deleted meanwhile
        if stat.S_ISLNK(mode):
            continue
        expected = _expected_mode(path, mode)
        if stat.S_IMODE(mode) != expected:
            found.append(f"{oct(stat.S_IMODE(mode))} {path.relative_to(home)}")
    return found


def test_everything_under_the_home_is_the_operators_alone(stack: dict[str, str]) -> None:
    # After an event went all the way through: Kafka's log, chDB's parts, Spark's checkpoints,
    # every component's and supervisord's logs, the keys and the ClickHouse password all exist.
    home = Path(stack["TALLY_HOME"])
    expected = ["clickhouse_password", "logs/supervisord.log", "logs/clickhouse.log", "logs/spark.log"]
    assert [name for name in expected if not (home / name).is_file()] == []
    assert any((home / "clickhouse").rglob("*.bin")), "chDB has written no data part"
    assert any(home.glob("checkpoints/*/offsets/*")), "Spark has written no checkpoint"

    assert _modes_not_private(home) == []


def test_the_stacks_clickhouse_takes_only_its_generated_password(stack: dict[str, str]) -> None:
    url = stack["TALLY_CLICKHOUSE_URL"]
    password = (Path(stack["TALLY_HOME"]) / "clickhouse_password").read_text().strip()
    statuses = json.loads(tally(stack, "status", "--json").stdout)
    processes = [psutil.Process(s["pid"]) for s in statuses if s["pid"]]
    processes += [child for process in processes for child in process.children(recursive=True)]
    command_lines = [line for process in processes if (line := _command_line(process))]

    anonymous = httpx.post(url, content="SELECT 1")
    with_password = httpx.post(url, content="SELECT 1", auth=("default", password))

    assert (anonymous.status_code, with_password.text) == (403, "1\n")
    # Children get it from $TALLY_HOME, never on a command line (visible to every local user).
    assert [line for line in command_lines if password in line] == []
    assert password not in (Path(stack["TALLY_HOME"]) / "supervisord.conf").read_text()


def _command_line(process: psutil.Process) -> str:
    """The process's command line; empty for one that ended meanwhile (Spark's short-lived
    Python workers come and go)."""
    try:
        return " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return ""


def test_down_leaves_no_process_or_port_behind(stack: dict[str, str]) -> None:
    statuses = json.loads(tally(stack, "status", "--json").stdout)
    pids = [s["pid"] for s in statuses if s["pid"]]
    children = [child.pid for pid in pids for child in psutil.Process(pid).children(recursive=True)]
    ports = [s["port"] for s in statuses if s["port"]] + [int(stack["TALLY_KAFKA_CONTROLLER_PORT"])]

    result = tally(stack, "down")

    assert result.returncode == 0, result.stderr
    assert [
        pid for pid in pids + children if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
    ] == []
    assert [port for port in ports if port_open(port)] == []
    assert tally(stack, "status").returncode == 1
