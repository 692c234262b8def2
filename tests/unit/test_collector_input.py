"""The collector's door: what a browser may send, and what the client's IP is."""

from __future__ import annotations

from datetime import UTC, datetime

import crawleruseragents
import pytest
from pydantic import ValidationError

from collector.enrichment import Draft, Dropped, DropReason, RequestContext, build_pipeline, enrich
from collector.geo import CountryLookup
from collector.payload import BrowserEvent, ServerEvent
from collector.user_agent import classify, is_bot
from tally.client_ip import client_ip, network_key, parse_networks
from tally.event import PageViewEvent

WINDOWS_CHROME = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/130.0.0.0 Safari/537.36"
)
IPAD_SAFARI = (
    "Mozilla/5.0 (iPad; CPU OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/18.1 Mobile/15E148 Safari/604.1"
)
ANDROID_CHROME = (
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/130.0.0.0 Mobile Safari/537.36"
)
MAC_SAFARI = (
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/18.1 Safari/605.1.15"
)
LOOPBACK = parse_networks("127.0.0.1/8,::1/128")


def enriched(draft: Draft, context: RequestContext, steps: list) -> PageViewEvent:
    """The enriched event, read back through the contract (so every field is checked too)."""
    return PageViewEvent.model_validate(enrich(draft, context, steps))


def test_plausible_field_names_are_accepted() -> None:
    event = BrowserEvent.model_validate(
        {
            "d": "example.com",
            "n": "signup",
            "u": "https://example.com/a",
            "r": None,
            "p": '{"plan":"pro"}',
            "w": 390,
        }
    )
    assert (event.site, event.name, event.referrer, event.props, event.screen_width) == (
        "example.com",
        "signup",
        "",
        {"plan": "pro"},
        390,
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "https://example.com/"}, "site"),
        ({"site": "example.com", "url": "javascript:alert(1)"}, "url"),
        ({"site": "example.com", "url": "https://e.com/", "name": "x" * 121}, "name"),
        ({"site": "example.com", "url": "https://e.com/", "props": {"a": {"nested": "no"}}}, "props"),
        (
            {"site": "example.com", "url": "https://e.com/", "props": {str(i): "v" for i in range(31)}},
            "props",
        ),
        ({"site": "example.com", "url": "https://e.com/", "props": {"n": 1}}, "props"),
        ({"site": "example.com", "url": "https://e.com/", "event_id": "not-a-uuid"}, "event_id"),
        ({"site": "example.com", "url": "https://e.com/", "event_id": 7}, "event_id"),
    ],
)
def test_invalid_event_names_the_bad_field(body: dict, field: str) -> None:
    with pytest.raises(ValidationError) as error:
        BrowserEvent.model_validate(body)
    assert error.value.errors()[0]["loc"][0] in {field, "d", "u", "n", "p"}


ENGAGEMENT = {"n": "engagement", "d": "example.com", "u": "https://example.com/a"}


@pytest.mark.parametrize(
    ("vitals", "field"),
    [
        ({"lcp": -1}, "lcp"),
        ({"lcp_ms": 120_001}, "lcp_ms"),
        ({"inp": "fast"}, "inp"),
        ({"fcp": True}, "fcp"),
        ({"ttfb_ms": 1e9}, "ttfb_ms"),
        ({"lcp": float("inf")}, "lcp"),
        ({"inp": float("nan")}, "inp"),
        ({"cls": -0.01}, "cls"),
        ({"cls": 100.5}, "cls"),
        ({"cls": "NaN"}, "cls"),
    ],
)
def test_a_vital_out_of_bounds_names_its_field(vitals: dict, field: str) -> None:
    with pytest.raises(ValidationError) as error:
        BrowserEvent.model_validate(ENGAGEMENT | vitals)
    assert error.value.errors()[0]["loc"][0] == field


def test_vitals_reach_the_event_in_the_contracts_units_and_absent_ones_stay_unmeasured() -> None:
    sent = {"lcp": 2500.4, "cls": 0.1, "inp": 0, "ttfb": 120_000}
    payload = BrowserEvent.model_validate(ENGAGEMENT | sent)
    draft = _draft()
    draft.vitals = payload.vitals()
    event = enriched(draft, _context(), pipeline())
    # CLS 0.1 is exactly 100 thousandths (0.1 * 1000 is 100.00000000000001 as a float); an
    # INP of 0 is a measurement, an FCP not sent is none.
    assert (event.lcp_ms, event.cls_milli, event.inp_ms, event.fcp_ms, event.ttfb_ms) == (
        2500,
        100,
        0,
        None,
        120_000,
    )
    plain = enriched(_draft(), _context(), pipeline())
    assert (plain.lcp_ms, plain.cls_milli, plain.inp_ms, plain.fcp_ms, plain.ttfb_ms) == (None,) * 5


def test_the_senders_event_id_becomes_the_events() -> None:
    sent = "0192f3a4-5b6c-7d8e-9fa0-b1c2d3e4f5a6"
    payload = ServerEvent.model_validate({"site": "e.com", "url": "https://e.com/", "event_id": sent})
    draft = _draft()
    draft.event_id = payload.event_id
    event = enriched(draft, _context(), pipeline())
    assert str(event.event_id) == sent
    # Without one, the collector assigns a fresh id to each event.
    first, second = (enriched(_draft(), _context(), pipeline()) for _ in range(2))
    assert first.event_id != second.event_id


def test_server_event_takes_epoch_millis() -> None:
    event = ServerEvent.model_validate({"site": "e.com", "url": "https://e.com/", "ts": 1_700_000_000_000})
    assert event.ts == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)


def test_forwarded_for_is_ignored_from_untrusted_peer() -> None:
    assert client_ip("203.0.113.9", ["1.2.3.4"], LOOPBACK) == "203.0.113.9"


def test_forwarded_for_read_right_to_left_from_trusted_proxy() -> None:
    # The client prepended a spoofed address; the proxy appended the real one.
    assert client_ip("127.0.0.1", ["6.6.6.6, 198.51.100.7"], LOOPBACK) == "198.51.100.7"


def test_proxy_line_appended_after_the_clients_forged_line_wins() -> None:
    # HAProxy's `option forwardfor` adds its own header line rather than extending the client's.
    lines = ["6.6.6.6, 127.0.0.5", "198.51.100.7"]
    assert client_ip("127.0.0.1", lines, LOOPBACK) == "198.51.100.7"
    assert client_ip("127.0.0.1", ["not-an-ip", "2001:db8::7"], LOOPBACK) == "2001:db8::7"


def test_garbage_forwarded_for_falls_back_to_peer() -> None:
    assert client_ip("127.0.0.1", ["not-an-ip"], LOOPBACK) == "127.0.0.1"
    assert client_ip("127.0.0.1", [], LOOPBACK) == "127.0.0.1"


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("198.51.100.7", "198.51.100.7"),
        ("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"),
        ("2001:DB8:1:2::1", "2001:db8:1:2::/64"),
        ("::ffff:198.51.100.7", "198.51.100.7"),
        ("testclient", "testclient"),
    ],
)
def test_clients_are_keyed_on_the_address_or_the_ipv6_64(address: str, key: str) -> None:
    assert network_key(address) == key


def _context(ip: str = "198.51.100.7", ua: str = "Mozilla/5.0", salt: bytes = b"s" * 32) -> RequestContext:
    return RequestContext(
        client_ip=ip,
        user_agent=ua,
        received_at=datetime(2026, 11, 22, tzinfo=UTC),
        salt=salt,
        accept_language="de-CH,de;q=0.9",
    )


def _draft(
    url: str = "https://www.example.com/pricing?utm_source=news&utm_campaign=launch", referrer: str = ""
) -> Draft:
    return Draft(
        site="example.com",
        name="pageview",
        url=url,
        referrer=referrer,
        props={},
        screen_width=390,
        ts=datetime(2026, 11, 22, tzinfo=UTC),
    )


def pipeline(known: set[str] = frozenset({"example.com"}), blocked: set[str] = frozenset()) -> list:
    return build_pipeline(known.__contains__, blocked.__contains__, CountryLookup())


def test_enrichment_splits_url_and_utm() -> None:
    event = enriched(_draft(referrer="https://news.ycombinator.com/item?id=1"), _context(), pipeline())
    assert (event.hostname, event.path, event.utm_source, event.utm_campaign) == (
        "example.com",
        "/pricing",
        "news",
        "launch",
    )
    assert event.referrer_domain == "news.ycombinator.com"
    assert event.language == "de-CH"


def test_self_referral_is_dropped() -> None:
    event = enriched(_draft(referrer="https://example.com/"), _context(), pipeline())
    assert (event.referrer, event.referrer_domain) == ("", "")


def test_visitor_id_is_stable_within_a_salt_and_never_the_raw_ip() -> None:
    first = enriched(_draft(), _context(), pipeline())
    second = enriched(_draft(), _context(), pipeline())
    other_day = enriched(_draft(), _context(salt=b"t" * 32), pipeline())
    other_ip = enriched(_draft(), _context(ip="198.51.100.8"), pipeline())
    assert first.visitor_id == second.visitor_id
    assert first.visitor_id not in (other_day.visitor_id, other_ip.visitor_id)
    assert "198.51.100.7" not in first.to_json().decode()


def test_ipv6_clients_of_one_64_share_the_ip_hash_but_not_the_visitor_id() -> None:
    def event(ip: str) -> PageViewEvent:
        return enriched(_draft(), _context(ip=ip), pipeline())

    first, neighbour = event("2001:db8:1:2::a"), event("2001:db8:1:2:ffff::b")
    other_network = event("2001:db8:1:3::a")
    assert first.ip_hash == neighbour.ip_hash != other_network.ip_hash
    assert first.visitor_id != neighbour.visitor_id
    assert event("198.51.100.7").ip_hash != event("198.51.100.8").ip_hash


@pytest.mark.parametrize(
    ("known", "blocked", "user_agent", "reason"),
    [
        ({"other.com"}, set(), "Mozilla/5.0", DropReason.UNKNOWN_SITE),
        (
            {"example.com"},
            set(),
            "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
            DropReason.BOT,
        ),
        ({"example.com"}, set(), "", DropReason.BOT),
        ({"example.com"}, {"BLOCKED"}, "Mozilla/5.0", DropReason.BLOCKED_CLIENT),
    ],
)
def test_pipeline_drops_with_a_typed_reason(
    known: set, blocked: set, user_agent: str, reason: DropReason
) -> None:
    context = _context(ua=user_agent)
    if blocked:
        blocked = {enriched(_draft(), _context(), pipeline()).ip_hash}
    with pytest.raises(Dropped) as dropped:
        enriched(_draft(), context, pipeline(known, blocked))
    assert dropped.value.reason is reason


@pytest.mark.parametrize(
    ("user_agent", "browser", "os", "device"),
    [
        (WINDOWS_CHROME, "Chrome", "Windows", "desktop"),
        (IPAD_SAFARI, "Safari", "iOS", "tablet"),
        (ANDROID_CHROME, "Chrome", "Android", "mobile"),
        (MAC_SAFARI, "Safari", "Mac", "desktop"),
    ],
)
def test_user_agent_gives_browser_os_and_device_named_as_plausible_names_them(
    user_agent: str, browser: str, os: str, device: str
) -> None:
    event = enriched(_draft(), _context(ua=user_agent), pipeline())
    assert (event.browser, event.os, event.device) == (browser, os, device)


def test_bot_check_agrees_with_the_crawler_lists_own_matcher() -> None:
    """The RE2 alternation must say what the list's 1,500 `re` patterns say: every example
    the list ships is a bot, and the everyday browsers are not."""
    examples = [
        instance
        for entry in crawleruseragents.CRAWLER_USER_AGENTS_DATA
        for instance in entry.get("instances", [])
    ]
    browsers = [WINDOWS_CHROME, IPAD_SAFARI, ANDROID_CHROME]
    assert len(examples) > 1000
    assert [is_bot(ua) for ua in examples + browsers] == [
        crawleruseragents.is_crawler(ua) for ua in examples + browsers
    ]
    assert not any(is_bot(ua) for ua in browsers)


def test_user_agents_the_parser_never_saw_are_parsed_by_its_rules() -> None:
    # Uncached: each version is new to the cache, and still gets its family from the rules.
    for build in range(3):
        client = classify(
            f"Mozilla/5.0 (X11; Linux x86_64; rv:13{build}.0) Gecko/20100101 Firefox/13{build}.0"
        )
        assert (client.browser, client.os, client.device) == ("Firefox", "GNU/Linux", "desktop")


@pytest.mark.parametrize(
    ("address", "country"),
    [
        ("81.2.69.142", "GB"),
        ("8.8.8.8", "US"),
        ("2a00:1450:4001:80b::200e", "DE"),
        ("10.0.0.1", ""),
        ("127.0.0.1", ""),
        ("::1", ""),
        ("not-an-ip", ""),
    ],
)
def test_country_lookup_agrees_with_the_databases_own(address: str, country: str) -> None:
    countries = CountryLookup()
    assert countries.country(address) == country
    own = countries._database.lookup(address).country_code
    assert countries.country(address) == (own if len(own) == 2 and own.isalpha() else "")
