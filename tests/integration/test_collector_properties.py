"""Whatever arrives at the door — any bytes, any JSON, any header — the collector answers
202 or a clear 4xx naming what is wrong, never a 5xx, and keeps serving."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from collector.app import CollectorParts, build_app, production_parts
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings

pytestmark = pytest.mark.integration

SITE = "fuzz.example.com"
UA = "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0"
FIELDS = ["site", "d", "name", "n", "url", "u", "referrer", "r", "props", "p", "screen_width", "w"]
CLEAR_ANSWERS = {202, 400, 413, 429}
EXAMPLES = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=50),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=20,
)


@pytest.fixture(scope="module")
def collector(settings: Settings) -> Iterator[TestClient]:
    add_site(connect(settings), SITE)
    parts: CollectorParts = production_parts(settings)
    with TestClient(build_app(settings, parts), client=("127.0.0.1", 40100)) as client:
        yield client


def assert_clear(response: object) -> None:
    assert response.status_code in CLEAR_ANSWERS, response.text
    if response.status_code >= 400:
        assert response.json()["error"]


@EXAMPLES
@given(body=st.binary(max_size=4096))
def test_any_bytes(collector: TestClient, body: bytes) -> None:
    assert_clear(
        collector.post("/api/event", content=body, headers={"Content-Type": "text/plain", "User-Agent": UA})
    )


@EXAMPLES
@given(value=json_values)
def test_any_json(collector: TestClient, value: object) -> None:
    assert_clear(collector.post("/api/event", content=json.dumps(value), headers={"User-Agent": UA}))


@EXAMPLES
@given(overrides=st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=4))
def test_a_valid_event_with_any_field_replaced(collector: TestClient, overrides: dict) -> None:
    event = {"site": SITE, "url": f"https://{SITE}/", **overrides}
    response = collector.post("/api/event", content=json.dumps(event), headers={"User-Agent": UA})
    assert_clear(response)
    if response.status_code == 400:
        named = response.json()["error"].split(":")[0]
        assert named.split(".")[0] in [*FIELDS, "body"], named


def header_bytes(text: str) -> bytes:
    """Any bytes a header line can carry (no line breaks or NUL, which end the header)."""
    raw = text.encode("utf-8", "replace")
    return bytes(b for b in raw if b not in b"\r\n\x00")


@EXAMPLES
@given(forwarded=st.text(max_size=200), agent=st.text(max_size=300), language=st.text(max_size=100))
def test_any_header_values(collector: TestClient, forwarded: str, agent: str, language: str) -> None:
    headers = {
        "X-Forwarded-For": header_bytes(forwarded),
        "User-Agent": header_bytes(agent),
        "Accept-Language": header_bytes(language),
    }
    assert_clear(
        collector.post("/api/event", json={"site": SITE, "url": f"https://{SITE}/"}, headers=headers)
    )


@EXAMPLES
@given(value=json_values)
def test_any_batch(collector: TestClient, settings: Settings, value: object) -> None:
    headers = {"Authorization": f"Bearer {settings.resolved_ingest_key()}"}
    assert_clear(collector.post("/api/events", content=json.dumps(value), headers=headers))


def test_deeply_nested_json_is_refused_not_crashed_on(collector: TestClient) -> None:
    deep = "[" * 10_000 + "]" * 10_000
    assert_clear(collector.post("/api/event", content=deep, headers={"User-Agent": UA}))
    assert collector.get("/healthz").status_code == 200
