"""Revenue on a goal event (issue 16): Plausible's `revenue: {amount, currency}` and Tally's
tracker's `$` both reach the PageViewEvent as a decimal string and an ISO-4217 code; a bad
amount or currency is refused naming the field."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from collector.enrichment import Draft, RequestContext, build_pipeline, enrich
from collector.geo import CountryLookup
from collector.payload import BrowserEvent
from tally.event import PageViewEvent, describe_validation_error, encode_fields

PIPELINE = build_pipeline(
    is_known_site=lambda site: True, is_blocked=lambda ip_hash: False, countries=CountryLookup()
)
BASE = {"n": "Purchase", "u": "https://shop.example.com/thanks", "d": "shop.example.com"}


@pytest.mark.parametrize(
    ("sent", "amount", "currency"),
    [
        ({"revenue": {"amount": "19.90", "currency": "eur"}}, "19.9", "EUR"),  # Plausible's tracker
        ({"revenue": '{"amount": 1200, "currency": "JPY"}'}, "1200", "JPY"),  # JSON-encoded, as props
        ({"$": {"amount": 5.25, "currency": "USD"}}, "5.25", "USD"),  # Tally's tracker
        ({}, "", ""),
    ],
)
def test_revenue_reaches_the_event(sent: dict, amount: str, currency: str) -> None:
    payload = BrowserEvent.model_validate(BASE | {"p": {"plan": "pro"}} | sent)
    draft = Draft(
        site=payload.site, name=payload.name, url=payload.url, referrer="", props=payload.props,
        screen_width=0, ts=datetime(2026, 11, 24, tzinfo=UTC),
        revenue_amount=payload.revenue.amount_text if payload.revenue else "",
        revenue_currency=payload.revenue.currency if payload.revenue else "",
    )  # fmt: skip
    context = RequestContext(
        client_ip="81.2.69.142", user_agent="", received_at=datetime.now(UTC), salt=b"s", server_side=True
    )
    fields = enrich(draft, context, PIPELINE)
    event = PageViewEvent.model_validate(fields)
    assert (event.revenue_amount, event.revenue_currency, event.props) == (amount, currency, {"plan": "pro"})
    assert encode_fields(fields) == event.to_json()


@pytest.mark.parametrize(
    ("revenue", "named"),
    [
        ({"amount": "12,50", "currency": "EUR"}, "revenue.amount"),
        ({"amount": "NaN", "currency": "EUR"}, "revenue.amount"),
        ({"amount": True, "currency": "EUR"}, "revenue.amount"),
        ({"amount": "1e13", "currency": "EUR"}, "revenue.amount"),
        ({"amount": "10", "currency": "EURO"}, "revenue.currency"),
        ({"amount": "10"}, "revenue.currency"),
        ("not json", "revenue"),
    ],
)
def test_bad_revenue_is_refused_by_name(revenue: object, named: str) -> None:
    with pytest.raises(ValidationError) as refused:
        BrowserEvent.model_validate(BASE | {"revenue": revenue})
    assert describe_validation_error(refused.value).startswith(f"{named}:")
