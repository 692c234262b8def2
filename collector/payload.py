"""What a browser (or a server-side sender) may post, validated with pydantic.

Native field names and the Plausible Events API's short names are both accepted.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any
from uuid import UUID

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from tally.client_ip import parse_ip

MAX_PROPS = 30
MAX_NAME_LENGTH = 120
# An engagement event's engaged time covers one page view since its previous engagement
# event: more than a day of it is no browser's measurement.
MAX_ENGAGEMENT_MS = 24 * 3600 * 1000

# Web Vitals (engagement events): times beyond two minutes are no page load a browser reports
# but a clock gone wrong; a layout shift score beyond 100 is no page's.
MAX_VITAL_MS = 120_000
MAX_CLS = 100

ShortString = Annotated[str, Field(max_length=2048)]
VitalMs = Annotated[int, Field(ge=0, le=MAX_VITAL_MS)]
# Revenue amounts: up to 12 digits before the point and 6 after (the archive's Decimal(18, 6)).
MAX_REVENUE = Decimal("1e12")


class Revenue(BaseModel):
    """A revenue goal event's amount and currency: Plausible's `revenue: {amount, currency}`,
    Tally's tracker's `$`. The amount may be a number or a decimal string."""

    model_config = ConfigDict(extra="ignore")

    amount: Decimal
    currency: Annotated[str, Field(pattern=r"^[A-Za-z]{3}$")]

    @field_validator("amount", mode="before")
    @classmethod
    def _decimal(cls, amount: Any) -> Any:
        if isinstance(amount, bool) or not isinstance(amount, int | float | str):
            raise ValueError("must be a number or a decimal string")
        try:
            value = Decimal(str(amount).strip())
        except InvalidOperation:
            raise ValueError("must be a number or a decimal string") from None
        if not value.is_finite() or abs(value) >= MAX_REVENUE:
            raise ValueError("must be a finite amount below 10^12")
        return value.quantize(Decimal("0.000001"))

    @field_validator("currency")
    @classmethod
    def _upper(cls, currency: str) -> str:
        return currency.upper()

    @property
    def amount_text(self) -> str:
        """The amount as the PageViewEvent carries it: a plain decimal string."""
        return format(self.amount.normalize(), "f")


class BrowserEvent(BaseModel):
    """One event from tracker.js (POST /api/event)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    site: Annotated[str, Field(min_length=1, max_length=253)] = Field(
        validation_alias=AliasChoices("site", "d", "domain")
    )
    name: Annotated[str, Field(min_length=1, max_length=MAX_NAME_LENGTH)] = Field(
        default="pageview", validation_alias=AliasChoices("name", "n")
    )
    url: ShortString = Field(validation_alias=AliasChoices("url", "u"))
    referrer: ShortString = Field(default="", validation_alias=AliasChoices("referrer", "r"))
    props: dict[str, str] = Field(default_factory=dict, validation_alias=AliasChoices("props", "p", "m"))
    # Hash-based routing (tracker's data-hash): the URL fragment is part of the page's path.
    hash_mode: bool = Field(default=False, validation_alias=AliasChoices("hash_mode", "h"))
    # The archive keeps a UInt16; no screen is 65,536 px wide.
    screen_width: Annotated[int, Field(ge=0, le=65_535)] = Field(
        default=0, validation_alias=AliasChoices("screen_width", "w")
    )
    # The sender's own id for the event: re-sent with the same id (after a lost 202, a 503, a
    # timeout), it is archived and counted once (docs/architecture.md, "Retries count once").
    event_id: UUID | None = Field(default=None, validation_alias=AliasChoices("event_id", "i"))
    revenue: Revenue | None = Field(default=None, validation_alias=AliasChoices("revenue", "$"))

    @field_validator("revenue", mode="before")
    @classmethod
    def _revenue_object(cls, revenue: Any) -> Any:
        if isinstance(revenue, str):  # Plausible may send it JSON-encoded, as props
            import orjson

            try:
                return orjson.loads(revenue)
            except orjson.JSONDecodeError:
                raise ValueError("must be an object {amount, currency}") from None
        return revenue

    # Engagement events (Plausible's short keys): the deepest point of the page seen, in
    # percent, and the engaged time since the previous engagement event, in ms.
    scroll_depth: Annotated[int, Field(ge=0, le=100)] = Field(
        default=0, validation_alias=AliasChoices("scroll_depth", "sd")
    )
    engagement_ms: Annotated[int, Field(ge=0, le=MAX_ENGAGEMENT_MS)] = Field(
        default=0, validation_alias=AliasChoices("engagement_ms", "e")
    )

    # Web Vitals of the page view (tracker.js's short keys, or the contract's names): absent
    # when not measured. Times in ms (a fraction is rounded), CLS as the browser's float.
    lcp_ms: VitalMs | None = Field(default=None, validation_alias=AliasChoices("lcp_ms", "lcp"))
    cls: Annotated[float, Field(ge=0, le=MAX_CLS, allow_inf_nan=False)] | None = Field(default=None)
    inp_ms: VitalMs | None = Field(default=None, validation_alias=AliasChoices("inp_ms", "inp"))
    fcp_ms: VitalMs | None = Field(default=None, validation_alias=AliasChoices("fcp_ms", "fcp"))
    ttfb_ms: VitalMs | None = Field(default=None, validation_alias=AliasChoices("ttfb_ms", "ttfb"))

    @field_validator("lcp_ms", "inp_ms", "fcp_ms", "ttfb_ms", mode="before")
    @classmethod
    def _whole_ms(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("must be a number of milliseconds")
        # A fraction is rounded; NaN and infinities go on to the int check, which names them.
        return round(value) if isinstance(value, float) and math.isfinite(value) else value

    def vitals(self) -> dict[str, int | None]:
        """The vitals as the contract carries them (tally.event.VITAL_FIELDS): CLS in
        thousandths, an integer."""
        cls_milli = None if self.cls is None else round(self.cls * 1000)
        return {
            "lcp_ms": self.lcp_ms,
            "cls_milli": cls_milli,
            "inp_ms": self.inp_ms,
            "fcp_ms": self.fcp_ms,
            "ttfb_ms": self.ttfb_ms,
        }

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if not url.lower().startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL")
        return url

    @field_validator("referrer", mode="before")
    @classmethod
    def _null_referrer(cls, referrer: Any) -> Any:
        return "" if referrer is None else referrer

    @field_validator("props", mode="before")
    @classmethod
    def _flat_string_map(cls, props: Any) -> Any:
        if props is None:
            return {}
        if isinstance(props, str):  # Plausible sends props as a JSON-encoded string
            import orjson

            try:
                props = orjson.loads(props)
            except orjson.JSONDecodeError:
                raise ValueError("must be a JSON object of strings") from None
        if not isinstance(props, dict):
            raise ValueError("must be an object of string values")
        if len(props) > MAX_PROPS:
            raise ValueError(f"at most {MAX_PROPS} keys")
        if not all(
            isinstance(value, str) and len(value) <= 2000 and len(key) <= 300 for key, value in props.items()
        ):
            raise ValueError("must be a flat map of strings (no nesting, numbers or nulls)")
        return props


class ServerEvent(BrowserEvent):
    """One event of a batch (POST /api/events): may carry its own time and client IP."""

    ts: datetime | None = None
    ip: str | None = None
    user_agent: Annotated[str, Field(max_length=1000)] = ""

    @field_validator("ip")
    @classmethod
    def _ip_address(cls, ip: str | None) -> str | None:
        if ip is not None and parse_ip(ip) is None:
            raise ValueError("must be an IPv4 or IPv6 address")
        return ip

    @field_validator("ts", mode="before")
    @classmethod
    def _epoch_ms(cls, ts: Any) -> Any:
        if isinstance(ts, int | float) and not isinstance(ts, bool):
            return datetime.fromtimestamp(ts / 1000, UTC)
        return ts

    @field_validator("ts")
    @classmethod
    def _aware(cls, ts: datetime | None) -> datetime | None:
        if ts is not None and ts.tzinfo is None:
            return ts.replace(tzinfo=UTC)
        return ts
