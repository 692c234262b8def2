"""Request → PageViewEvent, as a named pipeline of small steps (after Plausible's ingestion).

Each step takes the draft event and the request context and fills in fields, or raises
`Dropped` with a reason from a closed set; the runner stops at the first drop. Reading
`build_pipeline` tells the whole enrichment path. The raw IP is used only to hash it and
to look up the country; it is never copied into the event.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from functools import lru_cache
from typing import Protocol
from urllib.parse import parse_qs, urlsplit
from uuid import UUID, uuid4

from collector.geo import CountryLookup
from collector.user_agent import classify, is_bot
from tally.client_ip import network_key
from tally.event import NOT_MEASURED, SCHEMA_VERSION


class _Mac(Protocol):
    def copy(self) -> _Mac: ...
    def update(self, message: bytes) -> None: ...
    def hexdigest(self) -> str: ...


class DropReason(StrEnum):
    BOT = "bot"
    UNKNOWN_SITE = "unknown_site"
    BLOCKED_CLIENT = "blocked_client"
    EXCLUDED = "excluded"  # by the site's own exclusions (collector/exclusions.py)


class Dropped(Exception):
    def __init__(self, reason: DropReason, rule: str = "") -> None:
        super().__init__(reason.value)
        self.reason = reason
        self.rule = rule  # for EXCLUDED: which kind of exclusion (ip, path, country)


@dataclass(frozen=True)
class RequestContext:
    """What the collector knows about the sender, beyond the body."""

    client_ip: str
    user_agent: str
    received_at: datetime
    salt: bytes  # the day's: ip_hash, and the visitor id unless `visitor_salt` is given
    accept_language: str = ""
    # A batch from an authenticated server-side sender (it may carry no user agent).
    server_side: bool = False
    # The salt of the site's visitor identity when it is not daily (storage/site_identity.py).
    visitor_salt: bytes | None = None


@dataclass
class Draft:
    """The event under construction: PageViewEvent's fields, filled step by step."""

    site: str
    name: str
    url: str
    referrer: str
    props: dict[str, str]
    screen_width: int
    ts: datetime
    hash_mode: bool = False
    event_id: UUID | None = None  # the sender's, if it gave one
    revenue_amount: str = ""
    revenue_currency: str = ""
    scroll_depth: int = 0  # engagement events only (tally.event)
    engagement_ms: int = 0
    vitals: dict[str, int | None] = field(default_factory=lambda: dict(NOT_MEASURED))  # tally.event
    fields: dict[str, object] = field(default_factory=dict)


Step = Callable[[Draft, RequestContext], None]

UTM_FIELDS = ("utm_source", "utm_medium", "utm_campaign", "utm_content", "utm_term")


def drop_bots(draft: Draft, context: RequestContext) -> None:
    # Every browser sends a user agent; only a trusted server-side sender may omit it.
    missing = not context.user_agent.strip() and not context.server_side
    if missing or (context.user_agent and is_bot(context.user_agent)):
        raise Dropped(DropReason.BOT)


def put_url_parts(draft: Draft, context: RequestContext) -> None:
    hostname, path, utms = url_parts(draft.url, draft.hash_mode)
    draft.fields["hostname"] = hostname
    draft.fields["path"] = path
    draft.fields.update(zip(UTM_FIELDS, utms, strict=True))


# A site's traffic repeats a few hundred page URLs: parsed once each (at most this many kept,
# least recently used dropped; ~1 KB an entry with the URL, ~16 MB at most).
URL_CACHE_SIZE = 16_384


@lru_cache(maxsize=URL_CACHE_SIZE)
def url_parts(url: str, hash_mode: bool) -> tuple[str, str, tuple[str, ...]]:
    """hostname (without www.), path (with the fragment in hash mode), the UTM tags in UTM_FIELDS' order."""
    parts = urlsplit(url)
    hostname = (parts.hostname or "").removeprefix("www.")
    fragment = f"#{parts.fragment}" if hash_mode and parts.fragment else ""
    path = (parts.path or "/") + fragment
    query = parse_qs(parts.query) if parts.query else {}
    utms = [query.get(utm, [""])[0][:500] for utm in UTM_FIELDS]
    # ?ref= and ?source= are common stand-ins for utm_source (as in Plausible).
    if not utms[0] and query:
        utms[0] = (query.get("ref") or query.get("source") or [""])[0][:500]
    return hostname, path, tuple(utms)


def put_referrer(draft: Draft, context: RequestContext) -> None:
    referrer_host = referrer_domain(draft.referrer) if draft.referrer else ""
    if referrer_host and referrer_host in (draft.fields.get("hostname"), draft.site):
        # A self-referral (navigation within the site) is not a traffic source.
        draft.referrer, referrer_host = "", ""
    draft.fields["referrer_domain"] = referrer_host


@lru_cache(maxsize=URL_CACHE_SIZE)
def referrer_domain(referrer: str) -> str:
    """The referrer's host without www. (a few search engines and social sites send most)."""
    return (urlsplit(referrer).hostname or "").removeprefix("www.")


def put_user_agent(draft: Draft, context: RequestContext) -> None:
    client = classify(context.user_agent)
    draft.fields.update(browser=client.browser, os=client.os, device=client.device)


def put_language(draft: Draft, context: RequestContext) -> None:
    draft.fields["language"] = context.accept_language.split(",")[0].split(";")[0].strip()[:35]


def put_visitor_identity(draft: Draft, context: RequestContext) -> None:
    """visitor_id and ip_hash: keyed hashes with a salt, so no cookie and no raw IP. ip_hash takes
    the day's salt; visitor_id the salt of the site's identity (daily unless its owner chose a
    weekly or monthly one: collector/salts.py), so it lives as long as that salt.

    ip_hash keys rate limits and blocks, so it hashes the client's network (an IPv6 /64):
    a client that may use any address of its /64 must not get a fresh limit per address.
    visitor_id keeps the full address: a /64 is a whole home or office, and hashing it would
    merge everyone there with the same browser into one visitor (temporary IPv6 addresses
    change about daily, as the salt does, so they split few visitors).
    """
    visitor_salt = context.visitor_salt or context.salt
    draft.fields["visitor_id"] = keyed_hash(visitor_salt, draft.site, context.client_ip, context.user_agent)
    draft.fields["ip_hash"] = keyed_hash(context.salt, client_network(context.client_ip))


# The network a client address is keyed on, per address (~200 bytes an entry, ~13 MB at most).
client_network = lru_cache(maxsize=65_536)(network_key)


def keyed_hash(salt: bytes, *parts: str) -> str:
    """HMAC-BLAKE2b-512 of the parts, 16 hex digits."""
    mac = _keyed_with(salt).copy()
    mac.update("\x1f".join(parts).encode())
    return mac.hexdigest()[:16]


# A few salts are current at once: the day's and each rotation's (and, around midnight, the
# next day's or period's).
@lru_cache(maxsize=8)
def _keyed_with(salt: bytes) -> _Mac:
    """The HMAC keyed with a salt, made once per salt (the key's two padded blocks hashed
    once) and copied for each message. OpenSSL's HMAC object itself where hmac.py holds one:
    its copy, update and hexdigest are C, where hmac.py's wrappers add ~0.4 µs a hash."""
    keyed = hmac.new(salt, digestmod="blake2b512")
    return getattr(keyed, "_hmac", None) or keyed


# (site, client IP, path, country) -> the kind of exclusion the event falls under, or None.
ExclusionRule = Callable[[str, str, str, str], str | None]


def build_pipeline(
    is_known_site: Callable[[str], bool],
    is_blocked: Callable[[str], bool],
    countries: CountryLookup,
    excluded_by: ExclusionRule = lambda site, ip, path, country: None,
) -> list[tuple[str, Step]]:
    """The collector's steps, in order; the parts that need state come in as functions."""

    def drop_unknown_sites(draft: Draft, context: RequestContext) -> None:
        if not is_known_site(draft.site):
            raise Dropped(DropReason.UNKNOWN_SITE)

    def drop_blocked_clients(draft: Draft, context: RequestContext) -> None:
        if is_blocked(str(draft.fields["ip_hash"])):
            raise Dropped(DropReason.BLOCKED_CLIENT)

    def put_country(draft: Draft, context: RequestContext) -> None:
        draft.fields["country"] = countries.country(context.client_ip)

    def drop_excluded(draft: Draft, context: RequestContext) -> None:
        path, country = str(draft.fields["path"]), str(draft.fields["country"])
        if (rule := excluded_by(draft.site, context.client_ip, path, country)) is not None:
            raise Dropped(DropReason.EXCLUDED, rule)

    return [
        ("unknown_site", drop_unknown_sites),
        ("bot", drop_bots),
        ("visitor_identity", put_visitor_identity),
        ("blocked_client", drop_blocked_clients),
        ("url_parts", put_url_parts),
        ("referrer", put_referrer),
        ("user_agent", put_user_agent),
        ("country", put_country),
        ("excluded", drop_excluded),
        ("language", put_language),
    ]


def enrich(draft: Draft, context: RequestContext, pipeline: list[tuple[str, Step]]) -> dict[str, object]:
    """Run the steps; the event's fields, in PageViewEvent's order (tally.event.encode_fields
    turns them into the log's value). Raises Dropped at the first step that drops the event."""
    for _name, step in pipeline:
        step(draft, context)
    fields = draft.fields
    return {
        "event_id": draft.event_id or uuid4(),
        "schema_version": SCHEMA_VERSION,
        "site": draft.site,
        "name": draft.name,
        "ts": draft.ts,
        "received_at": context.received_at,
        "url": draft.url,
        "hostname": fields["hostname"],
        "path": fields["path"],
        "referrer": draft.referrer,
        "referrer_domain": fields["referrer_domain"],
        **{utm: fields[utm] for utm in UTM_FIELDS},
        "visitor_id": fields["visitor_id"],
        "ip_hash": fields["ip_hash"],
        "country": fields["country"],
        "browser": fields["browser"],
        "os": fields["os"],
        "device": fields["device"],
        "screen_width": draft.screen_width,
        "language": fields["language"],
        "props": draft.props,
        "revenue_amount": draft.revenue_amount,
        "revenue_currency": draft.revenue_currency,
        "scroll_depth": draft.scroll_depth,
        "engagement_ms": draft.engagement_ms,
        **draft.vitals,
    }
