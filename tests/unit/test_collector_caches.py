"""The collector's hot-path caches (issue 34): an event enriched from what the collector has
seen before gets exactly the fields it would get the first time, the caches are bounded, and
a new day's salt gives new visitor ids from the next event on."""

from __future__ import annotations

import hmac
from datetime import UTC, datetime
from uuid import UUID

import pytest

from collector.enrichment import (
    Draft,
    RequestContext,
    build_pipeline,
    client_network,
    enrich,
    keyed_hash,
    referrer_domain,
    url_parts,
)
from collector.event_log import partition_for
from collector.geo import CountryLookup

SITE = "example.com"
CHROME = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36"
)
IPHONE = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/18.1.1 Mobile/15E148 Safari/604.1"
)
# (client IP, user agent, URL, hash mode, referrer): pages, UTMs, fragments, IPv4 and IPv6.
SENDERS = [
    ("81.2.69.142", CHROME, "https://www.example.com/pricing?utm_source=news&utm_campaign=launch", False, ""),
    ("8.8.8.8", IPHONE, "https://example.com/", False, "https://www.google.com/search?q=x"),
    ("2a00:1450:4001:80b::200e", CHROME, "https://example.com/app#/settings", True, "https://t.co/x1"),
    ("2a00:1450:4001:80b::1", IPHONE, "https://example.com/app#/settings", False, "https://example.com/"),
    ("::ffff:81.2.69.142", CHROME, "https://example.com/blog?ref=producthunt", False, ""),
    ("10.0.0.1", IPHONE, "https://example.com/docs?source=github&utm_medium=", False, "not a url"),
]


def _enrich_all(salt: bytes, countries: CountryLookup) -> list[dict[str, object]]:
    pipeline = build_pipeline(lambda site: True, lambda ip_hash: False, countries)
    received_at = datetime(2026, 11, 28, tzinfo=UTC)
    events = []
    for number, (ip, agent, url, hash_mode, referrer) in enumerate(SENDERS):
        draft = Draft(
            site=SITE,
            name="pageview",
            url=url,
            referrer=referrer,
            props={},
            screen_width=390,
            ts=received_at,
            hash_mode=hash_mode,
            event_id=UUID(int=number),
        )
        context = RequestContext(client_ip=ip, user_agent=agent, received_at=received_at, salt=salt)
        events.append(enrich(draft, context, pipeline))
    return events


def _forget_everything() -> None:
    for cached in (url_parts, referrer_domain, client_network, partition_for):
        cached.cache_clear()


def test_an_event_from_a_client_seen_before_is_enriched_as_the_first_time() -> None:
    salt = b"s" * 32
    _forget_everything()
    first = _enrich_all(salt, CountryLookup())
    countries = CountryLookup()
    _enrich_all(salt, countries)
    again = _enrich_all(salt, countries)  # every look-up answered from the caches now
    assert again == first
    assert countries.country.cache_info().hits >= len(SENDERS)
    assert [event["country"] for event in first[:3]] == ["GB", "US", "DE"]
    assert first[2]["path"] == "/app#/settings" and first[3]["path"] == "/app"


def test_a_new_salt_gives_new_visitor_ids_from_the_next_event_on() -> None:
    countries = CountryLookup()
    today, tomorrow = b"t" * 32, b"u" * 32
    before = _enrich_all(today, countries)
    after = _enrich_all(tomorrow, countries)
    # More salts than the keyed HMACs kept: each still hashes with its own.
    for other in range(6):
        _enrich_all(bytes([other]) * 32, countries)
    back = _enrich_all(today, countries)
    for old, new, same in zip(before, after, back, strict=True):
        assert new["visitor_id"] != old["visitor_id"] and new["ip_hash"] != old["ip_hash"]
        assert (same["visitor_id"], same["ip_hash"]) == (old["visitor_id"], old["ip_hash"])
        assert {k: v for k, v in new.items() if k not in ("visitor_id", "ip_hash")} == {
            k: v for k, v in old.items() if k not in ("visitor_id", "ip_hash")
        }


@pytest.mark.parametrize("parts", [("example.com", "81.2.69.142", CHROME), ("2a00:1450:4001:80b::/64",)])
def test_keyed_hashes_are_hmac_blake2b_of_the_parts(parts: tuple[str, ...]) -> None:
    salt = b"k" * 32
    expected = hmac.new(salt, "\x1f".join(parts).encode(), "blake2b512").hexdigest()[:16]
    assert keyed_hash(salt, *parts) == expected


def test_the_caches_are_bounded() -> None:
    for cached in (url_parts, referrer_domain, client_network, partition_for, CountryLookup().country):
        size = cached.cache_info().maxsize
        assert size is not None and size <= 65_536
