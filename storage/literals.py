"""ClickHouse literals for SQL that has to be written out as text, not sent with parameters.

Explore shows its starting query for the user to edit, and the endpoint forwards a GET's
settings as a SETTINGS clause: in both, a quote in a value must not change what the SQL means.
"""

from __future__ import annotations


def quote_string(value: str) -> str:
    """A ClickHouse string literal holding exactly `value`."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
