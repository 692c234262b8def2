"""GET /api/v1/alerts against the real engine: a site's rules (the webhook's host only) and
its alerts, newest first, with the delivery's outcome winning over the fired row whichever
was written first; a bad site is a 400 naming it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage.alert_rules import ALERT_COLUMNS, FAILED, add_rule, make_rule, record_outcome
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings

pytestmark = pytest.mark.integration

SITE = "alerts-api.example.com"
T0 = datetime(2026, 11, 10, 9, 0, tzinfo=UTC)


def alert(alert_id: str, rule_id: str, minutes: int) -> dict[str, object]:
    """An alert as the alerts query publishes it (stream_jobs/alerts.py, Alert.message)."""
    return {
        "alert_id": alert_id,
        "rule_id": rule_id,
        "site": SITE,
        "kind": "pageviews_above",
        "window_start": T0.isoformat(),
        "observed": 12,
        "threshold": 5,
        "fired_at": (T0 + timedelta(minutes=minutes)).isoformat(),
        "summary": "page views in 60 min above 5: 12",
    }


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings) -> FlaskClient:
    client = connect(dashboard_settings)
    add_site(client, SITE)
    rule = add_rule(
        client,
        make_rule(
            site=SITE,
            kind="pageviews_above",
            window_minutes=60,
            threshold=5,
            webhook_url="https://hooks.example.com/secret-token",
        ),
    )
    older, newer = alert("a-older", rule.rule_id, 1), alert("a-newer", rule.rule_id, 70)
    # The delivery's outcome (stage 1) written before the query's fired row (stage 0).
    record_outcome(client, older, FAILED, 6, "HTTP 500")
    record_outcome(client, newer, "delivered", 1)
    _fired_row(client, older)
    return build_app(dashboard_settings, clock=lambda: T0).server.test_client()


def _fired_row(client: Client, alert: dict[str, object]) -> None:
    client.insert(
        "alerts",
        [
            [
                alert["alert_id"],
                alert["rule_id"],
                SITE,
                alert["kind"],
                T0,
                12.0,
                5.0,
                T0,
                "",
                "fired",
                0,
                "",
                0,
            ]
        ],
        column_names=[*ALERT_COLUMNS, "stage"],
    )


def test_rules_and_alerts_newest_first_with_their_delivery_status(
    api: FlaskClient, dashboard_settings: Settings
) -> None:
    headers = {"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"}
    answer = api.get("/api/v1/alerts", query_string={"site": SITE}, headers=headers)
    assert answer.status_code == 200
    body = answer.get_json()
    [rule] = body["rules"]
    assert rule["kind"] == "pageviews_above" and rule["threshold"] == 5
    assert rule["webhook_host"] == "hooks.example.com"
    assert "secret-token" not in answer.get_data(as_text=True)
    assert [(a["alert_id"], a["status"], a["attempts"]) for a in body["alerts"]] == [
        ("a-newer", "delivered", 1),
        ("a-older", FAILED, 6),
    ]
    assert body["alerts"][1]["last_error"] == "HTTP 500"


@pytest.mark.parametrize("site", ["", "not a domain"])
def test_a_bad_site_is_a_400_naming_it(api: FlaskClient, dashboard_settings: Settings, site: str) -> None:
    headers = {"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"}
    answer = api.get("/api/v1/alerts", query_string={"site": site}, headers=headers)
    assert answer.status_code == 400
    assert "site" in answer.get_json()["error"]
