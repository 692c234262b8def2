"""Saved segments: named filter expressions per site (migration 0041).

A segment's filters are kept as given, in Plausible's v2 filter syntax (a JSON list of filters,
e.g. `[["is", "visit:country", ["DE"]], ["contains", "event:page", ["/blog"]]]`), so one
segment serves the dashboard's picker and the v2 API's `["is", "segment", [id]]` alike. Whether
Tally can answer them is checked by the caller (dashboard/segments.py) before `add_segment`: the
store keeps only what was checked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from clickhouse_connect.driver.client import Client

from storage import site_caps
from storage.site_settings_rows import SettingsTable
from storage.sites import normalise, registered
from tally.refusal import Refused

SEGMENTS = "segments"
TABLE = SettingsTable(SEGMENTS, keys=("site", "id"), values=("name", "filters"))
MAX_NAME = 120
MAX_FILTERS_JSON = 16 * 1024


class InvalidSegment(Refused):
    """A segment Tally cannot add, find or remove; the message names what is wrong."""


class TooManySegments(InvalidSegment):
    """The site holds as many segments as site_caps allows (not a mistake in the segment itself)."""


@dataclass(frozen=True)
class Segment:
    site: str
    id: int
    name: str
    filters: list[Any]  # Plausible's v2 filter list


def parse_filters(text: str) -> list[Any]:
    """The JSON filter list `text`, or InvalidSegment naming what is wrong with it."""
    if len(text) > MAX_FILTERS_JSON:
        raise InvalidSegment(f"filters: at most {MAX_FILTERS_JSON // 1024} KiB of JSON")
    try:
        filters = json.loads(text)
    except ValueError as error:
        raise InvalidSegment(f"filters: not JSON ({error})") from None
    if not isinstance(filters, list) or not filters:
        raise InvalidSegment('filters: a JSON list of filters, e.g. [["is", "visit:country", ["DE"]]]')
    return filters


def checked_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > MAX_NAME or not name.isprintable():
        raise InvalidSegment(f"a segment's name has 1 to {MAX_NAME} printable characters")
    return name


def add_segment(client: Client, site: str, name: str, filters: list[Any]) -> Segment:
    site, name = normalise(site), checked_name(name)
    registered(client, site, InvalidSegment)
    existing = list_segments(client, site)
    if any(segment.name == name for segment in existing):
        raise InvalidSegment(f"{site} already has a segment {name!r}")
    site_caps.SEGMENTS.check(len(existing), TooManySegments)
    # Ids count up over all sites: an id names one segment, as in Plausible.
    last = client.query(f"SELECT max(id) FROM {SEGMENTS}").result_rows[0][0] or 0
    segment = Segment(site, int(last) + 1, name, filters)
    _write(client, segment, removed=0)
    return segment


def rename_segment(client: Client, site: str, name_or_id: str | int, new_name: str) -> Segment:
    """The segment under its new name (same id, same filters); InvalidSegment if taken."""
    segment, new_name = find_segment(client, site, name_or_id), checked_name(new_name)
    if any(other.name == new_name and other.id != segment.id for other in list_segments(client, site)):
        raise InvalidSegment(f"{segment.site} already has a segment {new_name!r}")
    renamed = replace(segment, name=new_name)
    _write(client, renamed, removed=0)
    return renamed


def replace_filters(client: Client, site: str, name_or_id: str | int, filters: list[Any]) -> Segment:
    """The segment with new filters (checked by the caller, as for add_segment)."""
    updated = replace(find_segment(client, site, name_or_id), filters=filters)
    _write(client, updated, removed=0)
    return updated


def remove_segment(client: Client, site: str, name: str) -> Segment:
    segment = find_segment(client, site, name)
    _write(client, segment, removed=1)
    return segment


def list_segments(client: Client, site: str) -> list[Segment]:
    """The site's segments, by name."""
    rows = TABLE.newest(client, "site = {site:String}", {"site": normalise(site)})
    segments = [Segment(site_, int(id_), name, json.loads(filters)) for site_, id_, name, filters in rows]
    return sorted(segments, key=lambda segment: segment.name)


def find_segment(client: Client, site: str, name_or_id: str | int) -> Segment:
    """The site's segment with this name or id, or InvalidSegment."""
    for segment in list_segments(client, site):
        if segment.name == str(name_or_id).strip() or str(segment.id) == str(name_or_id):
            return segment
    raise InvalidSegment(
        f"{normalise(site)} has no segment {name_or_id!r} (see 'tally segments list {site}')"
    )


def _write(client: Client, segment: Segment, removed: int) -> None:
    TABLE.write(client, [[segment.site, segment.id, segment.name, json.dumps(segment.filters)]], removed)
