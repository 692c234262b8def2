"""The stats API against its own OpenAPI document, with schemathesis.

Schemathesis reads the document the dashboard serves (dashboard.http_api.openapi; the first test checks
the server answers exactly that at /api/v1/openapi.json), generates requests for every
operation — valid ones and ones that break the document's rules, explicit examples, boundary
values, undeclared methods — and sends them with the valid API key to the real dashboard
server (its Flask app, in-process over WSGI) backed by the real ClickHouse endpoint. Every
answer is checked: never a 5xx, only the documented status codes and content types, bodies
that match the documented schemas, a 4xx for invalid input, a 401 without the key, a 405 for
an undeclared method, and a JSON `{"error": "…"}` on every 4xx.

Generated sites are random strings that name nothing, so half of the valid cases ask about a
site with page views in the default range (the 30 days before the API's clock): non-empty
timeseries, breakdowns and sessions are checked against their schemas too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import schemathesis
from flask import Flask
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis import Case, GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from dashboard.app import build_app
from dashboard.http_api.openapi import openapi_document
from storage.client import connect
from storage.sites import add_site
from tally.event import PageViewEvent
from tally.settings import Settings
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

SITE = "schemathesis.example.com"
NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)  # the API's clock
MAX_EXAMPLES = 40  # per operation, in the fuzzing phase; keeps the whole module well under a minute
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,  # a request breaking the document's rules gets a 4xx
    ignored_auth,  # the same request without the key gets a 401
    unsupported_method,  # an undeclared method gets a 405 with Allow
]


class DashboardServer:
    """The WSGI app schemathesis sends its requests to. The schema is loaded when the module
    is imported, the dashboard needs the session's store: the fixture plugs it in here."""

    app: Flask | None = None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        assert self.app is not None, "the stats_app fixture plugs the dashboard in"
        answer = self.app(environ, start_response)
        # A WSGI server closes every answer (PEP 3333), which gives an export its slot back;
        # werkzeug's test client leaves closing to its caller, and schemathesis never does.
        try:
            return [b"".join(answer)]
        finally:
            close = getattr(answer, "close", None)
            if close is not None:
                close()


DASHBOARD = DashboardServer()
schema = schemathesis.openapi.from_dict(openapi_document())
schema.app = DASHBOARD


@schema.hook
def flatmap_case(context: schemathesis.HookContext, case: Case) -> st.SearchStrategy[Case]:
    """Half of the valid cases that name a site ask about the seeded site instead: in the raw
    archive (no stream jobs fill the derived tables here), over its days (random dates are
    mostly outside 1970-2199 or in the wrong order), without filters (random strings are not
    JSON). The other parameters stay as generated."""
    positive = case.meta is not None and case.meta.generation.mode is GenerationMode.POSITIVE
    if positive and isinstance(case.body, dict) and "site_id" in case.body:  # Plausible's v2 query
        return st.booleans().map(
            lambda seeded: case_with(case, body={**case.body, "site_id": SITE}) if seeded else case
        )
    if not (positive and isinstance(case.query, dict) and "site" in case.query):
        return st.just(case)
    return st.booleans().map(lambda seeded: on_seeded_site(case) if seeded else case)


def case_with(case: Case, body: dict[str, Any]) -> Case:
    case.body = body
    return case


def on_seeded_site(case: Case) -> Case:
    query = {name: value for name, value in case.query.items() if name != "filters"}
    query |= {"site": SITE, "source": "raw"}
    if "from" in query or "to" in query:
        query |= {"from": iso(NOW - timedelta(days=3)), "to": iso(NOW)}
    case.query = query
    return case


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def seeded_events() -> list[PageViewEvent]:
    """Two days of page views up to NOW (the last ones live): 4 visitors, 5 paths, a few
    referrers and countries."""
    events = []
    for i in range(62):
        at = (
            NOW - timedelta(days=2) + timedelta(minutes=47 * i) if i < 60 else NOW - timedelta(minutes=i - 58)
        )
        events.append(
            page_view(
                SITE,
                f"visitor-{i % 4}",
                at,
                f"/p{i % 5}",
                referrer_domain=["", "news.ycombinator.com", "google.com"][i % 3],
                country=["CH", "DE", ""][i % 3],
                ip_hash=f"ip-{i % 4}",
            )
        )
    return events


@pytest.fixture(scope="module")
def stats_app(dashboard_settings: Settings) -> Iterator[Flask]:
    client = connect(dashboard_settings)
    try:
        rows, columns = archive_rows(seeded_events())
        client.insert("events", rows, column_names=columns)
        add_site(client, SITE)  # Plausible's v2 query answers registered sites only
    finally:
        client.close()
    DASHBOARD.app = build_app(dashboard_settings, clock=lambda: NOW).server
    try:
        yield DASHBOARD.app
    finally:
        DASHBOARD.app = None


@pytest.fixture(scope="module")
def api_key_header(dashboard_settings: Settings) -> dict[str, str]:
    return {"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"}


def test_the_document_tested_is_the_one_served(stats_app: Flask) -> None:
    response = stats_app.test_client().get("/api/v1/openapi.json")
    assert response.status_code == 200
    assert response.get_json() == openapi_document()
    assert {operation.ok().label for operation in schema.get_all_operations()} == {
        f"{method.upper()} {path}" for path, item in openapi_document()["paths"].items() for method in item
    }


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
def test_every_answer_is_documented_and_never_a_5xx(
    case: Case, stats_app: Flask, api_key_header: dict[str, str]
) -> None:
    response = case.call_and_validate(headers=api_key_header, checks=CHECKS)
    if 400 <= response.status_code < 500:
        content_type = response.headers.get("content-type", [""])[0]
        assert content_type.startswith("application/json"), (response.status_code, response.text)
        body = response.json()
        assert isinstance(body, dict), body
        assert isinstance(body.get("error"), str), body
        assert body["error"].strip(), body
