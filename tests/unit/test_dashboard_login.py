"""Signing in to the dashboard, and what it shows when the store does not answer — built
in-process, no store needed. Sign-ins that succeed need the store, which keeps the sessions:
tests/integration/test_dashboard_sign_in.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import OperationalError
from flask.testing import FlaskClient

from dashboard.app import build_app
from dashboard.auth import PasswordCheck
from dashboard.throttles import GuessThrottle
from tally.settings import Settings

PASSWORD = "correct horse battery staple"


def store_down() -> Client:
    raise OperationalError("Error HTTPConnectionPool(host='127.0.0.1', port=8123): Connection refused")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path, dashboard_password=PASSWORD, api_key="test-key")


@pytest.fixture
def browser(settings: Settings) -> Iterator[FlaskClient]:
    yield build_app(settings, clients=store_down).server.test_client()


def test_every_dashboard_route_asks_to_sign_in_first(browser: FlaskClient) -> None:
    page = browser.get("/")
    assert page.status_code == 302 and page.headers["Location"] == "/login?next=/"
    for path in ("/_dash-layout", "/_dash-dependencies", "/assets/tally.css"):
        assert browser.get(path).status_code == 401, path
    assert browser.post("/_dash-update-component", json={}).status_code == 401
    assert browser.get("/healthz").status_code == 200
    assert browser.get("/login").status_code == 200


def test_guessing_is_throttled_per_address() -> None:
    throttle = GuessThrottle(address_failures=3, target_failures=100)
    for _ in range(3):
        throttle.failed("10.0.0.1", "a@example.com")
    assert throttle.blocked("10.0.0.1", "b@example.com") and not throttle.blocked("10.0.0.2", "a@example.com")
    throttle.succeeded("10.0.0.1", "a@example.com")
    assert not throttle.blocked("10.0.0.1", "a@example.com")


def test_guessing_from_many_addresses_is_throttled_per_account_but_not_for_its_usual_client() -> None:
    throttle = GuessThrottle(address_failures=3, target_failures=6)
    throttle.succeeded("192.0.2.1", "a@example.com")  # the owner's usual client
    for guesser in ("10.0.0.1", "10.0.0.2"):
        for _ in range(3):
            throttle.failed(guesser, "a@example.com")
    assert throttle.blocked("10.0.0.3", "a@example.com")  # a new client waits for the window
    assert not throttle.blocked("192.0.2.1", "a@example.com")
    assert not throttle.blocked("10.0.0.3", "b@example.com")  # other accounts are untouched


def test_an_ipv6_guesser_is_one_client_across_its_64() -> None:
    throttle = GuessThrottle(address_failures=2)
    throttle.failed("2001:db8:1:2::1", "a@example.com")
    throttle.failed("2001:db8:1:2::ffff", "a@example.com")
    assert throttle.blocked("2001:db8:1:2:abcd::9", "a@example.com")
    assert not throttle.blocked("2001:db8:1:3::1", "a@example.com")


def test_password_check_keeps_only_a_salted_digest() -> None:
    check = PasswordCheck.of(PASSWORD)
    assert PASSWORD.encode() not in check.digest + check.salt
    assert check.matches(PASSWORD) and not check.matches(PASSWORD + " ")


def test_store_outage_is_a_sentence_on_the_page_and_a_503_from_the_api(browser: FlaskClient) -> None:
    # A session that cannot be looked up (or started) is no session: sign-in answers 503 with a
    # sentence, never a traceback, and never lets the browser in.
    signing_in = browser.post("/login", data={"password": PASSWORD})
    assert signing_in.status_code == 503
    assert "not answering" in signing_in.text and "Traceback" not in signing_in.text
    assert browser.get_cookie("tally_session") is None
    assert browser.get("/_dash-layout").status_code == 401

    api = browser.get(
        "/api/v1/stats/aggregate",
        query_string={"site": "example.com"},
        headers={"Authorization": "Bearer test-key"},
    )
    assert api.status_code == 503 and api.headers["Retry-After"] == "5"
    assert api.get_json() == {"error": "the analytics store is not answering; try again shortly"}
