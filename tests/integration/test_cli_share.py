"""`tally share` against the real store: create (with and without a password), list, revoke, and
the mistakes a user makes, each one line on stderr and never a traceback."""

from __future__ import annotations

import os
import re
import subprocess
import uuid

import pytest

from storage import shared_links
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.ports import free_port
from tests.integration.test_cli_errors import one_line_error

pytestmark = pytest.mark.integration

SHARE_URL = re.compile(r"^http://127\.0\.0\.1:\d+/share/(?P<token>[A-Za-z0-9_-]{43})$")


def tally(settings: Settings, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """The real CLI as a subprocess; stdin is not a terminal, so --password reads a line from it."""
    return run_tally(os.environ | settings.environment(), *args, timeout=120, stdin=stdin)


@pytest.fixture
def site(dashboard_settings: Settings) -> str:
    domain = f"share-{uuid.uuid4().hex[:8]}.example.com"
    add_site(connect(dashboard_settings), domain)
    return domain


def test_create_list_and_revoke(dashboard_settings: Settings, site: str) -> None:
    created = tally(dashboard_settings, "share", site, "--label", "investors")
    assert created.returncode == 0, created.stderr
    token = SHARE_URL.match(created.stdout.strip())["token"]  # type: ignore[index]
    assert "not shown again" in created.stderr
    link = shared_links.resolve(connect(dashboard_settings), token)
    assert link is not None and link.site == site and link.label == "investors" and not link.has_password

    listed = tally(dashboard_settings, "share", "list", site)
    assert listed.returncode == 0, listed.stderr
    assert link.id in listed.stdout and "investors" in listed.stdout and "live" in listed.stdout
    assert token not in listed.stdout  # the token is shown once, at creation

    revoked = tally(dashboard_settings, "share", "revoke", site, link.id)
    assert revoked.returncode == 0, revoked.stderr
    assert shared_links.resolve(connect(dashboard_settings), token) is None
    assert "revoked" in tally(dashboard_settings, "share", "list", site).stdout


def test_password_is_read_from_stdin_and_kept_as_a_digest(dashboard_settings: Settings, site: str) -> None:
    created = tally(dashboard_settings, "share", site, "--password", stdin="s3cret phrase\n")
    assert created.returncode == 0, created.stderr
    token = SHARE_URL.match(created.stdout.strip())["token"]  # type: ignore[index]
    link = shared_links.resolve(connect(dashboard_settings), token)
    assert link is not None and link.has_password
    assert link.password_matches("s3cret phrase") and not link.password_matches("s3cret")
    stored = connect(dashboard_settings).query(
        "SELECT * FROM shared_links WHERE id = {id:String}", parameters={"id": link.id}
    )
    assert "s3cret phrase" not in str(stored.result_rows) and token not in str(stored.result_rows)


@pytest.mark.parametrize(
    ("args", "stdin", "expected"),
    [
        (["share", "never-registered.example.com"], "", "never-registered.example.com is not registered"),
        (["share", "not a domain"], "", "not a domain name"),
        (["share", "list", "bad_domain!"], "", "not a domain name"),
        (["share", "revoke", "{site}", "deadbeef"], "", "has no shared link 'deadbeef'"),
        (["share", "{site}", "--password"], "\n", "--password: the password is empty"),
        (["share", "{site}", "--label", "x" * 101], "", "label: at most 100 characters"),
        (["share", "revoke", "{site}"], "", "missing argument 'ID'"),
    ],
)
def test_mistakes_are_one_line(
    dashboard_settings: Settings, site: str, args: list[str], stdin: str, expected: str
) -> None:
    answer = tally(dashboard_settings, *[arg.format(site=site) for arg in args], stdin=stdin)
    assert expected in one_line_error(answer)


def test_store_down_is_one_line(dashboard_settings: Settings) -> None:
    down = Settings(home=dashboard_settings.home_dir, clickhouse_url=f"http://127.0.0.1:{free_port()}")
    for args in (
        ["share", "example.com"],
        ["share", "list", "example.com"],
        ["share", "revoke", "example.com", "ab"],
    ):
        line = one_line_error(tally(down, *args))
        assert "the store is not running" in line and "tally up -d" in line
