"""`tally mcp` (mcp_server/, issue 37) through the MCP SDK's own client, against the real dashboard
server (`python -m dashboard.app` under waitress, the `dashboard_server` fixture) and the real
ClickHouse engine: over stdio (the client spawns `python -m ops.cli mcp`, what `tally mcp` runs)
and over streamable HTTP (`python -m mcp_server --transport http` on a free port).

The tenants are the adversarial suite's (tests/security/conftest.py): site A with an owner and a
viewer, site B with an admin, each with a read key; the operator's key reads everything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from mcp_server.serve import MAX_BODY_BYTES
from storage.client import connect
from storage.rollup_backfill import backfill_rollups
from tally.settings import PROJECT_ROOT, Settings
from tests.fixtures.caddy import deploy_caddyfile
from tests.fixtures.events import START, archive_rows, page_view
from tests.fixtures.kafka import stop_process
from tests.fixtures.ports import free_port, wait_for_port
from tests.security.conftest import Tenants, bearer
from tests.security.conftest import tenants as tenants  # the module-scoped fixture, shared

pytestmark = pytest.mark.integration

TOOLS = {
    "list_sites",
    "aggregate",
    "timeseries",
    "breakdown",
    "goals",
    "funnel",
    "realtime",
    "provenance",
    "plausible_query",
    "sql",
}
RANGE = {"date_from": START.date().isoformat(), "date_to": (START + timedelta(days=1)).date().isoformat()}
PAGES = 12  # distinct paths on site A: more than the row cap below
MAX_ROWS = 5


def mcp_environment(home: Path, api_url: str, **more: str) -> dict[str, str]:
    """What the MCP server process is given: this checkout first on the path, its own home, the
    dashboard's URL, a small row cap; no TALLY_ setting of the test run."""
    return {
        "PYTHONPATH": str(PROJECT_ROOT),
        "TALLY_HOME": str(home),
        "TALLY_MCP_API_URL": api_url,
        "TALLY_MCP_MAX_ROWS": str(MAX_ROWS),
        "TALLY_MCP_TIMEOUT_S": "60",
        **more,
    }


@pytest.fixture(scope="module")
def site_a_events(tenants: Tenants, dashboard_settings: Settings) -> int:
    """Site A's page views in the archive (30, over PAGES paths and 9 visitors); B has none."""
    events = [
        page_view(tenants.site_a, f"v{i % 9:015d}", START + timedelta(minutes=i), f"/page-{i % PAGES}")
        for i in range(30)
    ]
    rows, columns = archive_rows(events)
    client = connect(dashboard_settings)
    client.insert("events", rows, column_names=columns)
    # The derived tables as the stream jobs would have them (`source=agg`, the API's default).
    backfill_rollups(client, tenants.site_a, START.date(), START.date() + timedelta(days=1))
    return len(events)


@pytest.fixture(scope="module")
def mcp_http_url(tenants: Tenants, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`python -m mcp_server --transport http` on a free port; it holds no key of its own."""
    port = free_port()
    home = tmp_path_factory.mktemp("mcp-http-home")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TALLY_")}
    environment |= mcp_environment(home, tenants.server.url, TALLY_MCP_PORT=str(port))
    log = (home / "mcp.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_server", "--transport", "http"],
        env=environment,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(port, 60, "tally mcp --transport http")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)
        log.close()


@asynccontextmanager
async def over_stdio(key: str, api_url: str, home: Path) -> AsyncIterator[Client]:
    """The SDK's client on `tally mcp` (stdio), spawned with `key` as TALLY_MCP_KEY."""
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ops.cli", "mcp"],
        env=mcp_environment(home, api_url, TALLY_MCP_KEY=key),
        cwd=str(PROJECT_ROOT),
    )
    async with Client(parameters) as client:
        yield client


@asynccontextmanager
async def over_http(url: str, key: str) -> AsyncIterator[Client]:
    """The SDK's client on the streamable HTTP server, every request with `key` as its Bearer."""
    async with (
        httpx2.AsyncClient(headers=bearer(key), timeout=httpx2.Timeout(60, read=300)) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


def answer(result: CallToolResult) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def refusal(result: CallToolResult) -> str:
    assert result.is_error, result.content
    return result.content[0].text


async def test_the_tools_are_listed_read_only_over_stdio_and_http(
    tenants: Tenants, mcp_http_url: str, tmp_path: Path
) -> None:
    async with over_stdio(tenants.viewer_a.read_key, tenants.server.url, tmp_path) as client:
        listed = (await client.list_tools()).tools
    assert {tool.name for tool in listed} == TOOLS
    assert all(tool.annotations and tool.annotations.read_only_hint for tool in listed)
    assert all(tool.description for tool in listed)
    async with over_http(mcp_http_url, tenants.operator_key) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS


async def test_aggregate_over_mcp_is_the_stats_apis_number_for_the_same_question(
    tenants: Tenants, site_a_events: int, mcp_http_url: str, tmp_path: Path
) -> None:
    question = {"site": tenants.site_a, "from": RANGE["date_from"], "to": RANGE["date_to"]}
    expected = httpx.get(
        f"{tenants.server.url}/api/v1/stats/aggregate", params=question, headers=bearer(tenants.operator_key)
    ).json()
    assert expected["pageviews"] == site_a_events
    arguments = {"site": tenants.site_a, **RANGE}
    async with over_http(mcp_http_url, tenants.operator_key) as client:
        assert answer(await client.call_tool("aggregate", arguments)) == expected
    async with over_stdio(tenants.owner_a.read_key, tenants.server.url, tmp_path) as client:
        assert answer(await client.call_tool("aggregate", arguments)) == expected
        v2 = answer(
            await client.call_tool(
                "plausible_query",
                {"site_id": tenants.site_a, "metrics": ["pageviews"], "date_range": list(RANGE.values())},
            )
        )
    # Plausible's date_range is whole days, inclusive: the day of START and the next, all 30 events.
    assert v2["results"][0]["metrics"] == [site_a_events]


async def test_a_key_of_another_site_is_refused_with_the_apis_message(
    tenants: Tenants, site_a_events: int, mcp_http_url: str
) -> None:
    async with over_http(mcp_http_url, tenants.admin_b.read_key) as client:
        refused = refusal(await client.call_tool("aggregate", {"site": tenants.site_a, **RANGE}))
        assert "403" in refused and f"may not read {tenants.site_a}" in refused
        refused = refusal(
            await client.call_tool(
                "plausible_query", {"site_id": tenants.site_a, "metrics": ["visitors"], "date_range": "7d"}
            )
        )
        assert "403" in refused and "Traceback" not in refused
        sites = answer(await client.call_tool("list_sites", {}))
    assert [site["domain"] for site in sites["sites"]] == [tenants.site_b]


async def test_a_viewers_key_reads_its_site_and_rows_are_capped(
    tenants: Tenants, site_a_events: int, mcp_http_url: str
) -> None:
    async with over_http(mcp_http_url, tenants.viewer_a.read_key) as client:
        by_page = answer(
            await client.call_tool("breakdown", {"site": tenants.site_a, "by": "path", "limit": 50, **RANGE})
        )
        series = answer(
            await client.call_tool("timeseries", {"site": tenants.site_a, "interval": "hour", **RANGE})
        )
        provenance = answer(await client.call_tool("provenance", {"site": tenants.site_a, **RANGE}))
        live = answer(await client.call_tool("realtime", {"site": tenants.site_a}))
    assert len(by_page["results"]) == MAX_ROWS and f"at most {MAX_ROWS} rows" in by_page["note"]
    assert len(series["results"]) == MAX_ROWS and "24" in series["note"]  # 24 hourly buckets, 5 shown
    assert provenance["figure"]["pageviews"] == site_a_events
    assert provenance["meta"]["source"] in ("agg", "raw")
    assert "visitors" in live


async def test_funnel_goals_and_a_v2_breakdown_are_the_apis_answers(
    tenants: Tenants, site_a_events: int, mcp_http_url: str
) -> None:
    steps = [{"page": "/page-0"}, {"page": "/page-1"}]
    question = {"site": tenants.site_a, "from": RANGE["date_from"], "to": RANGE["date_to"]}
    api = httpx.Client(base_url=tenants.server.url, headers=bearer(tenants.viewer_a.read_key))
    expected_funnel = api.get("/api/v1/stats/funnel", params=question | {"steps": json.dumps(steps)}).json()
    expected_goals = api.get("/api/v1/stats/goals", params=question).json()
    async with over_http(mcp_http_url, tenants.viewer_a.read_key) as client:
        funnel = answer(await client.call_tool("funnel", {"site": tenants.site_a, "steps": steps, **RANGE}))
        goals = answer(await client.call_tool("goals", {"site": tenants.site_a, **RANGE}))
        by_page = answer(
            await client.call_tool(
                "plausible_query",
                {
                    "site_id": tenants.site_a,
                    "metrics": ["pageviews"],
                    "date_range": list(RANGE.values()),
                    "dimensions": ["event:page"],
                },
            )
        )
        wrong = refusal(
            await client.call_tool("funnel", {"site": tenants.site_a, "steps": steps[:1], **RANGE})
        )
    # The steps' numbers; meta.funnel_days differs by design: the first call stored the closed day.
    assert funnel["steps"] == expected_funnel["steps"] and funnel["steps"][0]["visitors"] > 0
    assert goals["results"] == expected_goals  # a list answer comes as one object's results
    assert len(by_page["results"]) == MAX_ROWS and "at most" in by_page["note"]  # 12 pages, 5 shown
    assert "400 refused: steps:" in wrong  # the API's own words, naming the parameter


async def test_sql_is_the_operators_a_members_key_is_refused(tenants: Tenants, mcp_http_url: str) -> None:
    for key in (tenants.viewer_a.read_key, tenants.owner_a.manage_key):
        async with over_http(mcp_http_url, key) as client:
            refused = refusal(await client.call_tool("sql", {"sql": "SELECT count() FROM events"}))
        assert "403" in refused and "operator" in refused


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM file('/etc/passwd')",
        "INSERT INTO events (site) VALUES ('x')",
        "SELECT 1; DROP TABLE events",
        "SELECT count() FROM events INTO OUTFILE '/tmp/escaped.csv'",
        "SELECT * FROM salts",
    ],
)
async def test_sql_guard_refuses_an_escape_even_for_the_operator(
    tenants: Tenants, site_a_events: int, mcp_http_url: str, sql: str
) -> None:
    async with over_http(mcp_http_url, tenants.operator_key) as client:
        refused = refusal(await client.call_tool("sql", {"sql": sql}))
    assert refused.split("Error executing tool sql: ")[-1].startswith("400 refused: ")
    # The archive is as it was: the guard refused before anything ran.
    rows = httpx.get(
        f"{tenants.server.url}/api/v1/stats/aggregate",
        params={"site": tenants.site_a, "from": RANGE["date_from"], "to": RANGE["date_to"]},
        headers=bearer(tenants.operator_key),
    ).json()
    assert rows["pageviews"] == site_a_events


async def test_sql_answers_the_operator_capped(tenants: Tenants, site_a_events: int, tmp_path: Path) -> None:
    site = tenants.site_a
    sql = f"SELECT path, count() AS views FROM events WHERE site = '{site}' GROUP BY path ORDER BY path"
    async with over_stdio(tenants.operator_key, tenants.server.url, tmp_path) as client:
        result = answer(await client.call_tool("sql", {"sql": sql}))
    assert result["columns"] == ["path", "views"]
    assert result["row_count"] == MAX_ROWS and result["truncated"] and "at most" in result["note"]


@pytest.fixture(scope="module")
def deploy_front(
    tenants: Tenants, mcp_http_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """deploy/Caddyfile (docker-compose.yml's proxy) in front of the dashboard and the MCP server."""
    upstreams = {
        "dashboard:8050": tenants.server.url.removeprefix("http://"),
        "mcp:8060": mcp_http_url.removeprefix("http://").removesuffix("/mcp"),
    }
    with deploy_caddyfile(tmp_path_factory.mktemp("mcp-caddy"), upstreams) as front:
        yield front.url


async def test_behind_the_deploy_proxy_mcp_answers_at_slash_mcp_and_the_dashboard_elsewhere(
    tenants: Tenants, site_a_events: int, deploy_front: str
) -> None:
    # What an assistant is given in production: https://$TALLY_DASHBOARD_DOMAIN/mcp.
    arguments = {"site": tenants.site_a, **RANGE}
    async with over_http(f"{deploy_front}/mcp", tenants.viewer_a.read_key) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
        assert answer(await client.call_tool("aggregate", arguments))["pageviews"] == site_a_events
        refused = refusal(await client.call_tool("aggregate", {**arguments, "site": tenants.site_b}))
        assert "403" in refused and f"may not read {tenants.site_b}" in refused
    # The MCP server's own refusal, through the proxy; the dashboard's pages are still the dashboard's.
    refused = httpx.post(f"{deploy_front}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert refused.status_code == 401 and "Bearer" in refused.json()["error"]
    assert httpx.get(f"{deploy_front}/login").status_code == 200
    assert httpx.get(f"{deploy_front}/mcpx").status_code != 401  # /mcp and /mcp/… only


async def test_streamable_http_without_a_bearer_is_401(mcp_http_url: str) -> None:
    refused = httpx.post(
        mcp_http_url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert refused.status_code == 401 and "Bearer" in refused.json()["error"]


async def test_a_body_over_a_mib_is_413_declared_or_streamed(mcp_http_url: str) -> None:
    # Through the real server (uvicorn): never read whole into memory, with or without a length.
    headers = {"Authorization": "Bearer any", "Content-Type": "application/json"}
    big = b"[" + b"1," * (MAX_BODY_BYTES // 2) + b"1]"
    declared = httpx.post(mcp_http_url, content=big, headers=headers, timeout=30)
    assert declared.status_code == 413 and "body: over" in declared.json()["error"]

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(big), 64 * 1024):
            yield big[start : start + 64 * 1024]

    streamed = httpx.post(mcp_http_url, content=chunks(), headers=headers, timeout=30)
    assert streamed.status_code == 413 and "body: over" in streamed.json()["error"]


async def test_a_dashboard_not_reachable_is_one_line(tenants: Tenants, tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    async with over_stdio(tenants.viewer_a.read_key, closed, tmp_path) as client:
        refused = refusal(await client.call_tool("list_sites", {}))
    assert f"the dashboard at {closed} is not reachable" in refused and "\n" not in refused


def test_tally_mcp_without_a_key_says_so_in_one_line(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TALLY_")}
    environment |= mcp_environment(tmp_path, "http://127.0.0.1:1")
    done = subprocess.run(
        [sys.executable, "-m", "ops.cli", "mcp"],
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert "TALLY_MCP_KEY is not set" in done.stderr
