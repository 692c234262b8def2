"""Request → PageViewEvent, as a named pipeline of small steps (after Plausible's ingestion).

Each step takes the draft event and the request context and fills in fields; reading
`PIPELINE` tells the whole enrichment path. Steps never see or store the raw IP beyond
hashing it.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import parse_qs, urlsplit
from uuid import uuid4

from tally.event import PageViewEvent


@dataclass(frozen=True)
class RequestContext:
    """What the collector knows about the sender, beyond the body."""

    client_ip: str
    user_agent: str
    received_at: datetime
    salt: bytes
    accept_language: str = ""


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
    fields: dict[str, object] = field(default_factory=dict)


Step = Callable[[Draft, RequestContext], None]

UTM_FIELDS = ("utm_source", "utm_medium", "utm_campaign", "utm_content", "utm_term")


def put_url_parts(draft: Draft, context: RequestContext) -> None:
    parts = urlsplit(draft.url)
    draft.fields["hostname"] = (parts.hostname or "").removeprefix("www.")
    draft.fields["path"] = parts.path or "/"
    query = parse_qs(parts.query)
    for utm in UTM_FIELDS:
        draft.fields[utm] = query.get(utm, [""])[0][:500]
    # ?ref= and ?source= are common stand-ins for utm_source (as in Plausible).
    if not draft.fields["utm_source"]:
        draft.fields["utm_source"] = (query.get("ref") or query.get("source") or [""])[0][:500]


def put_referrer(draft: Draft, context: RequestContext) -> None:
    referrer_host = (urlsplit(draft.referrer).hostname or "").removeprefix("www.") if draft.referrer else ""
    if referrer_host and referrer_host == draft.fields.get("hostname"):
        # A self-referral (navigation within the site) is not a traffic source.
        draft.referrer, referrer_host = "", ""
    draft.fields["referrer_domain"] = referrer_host


def put_language(draft: Draft, context: RequestContext) -> None:
    draft.fields["language"] = context.accept_language.split(",")[0].split(";")[0].strip()[:35]


def put_visitor_identity(draft: Draft, context: RequestContext) -> None:
    """visitor_id and ip_hash: keyed hashes with the day's salt, so no cookie and no raw IP."""
    draft.fields["visitor_id"] = keyed_hash(context.salt, draft.site, context.client_ip, context.user_agent)
    draft.fields["ip_hash"] = keyed_hash(context.salt, context.client_ip)


def keyed_hash(salt: bytes, *parts: str) -> str:
    return hmac.new(salt, "\x1f".join(parts).encode(), hashlib.blake2b).hexdigest()[:16]


PIPELINE: list[tuple[str, Step]] = [
    ("url_parts", put_url_parts),
    ("referrer", put_referrer),
    ("language", put_language),
    ("visitor_identity", put_visitor_identity),
]


def enrich(
    draft: Draft, context: RequestContext, pipeline: list[tuple[str, Step]] = PIPELINE
) -> PageViewEvent:
    for _name, step in pipeline:
        step(draft, context)
    return PageViewEvent(
        event_id=uuid4(),
        site=draft.site,
        name=draft.name,
        ts=draft.ts,
        received_at=context.received_at,
        url=draft.url,
        referrer=draft.referrer,
        props=draft.props,
        screen_width=draft.screen_width,
        **draft.fields,
    )
