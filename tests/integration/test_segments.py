"""Saved segments as a site owner keeps them (`tally segments`, the real CLI and store) and as
Plausible's v2 API applies them (`["is", "segment", [id]]` answers what the segment's own filters
answer)."""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.events import archive_rows, page_view
from tests.integration.test_cli_errors import one_line_error

pytestmark = pytest.mark.integration

SITE = "segments.example.com"
DAY = datetime(2026, 11, 10, tzinfo=UTC)
GERMAN_BLOG = [["is", "visit:country", ["DE"]], ["contains", "event:page", ["/blog"]]]


@pytest.fixture(scope="module")
def store(dashboard_settings: Settings) -> Client:
    client = connect(dashboard_settings)
    events = [
        page_view(SITE, "a", DAY + timedelta(hours=1), "/blog/one", country="DE"),
        page_view(SITE, "a", DAY + timedelta(hours=1, minutes=1), "/pricing", country="DE"),
        page_view(SITE, "b", DAY + timedelta(hours=2), "/blog/two", country="DE"),
        page_view(SITE, "c", DAY + timedelta(hours=3), "/blog/one", country="FR"),
    ]
    rows, columns = archive_rows(events)
    client.insert("events", rows, column_names=columns)
    add_site(client, SITE)
    return client


@pytest.fixture(scope="module")
def env(dashboard_settings: Settings, store: Client) -> dict[str, str]:
    return os.environ | dashboard_settings.environment()


def tally(env: dict[str, str], *args: str) -> str:
    answer = run_tally(env, *args, timeout=120)
    assert answer.returncode == 0, answer.stderr
    return answer.stdout


@pytest.fixture(scope="module")
def segment_id(env: dict[str, str]) -> int:
    added = tally(env, "segments", "add", SITE, "German blog readers", json.dumps(GERMAN_BLOG))
    found = re.search(r"id (\d+)", added)
    assert found, added
    return int(found[1])


def query(api: FlaskClient, settings: Settings, filters: list[Any]) -> tuple[int, Any]:
    response = api.post(
        "/api/v2/query",
        json={"site_id": SITE, "metrics": ["visitors", "pageviews"],
              "date_range": ["2026-11-10", "2026-11-10"], "filters": filters},
        headers={"Authorization": f"Bearer {settings.resolved_api_key()}"},
    )  # fmt: skip
    return response.status_code, response.get_json()


def test_list_and_remove(env: dict[str, str], segment_id: int) -> None:
    assert tally(env, "segments", "list", SITE).splitlines() == [
        f"{segment_id}\tGerman blog readers\t{json.dumps(GERMAN_BLOG)}"
    ]
    tally(env, "segments", "add", SITE, "Safari", '[["is", "visit:browser", ["Safari"]]]')
    assert "removed segment 'Safari'" in tally(env, "segments", "remove", SITE, "Safari")
    assert "Safari" not in tally(env, "segments", "list", SITE)


def test_v2_segment_filter_answers_what_its_filters_answer(
    dashboard_settings: Settings, store: Client, segment_id: int
) -> None:
    api = build_app(dashboard_settings).server.test_client()
    status, inline = query(api, dashboard_settings, GERMAN_BLOG)
    assert status == 200 and inline["results"][0]["metrics"] == [2, 2]
    status, segmented = query(api, dashboard_settings, [["is", "segment", [segment_id]]])
    assert status == 200 and segmented["results"] == inline["results"]
    status, unknown = query(api, dashboard_settings, [["is", "segment", [999_999]]])
    assert status == 400 and "no segment 999999" in unknown["error"]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["segments", "add", SITE, "Broken", "[["], "filters: not JSON"),
        (["segments", "add", SITE, "Berlin", '[["is", "visit:city", ["Berlin"]]]'],
         "visit:city is not supported by Tally"),
        (["segments", "add", "nowhere.example.com", "X", '[["is", "visit:country", ["DE"]]]'],
         "is not registered"),
        (["segments", "remove", SITE, "Nothing"], "has no segment 'Nothing'"),
    ],
)  # fmt: skip
def test_mistakes_get_one_line(env: dict[str, str], args: list[str], named: str) -> None:
    assert named in one_line_error(run_tally(env, *args, timeout=120))


def test_duplicate_name_is_refused(env: dict[str, str], segment_id: int) -> None:
    answer = run_tally(env, "segments", "add", SITE, "German blog readers", '[["is", "visit:os", ["iOS"]]]')
    assert "already has a segment 'German blog readers'" in one_line_error(answer)


def test_rename_and_update(env: dict[str, str], dashboard_settings: Settings, store: Client) -> None:
    search = '[["is", "visit:channel", ["Organic Search"]]]'
    added = tally(env, "segments", "add", SITE, "From search", search)
    segment = re.search(r"id (\d+)", added)
    assert segment, added
    tally(env, "segments", "rename", SITE, "From search", "Searchers")
    german = '[["is", "visit:source", ["www.google.de"]], ["is", "visit:country", ["DE"]]]'
    tally(env, "segments", "update", SITE, "Searchers", german)
    listed = tally(env, "segments", "list", SITE)
    assert f"{segment[1]}\tSearchers\t{json.dumps(json.loads(german))}" in listed
    taken = run_tally(env, "segments", "rename", SITE, "Searchers", "German blog readers")
    assert "already has a segment 'German blog readers'" in one_line_error(taken)
    tally(env, "segments", "remove", SITE, "Searchers")
