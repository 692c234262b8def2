"""Revenue as Plausible's API shows it: `{"short": "$1.5K", "long": "$1,500.00", "value": 1500.0,
"currency": "USD"}` (Plausible formats with Cldr's `en` locale: Money.to_string!, short with one
fractional digit).

The symbols are Cldr `en`'s for the common currencies; any other ISO-4217 code is written before
the amount with a no-break space, as Cldr does for a currency without an `en` symbol.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

SYMBOLS = {
    "USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥", "CNY": "CN¥", "INR": "₹", "KRW": "₩",
    "CAD": "CA$", "AUD": "A$", "NZD": "NZ$", "HKD": "HK$", "MXN": "MX$", "BRL": "R$", "ILS": "₪",
    "TWD": "NT$", "VND": "₫", "PHP": "₱", "XAF": "FCFA", "XOF": "F\u202fCFA",
}  # fmt: skip
# Currencies without minor units (ISO 4217 exponent 0) among the common ones.
NO_MINOR_UNITS = frozenset({"JPY", "KRW", "VND", "CLP", "ISK", "UGX", "XAF", "XOF", "PYG"})
SHORT_STEPS = tuple(
    (Decimal(10) ** power, suffix) for power, suffix in ((12, "T"), (9, "B"), (6, "M"), (3, "K"))
)


def money(amount: Decimal, currency: str) -> dict[str, object]:
    """`amount` of `currency` in Plausible's revenue shape."""
    return {
        "short": _with_symbol(_short(amount), currency),
        "long": _with_symbol(_long(amount, currency), currency),
        "value": float(amount),
        "currency": currency,
    }


def _with_symbol(number: str, currency: str) -> str:
    sign, digits = ("-", number[1:]) if number.startswith("-") else ("", number)
    symbol = SYMBOLS.get(currency)
    return f"{sign}{symbol}{digits}" if symbol else f"{sign}{currency}\u00a0{digits}"


def _long(amount: Decimal, currency: str) -> str:
    places = 0 if currency in NO_MINOR_UNITS else 2
    rounded = amount.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN)
    return f"{rounded:,.{places}f}"


def _short(amount: Decimal) -> str:
    """One fractional digit, in thousands (K), millions (M), billions (B) or trillions (T)."""
    size = abs(amount)
    for step, suffix in SHORT_STEPS:
        if size >= step:
            return f"{amount / step:,.1f}{suffix}"
    return f"{amount:,.1f}"
