"""Revenue as Plausible's API shows money: the known answers of Plausible's own tests
(test/plausible_web/controllers/api/stats_controller/regions_test.exs: $1,500.00 is "$1.5K")."""

from __future__ import annotations

from decimal import Decimal

import pytest

from dashboard.http_api.plausible.money import money


@pytest.mark.parametrize(
    ("amount", "currency", "short", "long"),
    [
        ("1500", "USD", "$1.5K", "$1,500.00"),  # Plausible's test
        ("3000", "USD", "$3.0K", "$3,000.00"),  # Plausible's test
        ("10.5", "EUR", "€10.5", "€10.50"),
        ("1234567.891", "GBP", "£1.2M", "£1,234,567.89"),
        ("30", "JPY", "¥30.0", "¥30"),  # no minor units
        ("-12.5", "USD", "-$12.5", "-$12.50"),  # a refund
        ("99", "CHF", "CHF\u00a099.0", "CHF\u00a099.00"),  # no `en` symbol: the code
    ],
)
def test_money_is_shown_as_plausible_shows_it(amount: str, currency: str, short: str, long: str) -> None:
    assert money(Decimal(amount), currency) == {
        "short": short,
        "long": long,
        "value": float(Decimal(amount)),
        "currency": currency,
    }
