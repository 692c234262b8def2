"""Signing in to the dashboard, and what it shows when the store does not answer — built
in-process, no store needed."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import OperationalError
from flask.testing import FlaskClient

from dashboard.app import build_app
from dashboard.auth import PasswordCheck
from dashboard.periods import DEFAULT_PRESET, period
from dashboard.throttles import ADDRESS_FAILURES, GuessThrottle
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


def sign_in(browser: FlaskClient, password: str = PASSWORD) -> int:
    return browser.post("/login", data={"password": password}).status_code


def test_every_dashboard_route_asks_to_sign_in_first(browser: FlaskClient) -> None:
    page = browser.get("/")
    assert page.status_code == 302 and page.headers["Location"] == "/login?next=/"
    for path in ("/_dash-layout", "/_dash-dependencies", "/assets/tally.css"):
        assert browser.get(path).status_code == 401, path
    assert browser.post("/_dash-update-component", json={}).status_code == 401
    assert browser.get("/healthz").status_code == 200
    assert browser.get("/login").status_code == 200


def test_right_password_opens_the_dashboard_with_a_protected_cookie(browser: FlaskClient) -> None:
    assert sign_in(browser, "wrong") == 401
    response = browser.post("/login?next=/%3Fsite%3Dx", data={"password": PASSWORD})
    assert response.status_code == 302 and response.headers["Location"] == "/?site=x"
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" in cookie
    assert browser.get("/_dash-layout").status_code == 200


def test_logout_ends_the_session(browser: FlaskClient) -> None:
    assert sign_in(browser) == 302
    assert browser.post("/logout").headers["Location"] == "/login"
    assert browser.get("/_dash-layout").status_code == 401


def test_password_is_generated_into_tally_home_when_not_set(tmp_path: Path) -> None:
    client = build_app(Settings(home=tmp_path)).server.test_client()
    generated = (tmp_path / "dashboard_password").read_text().strip()
    assert len(generated) >= 32 and (tmp_path / "dashboard_password").stat().st_mode & 0o077 == 0
    assert sign_in(client, generated) == 302


def test_changing_the_password_signs_existing_sessions_out(tmp_path: Path) -> None:
    before = build_app(Settings(home=tmp_path, dashboard_password="one")).server.test_client()
    assert sign_in(before, "one") == 302
    cookie = before.get_cookie("tally_session")
    assert cookie is not None
    after = build_app(Settings(home=tmp_path, dashboard_password="two")).server.test_client()
    after.set_cookie("tally_session", cookie.value)
    assert after.get("/_dash-layout").status_code == 401


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


def test_guessing_behind_the_proxy_throttles_the_guesser_not_everyone(tmp_path: Path) -> None:
    # The test client's peer, 127.0.0.1, stands for the TLS proxy.
    behind_proxy = Settings(home=tmp_path, dashboard_password=PASSWORD, trusted_proxies="127.0.0.1/32")
    client = build_app(behind_proxy, clients=store_down).server.test_client()

    def attempt(password: str, forwarded_for: str) -> int:
        headers = {"X-Forwarded-For": forwarded_for}
        return client.post("/login", data={"password": password}, headers=headers).status_code

    guesser = "203.0.113.5"
    for _ in range(ADDRESS_FAILURES):
        assert attempt("guess", guesser) == 401
    assert attempt(PASSWORD, guesser) == 429
    assert attempt(PASSWORD, "198.51.100.20") == 302


def test_password_check_keeps_only_a_salted_digest() -> None:
    check = PasswordCheck.of(PASSWORD)
    assert PASSWORD.encode() not in check.digest + check.salt
    assert check.matches(PASSWORD) and not check.matches(PASSWORD + " ")


@pytest.mark.parametrize(
    "next_query",
    [
        "/%09/evil.example/x",  # a tab: browsers drop it and read //evil.example/x
        "/%0a/x",  # a newline: was a 500 (header injection refused by Werkzeug)
        "/%0d%0aSet-Cookie:x=1",
        "//evil.example",
        "/%5c/evil.example",  # `/\/evil.example`: browsers read the backslash as a slash
        "/%5cevil.example",
        "%5c%5cevil.example",
        "https://evil.example",
        "javascript:alert(1)",
        "/%EF%BC%8Fevil.example",  # U+FF0F FULLWIDTH SOLIDUS
        "/%E2%88%95evil.example",  # U+2215 DIVISION SLASH
        "/%20/evil.example",
        "",
    ],
)
def test_sign_in_never_sends_the_browser_off_site(browser: FlaskClient, next_query: str) -> None:
    response = browser.post(f"/login?next={next_query}", data={"password": PASSWORD})
    assert response.status_code == 302
    assert response.headers["Location"] == "/"


def test_sign_in_with_a_raw_tab_in_next_stays_on_site(browser: FlaskClient) -> None:
    # The query string as a hand-written link carries it: `next=/\t/evil.example/x`.
    next_page = {"next": "/\t/evil.example/x"}
    response = browser.post("/login", query_string=next_page, data={"password": PASSWORD})
    assert response.headers["Location"] == "/"


def test_sign_in_returns_to_the_page_asked_for_with_its_query(browser: FlaskClient) -> None:
    asked = browser.get("/explore?x=1&site=a.example")
    assert asked.status_code == 302
    signed_in = browser.post(asked.headers["Location"], data={"password": PASSWORD})
    assert signed_in.headers["Location"] == "/explore?x=1&site=a.example"
    kept = browser.post("/login?next=/explore%3Fx%3D1", data={"password": PASSWORD})
    assert kept.headers["Location"] == "/explore?x=1"


def test_store_outage_is_a_sentence_on_the_page_and_a_503_from_the_api(browser: FlaskClient) -> None:
    assert sign_in(browser) == 302
    shown = period(DEFAULT_PRESET, datetime.now(UTC)).to_store()
    response = browser.post(
        "/_dash-update-component",
        json={
            "output": "top-metrics.children",
            "outputs": {"id": "top-metrics", "property": "children"},
            "inputs": [
                {"id": "site", "property": "value", "value": "example.com"},
                {"id": "period", "property": "data", "value": shown},
                {"id": "filters", "property": "data", "value": {}},
            ],
            "changedPropIds": ["site.value"],
        },
    )
    assert response.status_code == 200
    text = str(response.get_json())
    assert "not answering" in text and "Traceback" not in text

    api = browser.get(
        "/api/v1/stats/aggregate",
        query_string={"site": "example.com"},
        headers={"Authorization": "Bearer test-key"},
    )
    assert api.status_code == 503 and api.headers["Retry-After"] == "5"
    assert api.get_json() == {"error": "the analytics store is not answering; try again shortly"}
