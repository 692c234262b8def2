"""The PageViewEvent: the record on Kafka topic `pageviews` (JSON value, schema_version 1).

Every component agrees on this one definition: the collector builds it, the archiver
writes it to ClickHouse `events`, the Spark jobs read it. New fields may be added; none is
removed or changes meaning without a new schema_version (DESIGN.md).

Kafka's log outlives every deployment, so readers meet events of other releases: a field is
only ever added with a default (never as a required one); a reader ignores the fields it does
not know (extra="ignore" here, the schema Spark parses with) and takes the default of the ones
an older writer did not know (here, and stream_jobs/schema.py DEFAULTS).
tests/fault/test_event_contract_versions.py sends both kinds through the local stack.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

SCHEMA_VERSION = 1
#: The Web Vitals fields, in the contract's order (None = not measured).
VITAL_FIELDS = ("lcp_ms", "cls_milli", "inp_ms", "fcp_ms", "ttfb_ms")
NOT_MEASURED: dict[str, int | None] = dict.fromkeys(VITAL_FIELDS)


class PageViewEvent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    event_id: UUID
    schema_version: int = SCHEMA_VERSION
    site: str
    name: str = "pageview"
    ts: datetime
    received_at: datetime
    url: str
    hostname: str = ""
    path: str = "/"
    referrer: str = ""
    referrer_domain: str = ""
    utm_source: str = ""
    utm_medium: str = ""
    utm_campaign: str = ""
    utm_content: str = ""
    utm_term: str = ""
    visitor_id: str
    ip_hash: str
    country: str = ""
    browser: str = ""
    os: str = ""
    device: str = ""
    screen_width: int = 0
    language: str = ""
    props: dict[str, str] = Field(default_factory=dict)
    # Revenue of a goal event: a decimal string ("19.90") and its ISO-4217
    # currency ("EUR"); both empty when the event carries none.
    revenue_amount: str = ""
    revenue_currency: str = ""
    # Engagement events (name = 'engagement', Plausible's tracker and Tally's): the deepest
    # point of the page seen so far, in percent, and the engaged time since the page view's
    # previous engagement event, in ms. 0 on every other event.
    scroll_depth: int = 0
    engagement_ms: int = 0
    # Web Vitals of the page view, sent with its engagement event (tracker.js measures them
    # with PerformanceObserver): None where not measured — a browser without the API, a page
    # hidden before the first paint, any other event — which is not the same as 0 (a TTFB of
    # 0 ms from the back/forward cache is a measurement). Times in whole ms; CLS, a unitless
    # score, in thousandths as an integer (cls_milli = 250 is CLS 0.25) so it stays exact
    # through JSON, the archive and the histogram buckets (docs/architecture.md, "Web Vitals").
    lcp_ms: int | None = None
    cls_milli: int | None = None
    inp_ms: int | None = None
    fcp_ms: int | None = None
    ttfb_ms: int | None = None

    @property
    def key(self) -> bytes:
        """Kafka message key: keeps one visitor's events ordered within a partition."""
        return event_key(self.site, self.visitor_id)

    def to_json(self) -> bytes:
        return orjson.dumps(self.model_dump(mode="json"))

    @classmethod
    def from_json(cls, value: bytes) -> PageViewEvent:
        return cls.model_validate_json(value)


def event_key(site: str, visitor_id: str) -> bytes:
    return f"{site}:{visitor_id}".encode()


def encode_fields(fields: dict[str, object]) -> bytes:
    """The JSON value of an event whose fields the producer built itself — all of them, in
    the model's order, already of the model's types — byte for byte what `to_json` writes
    (tests/unit/test_event_encoding.py). The collector's hot path: building the pydantic model
    only to serialise it again cost ~30 µs an event."""
    return orjson.dumps(fields, option=orjson.OPT_UTC_Z)


def describe_validation_error(error: ValidationError, prefix: str = "", whole: str = "body") -> str:
    """The first thing wrong with a payload, as `field: message` (`whole` when no field is to
    blame): one line a sender can act on, the same whether the collector or the archiver saw it."""
    first = error.errors()[0]
    location = ".".join(str(part) for part in first["loc"]) or whole
    return f"{prefix}{location}: {first['msg']}"
