"""Client IP → country (ISO 3166 alpha-2), from the database shipped inside geoip2fast:
no network look-ups at run time. Private, loopback and unknown addresses give "".

Answers are cached per address (at most COUNTRY_CACHE_SIZE addresses, least recently used
dropped): a visitor's page views come from one address. The cache lives in the collector's
memory only; nothing of it is written anywhere.

The package's IPv6 file, which holds the IPv4 networks too: its default file is IPv4 only,
and left every IPv6 visitor without a country."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property, lru_cache

from geoip2fast import GeoIP2Fast

from tally.client_ip import parse_ip

# ~200 bytes an entry: ~13 MB at most.
COUNTRY_CACHE_SIZE = 65_536


class CountryLookup:
    def __init__(self) -> None:
        self.country: Callable[[str], str] = lru_cache(maxsize=COUNTRY_CACHE_SIZE)(self._country)

    @cached_property
    def _database(self) -> GeoIP2Fast:
        return GeoIP2Fast(geoip2fast_data_file="geoip2fast-ipv6.dat.gz", verbose=False)

    def load(self) -> None:
        """Read the database now (~1 s), not on the first event."""
        _ = self._database

    def _country(self, ip: str) -> str:
        address = parse_ip(ip)
        if address is None:
            return ""
        # GeoIP2Fast.lookup's own steps, without the result object it formats for display
        # (a CIDR string, the elapsed time): that took ~3 of its ~4 µs. The version is pinned;
        # tests/unit/test_collector_input.py checks known addresses.
        database = self._database
        number = int(address)
        try:
            root, chunk, _first, last, _length = database._main_index_lookup(number)
            if number > last:
                return ""
            code = database._country_lookup(root, chunk)[0]
        except Exception:  # a lookup error is not worth failing an event over
            return ""
        return code if len(code) == 2 and code.isalpha() else ""
