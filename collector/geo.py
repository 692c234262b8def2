"""Client IP → country (ISO 3166 alpha-2), from the database shipped inside geoip2fast:
no network look-ups at run time. Private, loopback and unknown addresses give ""."""

from __future__ import annotations

from functools import cached_property

from geoip2fast import GeoIP2Fast


class CountryLookup:
    @cached_property
    def _database(self) -> GeoIP2Fast:
        return GeoIP2Fast(verbose=False)

    def country(self, ip: str) -> str:
        try:
            code = self._database.lookup(ip).country_code
        except Exception:  # a malformed address is not worth failing an event over
            return ""
        return code if len(code) == 2 and code.isalpha() else ""
