"""The Journeys tab's callback on the real app (Flask's test client) and the real store: the filters
in force (and a saved segment of visit conditions) choose the visits drawn, as the API's answer for
the same filters; a filter on an event shows the refusal, naming it, and no chart.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime, timedelta

import pytest
from flask.testing import FlaskClient

from dashboard.app import build_app
from dashboard.periods import period
from dashboard.view_tabs import JOURNEYS_TAB
from storage.client import connect
from storage.rollup_backfill import backfill_rollups
from storage.segments import add_segment
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.events import archive_rows, page_view

# the app built, a backfill, five callbacks: 41 s on 2 shared cores (load 12)
pytestmark = [pytest.mark.integration, pytest.mark.slow]

PASSWORD = "journeys-tab"
DAY = date(2026, 11, 14)
T0 = datetime(2026, 11, 14, 10, tzinfo=UTC)
OUTPUTS = [
    {"id": "journeys-result", "property": "children"},
    {"id": "journeys-sankey", "property": "figure"},
    {"id": "journeys-sankey", "property": "style"},
]


@pytest.fixture(scope="module")
def site(dashboard_settings: Settings) -> str:
    """Three visits from Google (/ → /pricing twice, / → /docs), two direct (/ → /about)."""
    site = f"journeys-tab-{uuid.uuid4().hex[:8]}.example.com"
    at = lambda minutes: T0 + timedelta(minutes=minutes)  # noqa: E731
    events = []
    for n, (referrer, second) in enumerate(
        [
            ("google.com", "/pricing"),
            ("google.com", "/pricing"),
            ("google.com", "/docs"),
            ("", "/about"),
            ("", "/about"),
        ]
    ):
        visitor = f"v{n}"
        events += [
            page_view(
                site, visitor, at(n), "/", referrer_domain=referrer, country="DE" if referrer else "FR"
            ),
            page_view(site, visitor, at(n + 1), second, country="DE" if referrer else "FR"),
        ]
    client = connect(dashboard_settings)
    rows, columns = archive_rows(events)
    client.insert("events", rows, column_names=columns)
    backfill_rollups(client, site, DAY, DAY + timedelta(days=1))  # the sessions the tab (agg) reads
    add_site(client, site)
    add_segment(client, site, "From search", [["is", "visit:source", ["google.com"]]])
    return site


@pytest.fixture(scope="module")
def operator(dashboard_settings: Settings) -> FlaskClient:
    settings = dashboard_settings.model_copy(update={"dashboard_password": PASSWORD})
    client = build_app(settings).server.test_client()
    assert client.post("/login", data={"email": "", "password": PASSWORD}).status_code == 302
    return client


def shown(client: FlaskClient, site: str, filters: dict[str, str], most_drawn: int = 25) -> dict:
    """The tab's answer for the whole day: from the visits' entry, one step."""
    days = period("custom", datetime.now(UTC), DAY, DAY).to_store()
    values = {
        "site": ("value", site), "period": ("data", days), "filters": ("data", filters),
        "tabs": ("value", JOURNEYS_TAB), "journeys-page": ("value", None),
        "journeys-direction": ("value", "next"), "journeys-steps": ("value", 1),
        "journeys-group": ("value", None), "journeys-min-visitors": ("value", 1),
        "journeys-limit": ("value", most_drawn),
    }  # fmt: skip
    request = {
        "output": "..journeys-result.children...journeys-sankey.figure...journeys-sankey.style..",
        "outputs": OUTPUTS,
        "inputs": [{"id": name, "property": prop, "value": value} for name, (prop, value) in values.items()],
        "changedPropIds": [],
        "state": [],
    }
    answer = client.post("/_dash-update-component", json=request)
    assert answer.status_code == 200, answer.text[:500]
    return answer.get_json()["response"]


def drawn(response: dict) -> dict[str, str]:
    """The caption's numbers and the Sankey's links (source label → target label: visits)."""
    caption = response["journeys-result"]["children"]["props"]
    sankey = response["journeys-sankey"]["figure"]["data"][0]
    labels = sankey["node"]["label"]
    links = zip(sankey["link"]["source"], sankey["link"]["target"], sankey["link"]["value"], strict=True)
    return {
        "visits": caption["data-visits"],
        **{f"{labels[source]} → {labels[target]}": str(value) for source, target, value in links},
    }


def test_the_tab_draws_the_journeys_of_the_visits_passing_the_filters(
    operator: FlaskClient, site: str
) -> None:
    assert drawn(shown(operator, site, {})) == {
        "visits": "5",
        "/ → /pricing": "2",
        "/ → /docs": "1",
        "/ → /about": "2",
    }
    from_google = {"visits": "3", "/ → /pricing": "2", "/ → /docs": "1"}
    assert drawn(shown(operator, site, {"referrer_domain": "google.com"})) == from_google
    assert drawn(shown(operator, site, {"segment": "From search"})) == from_google  # a saved segment's
    assert drawn(shown(operator, site, {"country": "FR"})) == {"visits": "2", "/ → /about": "2"}


def test_the_tab_draws_the_paths_of_the_most_visitors_and_counts_the_others(
    operator: FlaskClient, site: str
) -> None:
    """One path drawn (ties: more visits, then the steps' order: / → /about before / → /pricing);
    the other visits counted in the caption (from the entry, "(other)" has no node to hang off)."""
    response = shown(operator, site, {}, most_drawn=1)
    assert drawn(response) == {"visits": "5", "/ → /about": "2"}
    caption = response["journeys-result"]["children"]["props"]
    assert (caption["data-paths"], caption["data-folded"]) == ("3", "3")
    assert "3 visits on other paths" in caption["children"]


def test_an_event_filter_shows_why_journeys_cannot_take_it(operator: FlaskClient, site: str) -> None:
    response = shown(operator, site, {"path": "/pricing"})
    message = response["journeys-result"]["children"]
    assert message["props"]["className"] == "notice notice-error"
    assert "'path'" in message["props"]["children"] and "whole visit" in message["props"]["children"]
    assert response["journeys-sankey"]["style"] == {"display": "none"}
    assert json.dumps(response["journeys-sankey"]["figure"].get("data", [])) == "[]"
