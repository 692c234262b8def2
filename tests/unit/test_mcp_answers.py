"""What `tally mcp` makes of the dashboard's answers (mcp_server/api.py, mcp_server/tools.py) and
what `POST /api/v1/query` takes (dashboard/http_api/sql_query.py): rows cut with a note, an API
refusal as a tool error with its status and message, a dashboard that is not there in one line.
The API answers here come from httpx's MockTransport; the real server: tests/integration/
test_mcp_server.py."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from uuid import UUID

import httpx
import pytest
from mcp.server.mcpserver.exceptions import ToolError

from dashboard.http_api import sql_query
from dashboard.http_api.parameters import BadParameter
from mcp_server.api import TallyApi
from mcp_server.serve import has_bearer
from mcp_server.settings import McpSettings, MissingKey, stdio_key
from mcp_server.tools import bounded
from tally.settings import Settings

SETTINGS = McpSettings(api_url="http://dashboard.test", timeout_s=5, max_rows=3, host="127.0.0.1", port=8060)


def api_answering(status: int, body: object) -> TallyApi:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["Authorization"] == "Bearer the-key"
        return httpx.Response(status, json=body)

    return TallyApi(SETTINGS, httpx.MockTransport(handler))


def test_a_list_longer_than_the_cap_is_cut_and_says_so() -> None:
    cut = bounded([{"value": n} for n in range(10)], 3)
    assert cut["results"] == [{"value": 0}, {"value": 1}, {"value": 2}]
    assert "first 3 rows of 10" in cut["note"] and "TALLY_MCP_MAX_ROWS" in cut["note"]


def test_rows_under_results_or_sites_are_cut_and_the_rest_kept() -> None:
    cut = bounded({"results": list(range(5)), "meta": {"source": "raw"}}, 3)
    assert cut["results"] == [0, 1, 2] and cut["meta"] == {"source": "raw"} and "note" in cut
    assert bounded({"pageviews": 7}, 3) == {"pageviews": 7}
    assert bounded([1, 2, 3], 3) == {"results": [1, 2, 3]}  # one object: an MCP list is a block per item
    assert bounded([], 3) == {"results": []}


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (400, "400 refused"),
        (401, "401 key refused"),
        (403, "403 not allowed"),
        (404, "404 not found"),
        (429, "429 too many requests"),
    ],
)
def test_an_api_refusal_is_a_tool_error_with_its_status_and_message(status: int, words: str) -> None:
    api = api_answering(status, {"error": "site: this API key may not read b.example.com"})
    with pytest.raises(ToolError) as refused:
        asyncio.run(api.get("the-key", "/api/v1/stats/aggregate", {"site": "b.example.com"}))
    assert str(refused.value) == f"{words}: site: this API key may not read b.example.com"


def test_a_dashboard_not_listening_is_one_line() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    api = TallyApi(SETTINGS, httpx.MockTransport(refuse))
    with pytest.raises(ToolError) as refused:
        asyncio.run(api.get("the-key", "/api/v1/sites", {}))
    assert str(refused.value) == (
        "the dashboard at http://dashboard.test is not reachable; is Tally running (tally up)?"
    )


def test_only_the_read_only_routes_are_posted_to() -> None:
    with pytest.raises(ValueError, match="not a read-only route"):
        asyncio.run(api_answering(200, {}).post("the-key", "/api/v1/sites", {"domain": "x.example.com"}))


def test_stdio_needs_its_key_set_explicitly() -> None:
    with pytest.raises(MissingKey, match="TALLY_MCP_KEY is not set"):
        stdio_key(Settings(mcp_key="", api_key="the-operators"))
    assert stdio_key(Settings(mcp_key=" a-members-key ")) == "a-members-key"


def test_an_http_request_without_a_bearer_is_told_apart() -> None:
    assert has_bearer({"headers": [(b"authorization", b"Bearer k")]})
    assert not has_bearer({"headers": [(b"authorization", b"Basic k")]})
    assert not has_bearer({"headers": [(b"authorization", b"Bearer ")]})
    assert not has_bearer({"headers": []})


def test_the_sql_body_is_checked_field_by_field() -> None:
    assert sql_query.parse({"sql": "SELECT 1"}) == ("SELECT 1", sql_query.DEFAULT_ROWS)
    assert sql_query.parse({"sql": "SELECT 1", "limit": 5}) == ("SELECT 1", 5)
    for body, field in [
        ([], "body"),
        ({}, "sql"),
        ({"sql": "  "}, "sql"),
        ({"sql": "SELECT 1", "limit": 0}, "limit"),
        ({"sql": "SELECT 1", "limit": True}, "limit"),
        ({"sql": "SELECT 1", "format": "CSV"}, "format"),
    ]:
        with pytest.raises(BadParameter) as refused:
            sql_query.parse(body)
        assert refused.value.field == field


def test_result_cells_become_json() -> None:
    moment = datetime(2026, 11, 20, 12, tzinfo=UTC)
    ident = UUID(int=1)
    assert sql_query.cell(moment) == "2026-11-20T12:00:00+00:00"
    assert sql_query.cell(ident) == str(ident)
    assert sql_query.cell({"plan": "pro"}) == {"plan": "pro"}
    assert sql_query.cell([1, "a", None]) == [1, "a", None]
