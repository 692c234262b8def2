"""Per-site channel rules (storage/channel_rules.py) on every report that names a channel: the
breakdown (both sources), the `channel` filter, Plausible's visit:channel; each checked against a
plain-Python classification of the sessions this module wrote. Rules of another site change
nothing here, and rules whose values hold quotes, backslashes, braces or SQL are data, never SQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage import queries
from storage.channel_rules import (
    MAX_RULES,
    InvalidChannelRule,
    add_rule,
    contents,
    list_rules,
    make_rule,
    remove_rule,
    replace_rules,
    restore,
)
from storage.channels import ChannelRule
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.events import archive_rows, engagement_event, page_view
from tests.fixtures.stats_api import api_json

pytestmark = pytest.mark.integration

SITE = "rules.example.com"
OTHER = "other-rules.example.com"
DAY = datetime(2026, 11, 10, tzinfo=UTC)
RANGE = {"from": "2026-11-10T00:00:00Z", "to": "2026-11-11T00:00:00Z"}

# visitor → (referrer_domain, utm_source, utm_medium, default channel (storage/channels.py), pages)
SESSIONS = {
    "direct": ("", "", "", "Direct", 1),
    "google": ("www.google.co.uk", "", "", "Organic Search", 2),
    "partner": ("partner.io", "", "", "Referral", 1),
    "partner-www": ("www.partner.io", "", "", "Referral", 2),
    "partner-uk": ("partner.co.uk", "", "", "Referral", 1),
    "partner-utm": ("", "Partner", "affiliate", "Affiliates", 1),
    "news-mail": ("", "newsletter", "email", "Email", 1),
    "news-social": ("", "newsletter", "social", "Organic Social", 1),
    "notpartner": ("notpartner.io", "", "", "Referral", 1),  # a name matches whole labels only
    "blog": ("someblog.example.org", "", "", "Referral", 3),
    "unknown": ("", "foo", "", "Unassigned", 1),
}
RULES = [
    ChannelRule("partner", "Partners"),
    ChannelRule("newsletter", "Newsletter", medium="email"),
    ChannelRule("someblog.example.org", "Email"),  # a default channel's name, by an owner's rule
]
# Quotes, backslashes, braces and SQL in a channel's name: shown exactly as written.
ADVERSARIAL = [
    ChannelRule("foo", "It's {site:String} \\' OR 1=1 --"),
    ChannelRule("partner", "'); DROP TABLE events; --"),
    ChannelRule("newsletter", "{channel_rules:String}\\"),
]


def matches(source: str, name: str) -> bool:
    """Whether a rule for `name` holds for `source`, said without a regular expression: the
    source, with up to two TLD labels of 2-3 letters taken off its end, is `name` or ends in
    `.name`."""
    candidates = [source]
    for _ in range(2):
        head, _, last = candidates[-1].rpartition(".")
        if not head or not (2 <= len(last) <= 3 and last.isalpha()):
            break
        candidates.append(head)
    return any(candidate == name or candidate.endswith(f".{name}") for candidate in candidates)


def channel_of(session: tuple[str, str, str, str, int], rules: list[ChannelRule]) -> str:
    referrer, utm_source, medium, default, _ = session
    source = (utm_source or referrer).lower()
    for rule in rules:
        if source and matches(source, rule.source) and (not rule.medium or rule.medium == medium.lower()):
            return rule.channel
    return default


def expected(rules: list[ChannelRule]) -> dict[str, tuple[int, int, int]]:
    """Per channel: visitors, page views, bounces."""
    counts: dict[str, tuple[int, int, int]] = {}
    for session in SESSIONS.values():
        visitors, pageviews, bounces = counts.get(channel_of(session, rules), (0, 0, 0))
        pages = session[4]
        counts[channel_of(session, rules)] = (visitors + 1, pageviews + pages, bounces + (pages == 1))
    return counts


@pytest.fixture(scope="module")
def store(dashboard_settings: Settings) -> Client:
    client = connect(dashboard_settings)
    events = []
    for site in (SITE, OTHER):
        for index, (visitor, (referrer, source, medium, _, pages)) in enumerate(SESSIONS.items()):
            start = DAY + timedelta(hours=1, minutes=index)
            fields = {"referrer_domain": referrer, "utm_source": source, "utm_medium": medium}
            for page in range(pages):
                events.append(
                    page_view(site, visitor, start + timedelta(seconds=30 * page), f"/{page}", **fields)
                )
        add_site(client, site)
    rows, columns = archive_rows(events)
    client.insert("events", rows, column_names=columns)
    return client


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings, store: Client) -> FlaskClient:
    return build_app(dashboard_settings, clock=lambda: DAY + timedelta(days=1)).server.test_client()


def get(api: FlaskClient, settings: Settings, path: str, **params: str) -> Any:
    return api_json(api, settings, path, **{"site": SITE, **RANGE, **params})


def visitors_and_pages(counts: dict[str, tuple[int, int, int]]) -> dict[str, tuple[int, int]]:
    return {channel: (visitors, pageviews) for channel, (visitors, pageviews, _) in counts.items()}


@pytest.mark.parametrize("source", ["raw", "agg"])
@pytest.mark.parametrize("rules", [[], RULES, ADVERSARIAL], ids=["none", "rules", "adversarial"])
def test_breakdown_follows_the_rules(
    api: FlaskClient, dashboard_settings: Settings, store: Client, source: str, rules: list[ChannelRule]
) -> None:
    restore(store, {SITE: [[r.source, r.medium, r.channel] for r in rules]})
    rows = get(api, dashboard_settings, "/stats/breakdown", by="channel", source=source, limit="50")
    assert {row["value"]: (row["visitors"], row["pageviews"]) for row in rows} == visitors_and_pages(
        expected(rules)
    )


@pytest.mark.parametrize("source", ["raw", "agg"])
def test_channel_filter_follows_the_rules(
    api: FlaskClient, dashboard_settings: Settings, store: Client, source: str
) -> None:
    restore(store, {SITE: [[r.source, r.medium, r.channel] for r in RULES], OTHER: []})
    for channel, (visitors, pageviews, bounces) in expected(RULES).items():
        filters = json.dumps({"channel": channel})
        totals = get(api, dashboard_settings, "/stats/aggregate", source=source, filters=filters)
        assert (totals["visitors"], totals["pageviews"], totals["sessions"]) == (
            visitors,
            pageviews,
            visitors,
        )
        assert totals["bounce_rate"] == pytest.approx(bounces / visitors)
        expression = json.dumps([["is", "channel", [channel]]])  # the expression tree (segments)
        totals = get(api, dashboard_settings, "/stats/aggregate", source=source, filters=expression)
        assert (totals["visitors"], totals["pageviews"]) == (visitors, pageviews)


def test_time_on_page_under_a_rules_channel_filter(store: Client) -> None:
    """The Pages tab's time on page takes the channel filter as the breakdown beside it does."""
    site, start = "engaged-rules.example.com", DAY + timedelta(hours=5)
    events = [
        page_view(site, "from-partner", start, "/a", referrer_domain="www.partner.io"),
        engagement_event(site, "from-partner", start + timedelta(seconds=5), "/a", 5_000),
        page_view(site, "from-google", start, "/a", referrer_domain="www.google.com"),
        engagement_event(site, "from-google", start + timedelta(seconds=8), "/a", 8_000),
    ]
    rows, columns = archive_rows(events)
    store.insert("events", rows, column_names=columns)
    add_site(store, site)
    restore(store, {site: [["partner", "", "Partners"]]})
    q = queries.StatsQuery(site, DAY, DAY + timedelta(days=1), filters={"channel": "Partners"})
    for source in ("raw", "agg"):
        page = queries.engagement(store, q, ["/a"], source=source)["/a"]
        assert (page.visitors, page.time_on_page_s) == (1, 5.0)


def test_plausible_visit_channel_follows_the_rules(
    api: FlaskClient, dashboard_settings: Settings, store: Client
) -> None:
    restore(store, {SITE: [[r.source, r.medium, r.channel] for r in RULES], OTHER: []})
    response = api.post(
        "/api/v2/query",
        json={"site_id": SITE, "metrics": ["visitors", "pageviews"],
              "date_range": ["2026-11-10", "2026-11-10"], "dimensions": ["visit:channel"]},
        headers={"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"},
    )  # fmt: skip
    assert response.status_code == 200, response.get_json()
    got = {row["dimensions"][0]: tuple(row["metrics"]) for row in response.get_json()["results"]}
    assert got == visitors_and_pages(expected(RULES))
    response = api.post(
        "/api/v2/query",
        json={"site_id": SITE, "metrics": ["visitors"], "date_range": ["2026-11-10", "2026-11-10"],
              "filters": [["is", "visit:channel", ["Partners"]]]},
        headers={"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"},
    )  # fmt: skip
    assert response.get_json()["results"][0]["metrics"] == [expected(RULES)["Partners"][0]]


def test_another_sites_rules_change_nothing_here(
    api: FlaskClient, dashboard_settings: Settings, store: Client
) -> None:
    restore(store, {SITE: [], OTHER: [[r.source, r.medium, r.channel] for r in RULES]})
    for source in ("raw", "agg"):
        rows = get(api, dashboard_settings, "/stats/breakdown", by="channel", source=source, limit="50")
        assert {row["value"]: (row["visitors"], row["pageviews"]) for row in rows} == visitors_and_pages(
            expected([])
        )
    q = queries.StatsQuery(OTHER, DAY, DAY + timedelta(days=1))
    rows = queries.session_breakdown(store, q, "channel", 50)
    assert {row.value: int(row.totals["visitors"]) for row in rows} == {
        channel: visitors for channel, (visitors, _, _) in expected(RULES).items()
    }


def test_add_list_remove(store: Client) -> None:
    restore(store, {SITE: [], OTHER: []})
    add_rule(store, SITE, make_rule("Partner.io", "affiliates"))
    add_rule(store, SITE, make_rule("newsletter", "Newsletter", medium="Email"))
    add_rule(store, SITE, make_rule("newsletter", "News (other)"))
    assert list_rules(store, SITE) == [
        ChannelRule("partner.io", "Affiliates"),  # a default channel, spelled as Tally does
        ChannelRule("newsletter", "Newsletter", "email"),
        ChannelRule("newsletter", "News (other)"),
    ]
    assert remove_rule(store, SITE, "newsletter", "email") == ChannelRule("newsletter", "Newsletter", "email")
    add_rule(store, SITE, make_rule("newsletter", "Email", medium="email"))  # again, now last
    assert [rule.channel for rule in list_rules(store, SITE)] == ["Affiliates", "News (other)", "Email"]
    assert list_rules(store, OTHER) == []


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (
            lambda c: add_rule(c, "unknown.example.com", make_rule("a.io", "X")),
            "site: unknown.example.com is not",
        ),
        (lambda c: make_rule("it's.io", "X"), "source:"),
        (lambda c: make_rule("a..io", "X"), "source:"),
        (lambda c: make_rule("{site:String}", "X"), "source:"),
        (lambda c: make_rule("a.io", ""), "channel:"),
        (lambda c: make_rule("a.io", "x" * 41), "channel:"),
        (lambda c: make_rule("a.io", "tab\there"), "channel:"),
        (lambda c: make_rule("a.io", "X", medium="new\nline"), "medium:"),
        (lambda c: remove_rule(c, SITE, "nothing.io"), "has no rule for source 'nothing.io'"),
    ],
)
def test_mistakes_name_the_field(store: Client, call: Any, named: str) -> None:
    with pytest.raises(InvalidChannelRule) as error:
        call(store)
    assert named in str(error.value)
    assert "\n" not in str(error.value)


def test_a_site_has_at_most_max_rules(store: Client) -> None:
    many = [[f"partner{index}.io", "", "Partners"] for index in range(MAX_RULES)]
    restore(store, {SITE: many})
    q = queries.StatsQuery(SITE, DAY, DAY + timedelta(days=1))
    rows = queries.session_breakdown(store, q, "channel", 50)  # the engine takes them all at once
    assert {row.value: int(row.totals["visitors"]) for row in rows} == {
        channel: visitors for channel, (visitors, _, _) in expected([]).items()
    }
    with pytest.raises(InvalidChannelRule, match=f"site: at most {MAX_RULES} channel rules per site"):
        add_rule(store, SITE, make_rule("one-more.io", "Partners"))
    proposed = (*list_rules(store, SITE), make_rule("one-more.io", "Partners"))
    with pytest.raises(InvalidChannelRule, match=f"at most {MAX_RULES}"):
        replace_rules(store, SITE, proposed)
    assert len(list_rules(store, SITE)) == MAX_RULES  # nothing written
    restore(store, {SITE: []})


def test_duplicate_rule_is_refused(store: Client) -> None:
    restore(store, {SITE: [["partner.io", "", "Partners"]]})
    with pytest.raises(InvalidChannelRule, match=r"already has a rule for source 'partner\.io'"):
        add_rule(store, SITE, make_rule("PARTNER.io", "Other"))
    with pytest.raises(InvalidChannelRule, match="two rules"):
        restore(store, {SITE: [["a.io", "", "A"], ["a.io", "", "B"]]})
    assert list_rules(store, SITE) == [ChannelRule("partner.io", "Partners")]  # nothing written


def test_contents_and_restore_round_trip(store: Client) -> None:
    held = {
        SITE: [["partner", "", "Partners"], ["newsletter", "email", "Newsletter"]],
        OTHER: [["x.io", "", "It's {x}"]],
    }
    restore(store, held)
    assert ours(contents(store)) == held
    # A site the stored contents do not name keeps its rules (a site registered after a version).
    restore(store, {OTHER: [["y.io", "cpc", "Y"]]})
    assert ours(contents(store)) == {SITE: held[SITE], OTHER: [["y.io", "cpc", "Y"]]}
    restore(store, held)
    assert ours(contents(store)) == held
    restore(store, {SITE: [], OTHER: []})
    assert ours(contents(store)) == {SITE: [], OTHER: []}  # registered, so listed: with none


def ours(held: dict[str, list[list[str]]]) -> dict[str, list[list[str]]]:
    """This module's sites of `contents` (which lists every registered site of the store)."""
    return {site: held[site] for site in (SITE, OTHER)}
