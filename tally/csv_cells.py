"""The cells of every CSV file Tally writes (Explore's download, `tally export --format csv`,
`tally query --format csv`): each value as text a spreadsheet shows, and never as a formula.

Most of what these files hold was sent to the collector by anyone's browser — paths, referrers,
UTM tags, event names and properties — and a spreadsheet runs a cell that starts with `=`, `+`,
`-`, `@`, a tab or a carriage return as a formula (`=HYPERLINK("http://evil", "Click")`, DDE's
`=cmd|' /C calc'!A0`), on the machine of the site owner who opened the file. OWASP's rule
(CSV injection): such a text cell is written with a leading `'`, which spreadsheets take as
"this is text" and do not show. Numbers stay numbers: only text is neutralised, and text that is
nothing but a decimal number (a refund's revenue "-12.50", a Decimal printed as text) cannot
hold a formula, so it is written as it is.

`csv_text` is the one way to turn rows into CSV: every writer calls it, so a new writer cannot
forget the rule.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime

# What makes a spreadsheet read a cell as a formula (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# A decimal number written as text: what a spreadsheet reads as that number, nothing else.
_DECIMAL_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def plain(value: object) -> object:
    """A value a table or a CSV file can show: numbers and text as they are, the rest as text."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime):  # as ClickHouse prints it: UTC, to the millisecond
        utc = value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
        return utc.isoformat(sep=" ", timespec="milliseconds")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, default=str, ensure_ascii=False)
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)  # UUIDs, decimals, IP addresses


def spreadsheet_safe(value: object) -> object:
    """The value, or — text a spreadsheet would run as a formula — the text behind a `'`."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _DECIMAL_NUMBER.fullmatch(value):
        return "'" + value
    return value


def csv_cell(value: object) -> object:
    """What a CSV file holds for `value`: shown as text where it is no number, never a formula."""
    return spreadsheet_safe(plain(value))


def csv_text(rows: Iterable[Sequence[object]]) -> str:
    """Rows (the header is a row too: a column alias is text an author chose) as CSV lines."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerows([csv_cell(value) for value in row] for row in rows)
    return buffer.getvalue()
