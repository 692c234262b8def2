"""Browser and operating-system names as Plausible's API names them: the one table.

The collector's parser (ua-parser, collector/user_agent.py) names some browsers and systems
otherwise than Plausible's (UAInspector's names, with Plausible's own merges of mobile
variants: plausible/analytics, lib/plausible/ingestion/event.ex `browser_name`): `Mac OS X` is
Plausible's `Mac`, `Mobile Safari` its `Safari`, `Edge` its `Microsoft Edge`. A filter written
for Plausible (`["is", "visit:os", ["Mac"]]`) must match, and a breakdown must show Plausible's
names, so that scripts and imported Plausible history (storage/imports.py stores Plausible's
names) line up with Tally's own rows.

So the names are Plausible's at both ends:
- at enrichment the collector stores Plausible's name (`plausible_name`);
- the archive and rollups written before keep the parser's names, so every read maps a stored
  name through the same table (`plausible_name_sql`, used by the query layer's dimension
  expressions: filters and breakdowns alike), and a filter value given in an old name is read
  as its new one (`plausible_value`), so a filter saved before still matches.
A visitor id hashes the user agent, and one user agent always has one name, so merging two
stored names into one row adds disjoint visitors (but on the day of the upgrade, when one
user agent may be stored under both names: its visitor counts once on raw, twice on agg).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# ua-parser's family → Plausible's name; a name not listed is the same in both.
BROWSER_NAMES: Mapping[str, str] = {
    "Chrome Mobile": "Chrome",
    "Chrome Mobile iOS": "Chrome",
    "Mobile Safari": "Safari",
    "Firefox Mobile": "Firefox",
    "Firefox iOS": "Firefox",
    "Edge": "Microsoft Edge",
    "Edge Mobile": "Microsoft Edge",
    "Opera Mobile": "Opera",
    "Opera Mini": "Opera",
    "Yandex Browser Lite": "Yandex Browser",
    # in-app browsers: Plausible counts every web view as one "Mobile App"
    "Chrome Mobile WebView": "Mobile App",
    "Mobile Safari UI/WKWebView": "Mobile App",
}
OS_NAMES: Mapping[str, str] = {
    "Mac OS X": "Mac",
    "Linux": "GNU/Linux",
}
NAMES: Mapping[str, Mapping[str, str]] = {"browser": BROWSER_NAMES, "os": OS_NAMES}


def plausible_name(dimension: str, stored: str) -> str:
    """`stored` (a browser or OS name as the parser gave it, or already Plausible's) as
    Plausible names it; any other dimension's value unchanged."""
    return NAMES.get(dimension, {}).get(stored, stored)


def plausible_values(dimension: str, values: Iterable[str]) -> tuple[str, ...]:
    """Filter values with old names read as Plausible's (`Mac OS X` is `Mac`)."""
    return tuple(plausible_name(dimension, value) for value in values)


def plausible_name_sql(dimension: str, column: str = "") -> str:
    """The ClickHouse expression naming the stored `column` (default: the column named as the
    `dimension`, `browser` or `os`) Plausible's way. The table's names are constants of this
    module (checked to hold no quote), never a user's value."""
    names, column = NAMES[dimension], column or dimension
    old, new = (", ".join(_quoted(name) for name in side) for side in (names.keys(), names.values()))
    return f"transform({column}, [{old}], [{new}], {column})"


def _quoted(name: str) -> str:
    if "'" in name or "\\" in name:
        raise ValueError(f"a client name with a quote or backslash: {name!r}")
    return f"'{name}'"
