"""`tally channels add/list/remove` and `tally whatif channels` as a user runs them (the real CLI
as a subprocess, the real store): the what-if's proposed side is the breakdown the site shows
once `--apply` stored the rules, the sources it says move are those that do, and each mistake
is answered in one line naming the field."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from clickhouse_connect.driver.client import Client

from storage import queries
from storage.channel_rules import list_rules, restore
from storage.channels import ChannelRule
from storage.client import connect
from storage.queries.channels import compare_rules
from storage.schema import apply_migrations
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.clickhouse import Endpoint
from tests.fixtures.events import archive_rows, page_view
from tests.integration.test_channel_rules import DAY, SESSIONS, channel_of
from tests.integration.test_cli_errors import one_line_error

pytestmark = pytest.mark.integration

SITE = "cli.channels.example.com"
PERIOD = ("--from", "2026-11-10", "--to", "2026-11-10")


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint) -> Settings:
    settings = Settings(
        home=tmp_path_factory.mktemp("channels-cli-home"),
        clickhouse_url=clickhouse_endpoint.url,
        clickhouse_password=clickhouse_endpoint.password,
    )
    apply_migrations(settings)
    client = connect(settings)
    add_site(client, SITE)
    events = []
    for index, (visitor, (referrer, source, medium, _, pages)) in enumerate(SESSIONS.items()):
        start = DAY + timedelta(hours=2, minutes=index)
        fields = {"referrer_domain": referrer, "utm_source": source, "utm_medium": medium}
        events += [
            page_view(SITE, visitor, start + timedelta(seconds=30 * p), "/", **fields) for p in range(pages)
        ]
    rows, columns = archive_rows(events)
    client.insert("events", rows, column_names=columns)
    return settings


@pytest.fixture(scope="module")
def env(settings: Settings) -> dict[str, str]:
    return os.environ | settings.environment()


@pytest.fixture
def store(settings: Settings) -> Client:
    client = connect(settings)
    restore(client, {SITE: []})  # this module's site starts without rules
    return client


def tally(env: dict[str, str], *args: str) -> str:
    answer = run_tally(env, *args, timeout=120)
    assert answer.returncode == 0, answer.stderr
    return answer.stdout


def test_add_list_remove(env: dict[str, str], store: Client) -> None:
    tally(env, "channels", "add", SITE, "--source", "Partner.io", "--channel", "affiliates")
    tally(env, "channels", "add", SITE, "--source", "newsletter", "--channel", "News", "--medium", "email")
    assert tally(env, "channels", "list", SITE).splitlines() == [
        "partner.io\tAffiliates",
        "newsletter\tNews\temail",
    ]
    assert "removed rule partner.io -> Affiliates" in tally(
        env, "channels", "remove", SITE, "--source", "partner.io"
    )
    assert tally(env, "channels", "list", SITE).splitlines() == ["newsletter\tNews\temail"]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["channels", "add", "unknown.example.com", "--source", "a.io", "--channel", "X"], "site: unknown"),
        (["channels", "add", SITE, "--source", "a'b", "--channel", "X"], "source:"),
        (["channels", "add", SITE, "--source", "a.io", "--channel", "x" * 41], "channel:"),
        (["channels", "remove", SITE, "--source", "none.io"], "has no rule for source 'none.io'"),
        (["whatif", "channels", SITE, *PERIOD], "--rule SOURCE=CHANNEL or --drop SOURCE is needed"),
        (["whatif", "channels", SITE, "--rule", "partner.io"], "--rule: expected SOURCE=CHANNEL"),
        (["whatif", "channels", SITE, "--rule", "a=b", "--period", "month"], "--period:"),
        (["whatif", "channels", "unknown.example.com", "--rule", "a=b"], "site: unknown.example.com"),
        (["whatif"], "--session-gap"),  # the replay what-if still asks for its options
    ],
)
def test_mistakes_get_one_line(env: dict[str, str], args: list[str], named: str) -> None:
    assert named in one_line_error(run_tally(env, *args, timeout=120))


def test_duplicate_is_refused(env: dict[str, str], store: Client) -> None:
    tally(env, "channels", "add", SITE, "--source", "partner.io", "--channel", "A")
    error = one_line_error(
        run_tally(env, "channels", "add", SITE, "--source", "partner.io", "--channel", "B")
    )
    assert "already has a rule for source 'partner.io'" in error


def test_whatif_proposed_side_is_the_breakdown_after_apply(env: dict[str, str], store: Client) -> None:
    tally(env, "channels", "add", SITE, "--source", "someblog.example.org", "--channel", "Blogs")
    tally(env, "channels", "add", SITE, "--source", "partner.io", "--channel", "Old partner")
    q = queries.StatsQuery(SITE, DAY, DAY + timedelta(days=1))
    current = tuple(list_rules(store, SITE))
    proposed = (ChannelRule("someblog.example.org", "Blogs"), ChannelRule("partner", "Partners"))
    comparison = compare_rules(store, q, current, proposed)
    assert {row.value: row.totals for row in comparison.current} == {
        row.value: row.totals for row in queries.session_breakdown(store, q, "channel", 50)
    }
    # the moves are the sessions whose channel differs, by source (plain Python)
    moved: dict[tuple[str, str, str], int] = {}
    for session in SESSIONS.values():
        old, new = channel_of(session, list(current)), channel_of(session, list(proposed))
        if old != new:
            key = ((session[1] or session[0]).lower(), old, new)
            moved[key] = moved.get(key, 0) + 1
    assert {(m.source, m.current, m.proposed): m.sessions for m in comparison.moves} == moved

    out = tally(
        env,
        "whatif",
        "channels",
        SITE,
        *PERIOD,
        "--drop",
        "partner.io",
        "--rule",
        "partner=Partners",
        "--apply",
    )
    assert "Partners" in out and "partner.co.uk" in out and "Old partner" in out
    assert list_rules(store, SITE) == list(proposed)
    after = queries.session_breakdown(store, q, "channel", 50)
    assert {row.value: row.totals for row in after} == {row.value: row.totals for row in comparison.proposed}
    assert {row.value for row in after} >= {"Partners", "Blogs"}


def test_whatif_without_apply_changes_nothing(env: dict[str, str], store: Client) -> None:
    tally(env, "channels", "add", SITE, "--source", "partner.io", "--channel", "A")
    out = tally(env, "whatif", "channels", SITE, "--period", "30d", "--rule", "partner.io=B")
    assert "--apply stores the proposed rules" in out
    assert list_rules(store, SITE) == [ChannelRule("partner.io", "A")]
    assert "channels" in tally(env, "whatif", "--help")
