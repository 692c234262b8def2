"""Issue 29, findings 4 and 5: one request must not hold the server or the store every tenant shares.

- 4: the dashboard's period comes back from the browser (a dcc.Store); a shared-link visitor
  who forges it (minutes over a century, or since 2000) gets a bounded chart or a sentence,
  never the unbounded query (dashboard/periods.py, `Period.from_store` / `bounded`; the cap is
  the query layer's MAX_BUCKETS, the API's too).
- 5: regular expressions in filters are bounded in number, length and cost on every door
  (storage/queries/contract.py, check_patterns); every query the dashboard server sends runs
  under ClickHouse's time, memory and size limits (storage/query_limits.py), and a query stopped
  by one answers a sentence, not a 500, on a server that keeps serving.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from dashboard.periods import DEFAULT_PRESET, period
from dashboard.store import thread_local_clients
from storage import queries
from storage.query_limits import stats_limits
from tally.settings import Settings
from tests.fixtures.dashboard_server import DashboardServer, server_environment
from tests.fixtures.ports import free_port
from tests.fixtures.service_process import running_module
from tests.security.conftest import Tenants, bearer, opened_share

pytestmark = pytest.mark.integration

CALLBACK = "/_dash-update-component"
# Patterns RE2 compiles (so the old check let them through) whose programs are large: every
# event of the range runs through thousands of instructions, per pattern, per value.
COSTLY_PATTERNS = [".{1,1000}x", "((a|b|c|d)?){200}x", "/" + "a" * 300]


def shared_browser(tenants: Tenants) -> httpx.Client:
    """A browser that opened A's shared link. Its session cookie is Secure (browsers send those
    to loopback over plain HTTP, httpx does not), so it is sent as the browser would."""
    browser = opened_share(tenants.server, tenants.share_a)
    browser.headers["Cookie"] = f"tally_session={browser.cookies['tally_session']}"
    return browser


def main_chart(site: str, period_data: dict[str, str]) -> dict[str, object]:
    """The Overview chart's callback as the page posts it, with the period the browser holds."""
    return {
        "output": "main-chart.figure",
        "outputs": {"id": "main-chart", "property": "figure"},
        "inputs": [
            {"id": "site", "property": "value", "value": site},
            {"id": "period", "property": "data", "value": period_data},
            {"id": "filters", "property": "data", "value": {}},
            {"id": "chart-metric", "property": "value", "value": "visitors"},
        ],
        "changedPropIds": ["period.data"],
    }


def forged(start: str, interval: str = "minute") -> dict[str, str]:
    """A period store from `start` until now, with `interval` buckets: what a page never sends."""
    chosen = period(DEFAULT_PRESET, datetime.now(UTC)).to_store()
    return chosen | {
        "start": start, "previous_start": start, "previous_end": chosen["end"], "interval": interval
    }  # fmt: skip


def points(figure: dict) -> int:
    """How many buckets a Plotly figure's traces draw (lists, or plotly's typed arrays)."""
    total = 0
    for trace in figure.get("data", []):
        x = trace.get("x") or []
        if isinstance(x, dict):  # {"dtype": "f8", "bdata": base64}
            itemsize = int("".join(ch for ch in x["dtype"] if ch.isdigit()) or 8)
            total += len(base64.b64decode(x["bdata"])) // itemsize
        else:
            total += len(x)
    return total


def text_of(figure: dict) -> str:
    return " ".join(note.get("text", "") for note in figure.get("layout", {}).get("annotations", []))


def test_shared_link_forging_a_century_of_minutes_gets_a_sentence_not_a_query(tenants: Tenants) -> None:
    """Minutes over 4 years took 186 s and 1.5 GB; over a century, the process. A period
    outside the dashboard's bounds is refused by name before any query."""
    with closing(shared_browser(tenants)) as browser:
        answer = browser.post(CALLBACK, json=main_chart(tenants.site_a, forged("1926-01-01T00:00:00+00:00")))
        assert answer.status_code == 200, answer.text[:300]
        figure = answer.json()["response"]["main-chart"]["figure"]
        assert points(figure) == 0
        assert "period: dates between 2000" in text_of(figure), text_of(figure)
        # and the server still answers the link's own page
        assert browser.get(tenants.share_a.path()).status_code == 200


def test_shared_link_forging_minutes_since_2000_gets_a_chart_within_the_cap(tenants: Tenants) -> None:
    """Inside the bounds, a forged interval is coarsened until the buckets are at most the API's
    cap: the chart is drawn by days, not by 14 million minutes."""
    with closing(shared_browser(tenants)) as browser:
        answer = browser.post(CALLBACK, json=main_chart(tenants.site_a, forged("2000-01-01T00:00:00+00:00")))
        assert answer.status_code == 200, answer.text[:300]
        figure = answer.json()["response"]["main-chart"]["figure"]
        drawn = points(figure)
        assert 0 < drawn <= 2 * queries.MAX_BUCKETS, (drawn, text_of(figure))  # current and compared


def test_shared_link_forging_a_period_that_is_none_gets_a_sentence(tenants: Tenants) -> None:
    with closing(shared_browser(tenants)) as browser:
        for broken in ({"start": "yesterday"}, {"interval": "second"}, {"timezone": "Mars/Olympus"}):
            body = main_chart(tenants.site_a, forged("2026-01-01T00:00:00+00:00", "day") | broken)
            answer = browser.post(CALLBACK, json=body)
            assert answer.status_code == 200, answer.text[:300]
            assert "period" in text_of(answer.json()["response"]["main-chart"]["figure"]), broken


def choose_period(site: str, start: str, end: str) -> dict[str, object]:
    """The period picker's callback with the custom range's days as the browser sends them."""
    return {
        "output": "..period.data...custom-range-box.style...period-label.children..",
        "outputs": [
            {"id": "period", "property": "data"},
            {"id": "custom-range-box", "property": "style"},
            {"id": "period-label", "property": "children"},
        ],
        "inputs": [
            {"id": "preset", "property": "value", "value": "custom"},
            {"id": "custom-range", "property": "start_date", "value": start},
            {"id": "custom-range", "property": "end_date", "value": end},
            {"id": "clock", "property": "n_intervals", "value": 1},
            {"id": "site", "property": "value", "value": site},
            {"id": "compare", "property": "value", "value": "previous_period"},
        ],
        "state": [{"id": "period", "property": "data", "value": None}],
        "changedPropIds": ["custom-range.start_date"],
    }


@pytest.mark.parametrize(("start", "end"), [("0001-01-01", "9999-12-31"), ("1900-01-01", "2026-01-01")])
def test_shared_link_picking_a_custom_range_outside_the_bounds_gets_the_default_range_and_a_sentence(
    tenants: Tenants, start: str, end: str
) -> None:
    with closing(shared_browser(tenants)) as browser:
        answer = browser.post(CALLBACK, json=choose_period(tenants.site_a, start, end))
        assert answer.status_code == 200, answer.text[:300]
        chosen = answer.json()["response"]
        stored = chosen["period"]["data"]
        days = datetime.fromisoformat(stored["end"]) - datetime.fromisoformat(stored["start"])
        assert days.days <= 7, stored  # the default range, not a century
        assert "a custom range is between 2000-01-01" in json.dumps(chosen["period-label"]), chosen


def test_shared_link_picking_a_day_that_is_none_gets_the_default_range(tenants: Tenants) -> None:
    with closing(shared_browser(tenants)) as browser:
        answer = browser.post(CALLBACK, json=choose_period(tenants.site_a, "not a day", "2026-13-45"))
        assert answer.status_code == 200, answer.text[:300]
        stored = answer.json()["response"]["period"]["data"]
        length = datetime.fromisoformat(stored["end"]) - datetime.fromisoformat(stored["start"])
        assert length <= timedelta(days=7), stored


def v1_aggregate(tenants: Tenants, filters: object) -> httpx.Response:
    return httpx.get(
        f"{tenants.server.url}/api/v1/stats/aggregate",
        params={"site": tenants.site_a, "period": "30d", "filters": json.dumps(filters)},
        headers=bearer(tenants.viewer_a.read_key),
        timeout=30,
    )


def v2_query(tenants: Tenants, filters: object) -> httpx.Response:
    return httpx.post(
        f"{tenants.server.url}/api/v2/query",
        json={"site_id": tenants.site_a, "metrics": ["visitors"], "date_range": "30d", "filters": filters},
        headers=bearer(tenants.viewer_a.read_key),
        timeout=30,
    )


@pytest.mark.parametrize("pattern", COSTLY_PATTERNS)
def test_a_costly_regular_expression_is_refused_naming_the_filter(tenants: Tenants, pattern: str) -> None:
    v1 = v1_aggregate(tenants, [["matches", "path", [pattern]]])
    assert v1.status_code == 400, v1.text[:300]
    assert v1.json()["error"].startswith("filters: "), v1.json()
    v2 = v2_query(tenants, [["matches", "event:page", [pattern]]])
    assert v2.status_code == 400, v2.text[:300]
    assert "filters" in v2.json()["error"], v2.json()


def test_fifty_regular_expressions_in_one_request_are_refused(tenants: Tenants) -> None:
    many = [["matches", "path", [f"^/p{i}"]] for i in range(50)]
    v1 = v1_aggregate(tenants, many)
    assert v1.status_code == 400, v1.text[:300]
    assert v1.json()["error"].startswith("filters: at most 5 regular expressions"), v1.json()
    # one condition holding fifty, or them split between event and visit filters, count the same
    split = [
        ["matches", "event:page", [f"^/p{i}" for i in range(25)]],
        ["matches", "visit:source", [f"s{i}" for i in range(25)]],
    ]
    v2 = v2_query(tenants, split)
    assert v2.status_code == 400, v2.text[:300]
    assert "at most 5 regular expressions" in v2.json()["error"], v2.json()


def test_a_few_plain_regular_expressions_still_answer(tenants: Tenants) -> None:
    plain = [["matches", "path", ["^/blog/[a-z0-9-]+/?$", "(?i)^/(en|de|fr)/docs/.*"]]]
    assert v1_aggregate(tenants, plain).status_code == 200
    assert v2_query(tenants, [["matches", "event:page", ["^/blog/"]]]).status_code == 200


def test_every_query_of_the_dashboard_server_carries_the_limits(dashboard_settings: Settings) -> None:
    """The dashboard server's clients (one per thread, every door's) send the limits with each
    query: ClickHouse itself reports them as the query's settings."""
    client = thread_local_clients(dashboard_settings)()
    limits = stats_limits(dashboard_settings)
    names = list(limits)
    row = client.query(
        "SELECT " + ", ".join(f"toString(getSetting('{name}'))" for name in names)
    ).result_rows[0]
    seen = dict(zip(names, row, strict=True))
    assert float(seen["max_execution_time"]) == dashboard_settings.stats_query_timeout_s == 10
    assert seen["timeout_overflow_mode"] == "throw"
    assert int(seen["max_memory_usage"]) == dashboard_settings.stats_query_memory_bytes
    assert int(seen["max_result_rows"]) == limits["max_result_rows"]
    assert seen["result_overflow_mode"] == "throw"
    assert int(seen["max_rows_to_group_by"]) == limits["max_rows_to_group_by"]


@pytest.fixture(scope="module")
def impatient_server(dashboard_settings: Settings, tenants: Tenants) -> Iterator[DashboardServer]:
    """The real dashboard server on the same store with a limit every query passes (a
    microsecond), as a query that ran past the real 10 s would."""
    port = free_port()
    home = dashboard_settings.home_dir
    environment = server_environment(dashboard_settings, port, TALLY_STATS_QUERY_TIMEOUT_S="0.000001")
    url, log_path = f"http://127.0.0.1:{port}", home / "impatient-dashboard.log"
    with running_module("dashboard.app", environment, log_path, f"{url}/healthz"):
        yield DashboardServer(url, tenants.server.api_key, tenants.server.password, log_path)


def test_a_query_past_its_time_limit_answers_a_sentence_and_the_server_keeps_serving(
    impatient_server: DashboardServer, tenants: Tenants
) -> None:
    operator = bearer(impatient_server.api_key)
    with httpx.Client(base_url=impatient_server.url, timeout=30) as http:
        asked = {"site": tenants.site_a, "period": "7d"}
        v1 = http.get("/api/v1/stats/aggregate", params=asked, headers=operator)
        assert v1.status_code == 503, v1.text[:300]
        assert "took longer than the time a query may take" in v1.json()["error"], v1.json()
        v2 = http.post(
            "/api/v2/query",
            json={"site_id": tenants.site_a, "metrics": ["visitors"], "date_range": "7d"},
            headers=operator,
        )
        assert v2.status_code == 503, v2.text[:300]
        assert v2.json()["error"].startswith("The query took longer than the time a query may take"), (
            v2.json()
        )
        assert http.get("/healthz").status_code == 200
    # The log says the queries were stopped, not that the store is down (which pages an operator).
    logged = impatient_server.log_path.read_text()
    assert "stats_api_query_stopped" in logged and "plausible_api_query_stopped" in logged, logged[-2000:]
    assert "store_unavailable" not in logged, logged[-2000:]
