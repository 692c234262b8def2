"""A site's custom properties (migration 0068): the allow-list of custom event properties the
dashboard's Properties report offers, as Plausible's "custom properties" setting
(https://plausible.io/docs/sites-api, `PUT|DELETE /api/v1/sites/custom-props`).

Empty (every site at first): the report offers every property the site's events carry. With
names: only those. It changes what the dashboard offers, never what is recorded or counted: the
collector keeps every property sent, and the stats APIs answer any property, as Plausible's do.
A name is 1 to 300 characters (the collector's limit on a property key) without control
characters, kept as given: it is matched exactly against the events' property keys.
"""

from __future__ import annotations

import unicodedata

from clickhouse_connect.driver.client import Client

from storage import site_caps
from storage.queries.contract import MAX_PROPERTY_KEY
from storage.site_settings_rows import SettingsTable
from storage.sites import normalise, registered
from storage.tables import CUSTOM_PROPERTIES
from tally.refusal import Refused

# Unicode categories a name may not hold: control characters, and lone surrogates (which no
# UTF-8 store can keep).
_REFUSED_CATEGORIES = frozenset({"Cc", "Cs"})
TABLE = SettingsTable(CUSTOM_PROPERTIES, keys=("site", "property"))


class InvalidProperty(Refused):
    """A property name or a change Tally refuses; the message starts with the field at fault."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field=message.partition(": ")[0])


def clean_name(name: object) -> str:
    """`name` as a property name, or InvalidProperty naming `property`."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidProperty("property: required: a custom property's name, e.g. author")
    if len(name) > MAX_PROPERTY_KEY:
        raise InvalidProperty(f"property: at most {MAX_PROPERTY_KEY} characters (got {len(name)})")
    if any(unicodedata.category(char) in _REFUSED_CATEGORIES for char in name):
        raise InvalidProperty("property: a name without control characters")
    return name


def list_properties(client: Client, site: str) -> list[str]:
    """The site's custom properties, by name; empty when it has none (every property is shown)."""
    rows = TABLE.newest(client, "site = {site:String}", {"site": normalise(site)}, order=("property",))
    return [name for _, name in rows]


def add_property(client: Client, site: str, name: str) -> bool:
    """Adds `name` to the site's list; False when it was there already (nothing is written)."""
    site, name = registered(client, site, InvalidProperty), clean_name(name)
    current = list_properties(client, site)
    if name in current:
        return False
    site_caps.CUSTOM_PROPERTIES.check(len(current), InvalidProperty)
    _write(client, site, [name], removed=0)
    return True


def remove_property(client: Client, site: str, name: str) -> bool:
    """Takes `name` off the site's list; False when it was not there (nothing is written)."""
    site, name = normalise(site), clean_name(name)
    if name not in list_properties(client, site):
        return False
    _write(client, site, [name], removed=1)
    return True


def remove_all(client: Client, site: str) -> int:
    """Empties the site's list (the site is being deleted); how many names it held."""
    names = list_properties(client, site)
    if names:  # one insert for the whole list
        _write(client, normalise(site), names, removed=1)
    return len(names)


def _write(client: Client, site: str, names: list[str], removed: int) -> None:
    TABLE.write(client, [[site, name] for name in names], removed)
