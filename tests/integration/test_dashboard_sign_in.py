"""Signing in to the dashboard with the sessions in the store (storage/sessions.py): the cookie,
logging out, a changed password, the throttle behind a proxy, where a sign-in sends the browser
on. The real app (Flask's test client) on the real store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from dashboard.app import build_app
from dashboard.throttles import ADDRESS_FAILURES
from tally.settings import Settings

pytestmark = pytest.mark.integration

PASSWORD = "correct horse battery staple"


@pytest.fixture
def settings(dashboard_settings: Settings, tmp_path: Path) -> Settings:
    """The migrated store, with a home and a password of this test's own."""
    return dashboard_settings.model_copy(update={"home": tmp_path, "dashboard_password": PASSWORD})


@pytest.fixture
def browser(settings: Settings) -> Iterator[FlaskClient]:
    yield build_app(settings).server.test_client()


def sign_in(browser: FlaskClient, password: str = PASSWORD) -> int:
    return browser.post("/login", data={"password": password}).status_code


def test_right_password_opens_the_dashboard_with_a_protected_cookie(browser: FlaskClient) -> None:
    assert sign_in(browser, "wrong") == 401
    response = browser.post("/login?next=/%3Fsite%3Dx", data={"password": PASSWORD})
    assert response.status_code == 302 and response.headers["Location"] == "/?site=x"
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" in cookie
    assert browser.get("/_dash-layout").status_code == 200


def test_logout_ends_the_session_also_for_a_copy_of_its_cookie(
    settings: Settings, browser: FlaskClient
) -> None:
    assert sign_in(browser) == 302
    cookie = browser.get_cookie("tally_session")
    assert cookie is not None
    assert browser.post("/logout").headers["Location"] == "/login"
    assert browser.get("/_dash-layout").status_code == 401
    copy = build_app(settings).server.test_client()
    copy.set_cookie("tally_session", cookie.value)
    assert copy.get("/_dash-layout").status_code == 401


def test_password_is_generated_into_tally_home_when_not_set(settings: Settings, tmp_path: Path) -> None:
    client = build_app(settings.model_copy(update={"dashboard_password": ""})).server.test_client()
    generated = (tmp_path / "dashboard_password").read_text().strip()
    assert len(generated) >= 32 and (tmp_path / "dashboard_password").stat().st_mode & 0o077 == 0
    assert sign_in(client, generated) == 302


def test_changing_the_password_signs_existing_sessions_out(settings: Settings) -> None:
    before = build_app(settings.model_copy(update={"dashboard_password": "one"})).server.test_client()
    assert sign_in(before, "one") == 302
    cookie = before.get_cookie("tally_session")
    assert cookie is not None
    after = build_app(settings.model_copy(update={"dashboard_password": "two"})).server.test_client()
    after.set_cookie("tally_session", cookie.value)
    assert after.get("/_dash-layout").status_code == 401


def test_guessing_behind_the_proxy_throttles_the_guesser_not_everyone(settings: Settings) -> None:
    # The test client's peer, 127.0.0.1, stands for the TLS proxy.
    behind_proxy = settings.model_copy(update={"trusted_proxies": "127.0.0.1/32"})
    client = build_app(behind_proxy).server.test_client()

    def attempt(password: str, forwarded_for: str) -> int:
        headers = {"X-Forwarded-For": forwarded_for}
        return client.post("/login", data={"password": password}, headers=headers).status_code

    guesser = "203.0.113.5"
    for _ in range(ADDRESS_FAILURES):
        assert attempt("guess", guesser) == 401
    assert attempt(PASSWORD, guesser) == 429
    assert attempt(PASSWORD, "198.51.100.20") == 302


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
