"""Annotations: notes on a site's timeline (migration 0067), and the ones Tally writes itself.

A note is on a date (drawn at that date's midnight in the site's zone, as the zone is when it is
read) or at an instant (UTC); its text is data, never markup (the dashboard and the email report
show it as text), at most MAX_TEXT characters on one line; its kind is `note` or `deploy` (a CI
pipeline's, `POST /api/v1/annotations`). Admins write them (dashboard/http_api/annotations.py, the
Settings view, `tally annotations`); every reader of the site sees them.

The automatic ones are read, when a range is listed, from what Tally already records, never
copied here: a definitions version applied (storage/definitions.py's switches: goals,
exclusions, channel rules, the session gap; the changes that concern this site or every site),
an imported file (storage/imports.py: on its first and last day, where the imported history
begins and ends; a file imported again is one record, so one marker) and an alert fired
(storage/alert_rules.py's `alerts`). They have ids of their own (`definitions-…`, `import-…`,
`alert-…`) and cannot be removed: they are the record of what happened.

Limits per site: MAX_NOTES notes (the next is refused, naming the limit) and the MAX_AUTOMATIC
newest automatic ones shown (`oldest_automatic_kept`: older ones drop out of every range).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Literal, get_args

from clickhouse_connect.driver.client import Client

from storage import alert_rules, definitions, imports, sites
from storage.calendar import UTC_NAME, zone
from storage.site_settings_rows import SettingsTable
from storage.sites import normalise, site_timezone
from tally.refusal import Refused

TABLE = "annotations"
# Read with FINAL, as always: a note's newest row whole (ReplacingMergeTree's pick).
NOTES = SettingsTable(
    TABLE, keys=("site", "id"), values=("whole_day", "day", "at", "text", "author", "kind"), final=True
)
MAX_TEXT = 500
MAX_AUTHOR = 254
#: How many notes (and deploys) a site keeps: the next one is refused. And how many of Tally's
#: own a site shows: beyond them, the oldest automatic ones are no longer listed.
MAX_NOTES = 500
MAX_AUTOMATIC = 500
EARLIEST = date(1970, 1, 1)
LATEST = date(2199, 12, 31)

Kind = Literal["note", "deploy"]
KINDS: tuple[Kind, ...] = get_args(Kind)
AutomaticKind = Literal["definitions", "import", "alert"]
AUTOMATIC_KINDS: tuple[AutomaticKind, ...] = get_args(AutomaticKind)
_RULE_CHANGE = re.compile(r"^\w+ on (\S+):")


class InvalidAnnotation(Refused):
    """An annotation Tally cannot add or remove; the message starts with the field at fault."""

    def __init__(self, field: str, problem: str, kind: Literal["invalid", "not_found"] = "invalid") -> None:
        super().__init__(f"{field}: {problem}", field=field, kind=kind)


@dataclass(frozen=True)
class Annotation:
    id: str
    site: str
    at: datetime  # UTC; for a note on a date, that date's midnight in the site's zone
    day: date | None  # the date of a note on a date; None for one at an instant
    text: str
    author: str
    kind: str  # KINDS, or AUTOMATIC_KINDS for the ones Tally writes

    @property
    def automatic(self) -> bool:
        return self.kind in AUTOMATIC_KINDS


# --- checking ------------------------------------------------------------------------------


def clean_text(text: object) -> str:
    """One line of at most MAX_TEXT characters (runs of whitespace, newlines too, become one space)."""
    if not isinstance(text, str):
        raise InvalidAnnotation("text", "a string")
    cleaned = " ".join(text.split())
    if not cleaned:
        raise InvalidAnnotation("text", "required: what happened, e.g. 'Launched the new pricing page'")
    if len(cleaned) > MAX_TEXT:
        raise InvalidAnnotation("text", f"at most {MAX_TEXT} characters (got {len(cleaned)})")
    if not cleaned.isprintable():
        raise InvalidAnnotation("text", "printable characters only")
    return cleaned


def clean_kind(kind: object) -> Kind:
    if kind not in KINDS:
        raise InvalidAnnotation("kind", f"one of {', '.join(KINDS)} (the others are Tally's own)")
    return kind  # type: ignore[return-value]


def parse_day(text: object, field: str = "date") -> date:
    """A date, YYYY-MM-DD."""
    try:
        if not isinstance(text, str) or len(text.strip()) != 10:
            raise ValueError
        day = date.fromisoformat(text.strip())
    except ValueError:
        raise InvalidAnnotation(field, "a date as YYYY-MM-DD, e.g. 2026-11-10") from None
    if not EARLIEST <= day <= LATEST:
        raise InvalidAnnotation(field, f"between {EARLIEST} and {LATEST}")
    return day


def parse_instant(text: object, field: str = "datetime") -> datetime:
    """An ISO-8601 date-time, in UTC (a Z or an offset, converted; none: taken as UTC)."""
    try:
        if not isinstance(text, str) or "T" not in text.upper():
            raise ValueError
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidAnnotation(field, "an ISO-8601 date-time, e.g. 2026-11-10T09:30:00Z") from None
    if not EARLIEST.year < parsed.year < LATEST.year:
        raise InvalidAnnotation(field, f"between {EARLIEST.year + 1} and {LATEST.year - 1}")
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)


def registered(client: Client, site: str) -> str:
    """`site` as the registry spells it, if registered (else a refusal naming the site)."""
    try:
        return sites.registered(client, site, _not_registered)
    except sites.InvalidDomain:
        raise InvalidAnnotation("site", f"{site[:100]!r} is not a site name") from None


def _not_registered(message: str) -> InvalidAnnotation:
    return InvalidAnnotation("site", message.removeprefix("site: "), "not_found")


# --- writing -------------------------------------------------------------------------------


def add(
    client: Client,
    site: str,
    when: date | datetime,
    text: str,
    author: str,
    kind: str = "note",
) -> Annotation:
    """A note on `site` on a date or at an instant; returns it with its id."""
    site = registered(client, site)
    text, kind = clean_text(text), clean_kind(kind)
    if len(list_notes(client, site)) >= MAX_NOTES:
        raise InvalidAnnotation(
            "site", f"{site} has {MAX_NOTES} notes already, the most a site keeps; remove one first"
        )
    if isinstance(when, datetime):
        at = (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC)
        day = None
    else:
        at, day = _midnight(when, site_timezone(client, site)), when
    note = Annotation(uuid.uuid4().hex[:12], site, at, day, text, author[:MAX_AUTHOR], kind)
    _write(client, note, removed=0)
    return note


def remove(client: Client, site: str, annotation_id: str) -> Annotation:
    """Remove a note of `site` by its id (an automatic one cannot be: it is a record)."""
    site = registered(client, site)
    wanted = annotation_id.strip()
    if wanted.split("-", 1)[0] in AUTOMATIC_KINDS:
        raise InvalidAnnotation("id", f"{wanted[:100]!r} is Tally's own record of what happened; it stays")
    found = [note for note in list_notes(client, site) if note.id == wanted]
    if not found:
        raise InvalidAnnotation("id", f"{site} has no annotation {wanted[:100]!r}", "not_found")
    _write(client, found[0], removed=1)
    return found[0]


def remove_all(client: Client, site: str) -> int:
    """Removes every note of `site` (the site is being deleted; Tally's own records stay what
    they are, records); how many there were."""
    notes = list_notes(client, normalise(site))
    for note in notes:
        _write(client, note, removed=1)
    return len(notes)


def _write(client: Client, note: Annotation, removed: int) -> None:
    NOTES.write(
        client,
        [[note.site, note.id, int(note.day is not None), note.day or EARLIEST, note.at, note.text,
          note.author, note.kind]],
        removed,
    )  # fmt: skip


# --- reading -------------------------------------------------------------------------------


def list_annotations(
    client: Client, site: str, start: datetime, end: datetime, automatic: bool = True
) -> list[Annotation]:
    """`site`'s annotations in [start, end), oldest first: its notes and (with `automatic`) the
    ones Tally reads from its own records."""
    site = normalise(site)
    timezone = site_timezone(client, site)
    found = [note for note in list_notes(client, site, timezone) if start <= note.at < end]
    if automatic:
        own = _automatic(client, site, start, end, timezone)
        floor = oldest_automatic_kept(client, site, timezone)
        found += [note for note in own if floor is None or _newness(note) >= floor]
    return sorted(found, key=lambda note: (note.at, note.id))


def _automatic(client: Client, site: str, start: datetime, end: datetime, timezone: str) -> list[Annotation]:
    """Tally's own annotations of `site` in [start, end): of each kind, the newest MAX_AUTOMATIC."""
    return [
        *definitions_applied(client, site, start, end),
        *imports_made(client, site, start, end, timezone),
        *alerts_fired(client, site, start, end),
    ]


def _newness(note: Annotation) -> tuple[datetime, str]:
    return note.at, note.id


def oldest_automatic_kept(client: Client, site: str, timezone: str) -> tuple[datetime, str] | None:
    """A site shows its MAX_AUTOMATIC newest automatic annotations, whatever the range asked:
    the (time, id) of the oldest of them when the site has more, else None. A count of the
    records first (an upper bound: a definitions switch may concern other sites only, an import
    makes one or two markers), so that the usual site, far below the cap, costs one query."""
    bound = client.query(
        f"SELECT (SELECT count() FROM {definitions.SWITCHES} WHERE previous > 0) "
        f"+ (SELECT 2 * count() FROM {imports.IMPORTS} FINAL WHERE site = {{site:String}}) "
        "+ (SELECT count() FROM alerts FINAL WHERE site = {site:String})",
        parameters={"site": site},
    ).result_rows[0][0]
    if bound <= MAX_AUTOMATIC:
        return None
    every = _automatic(client, site, _midnight(EARLIEST, UTC_NAME), _midnight(LATEST, UTC_NAME), timezone)
    newest = sorted((_newness(note) for note in every), reverse=True)
    return newest[MAX_AUTOMATIC - 1] if len(newest) >= MAX_AUTOMATIC else None


def list_notes(client: Client, site: str, timezone: str | None = None) -> list[Annotation]:
    """Every note of `site` (not Tally's own), oldest first."""
    rows = [
        row[1:] for row in NOTES.newest(client, "site = {site:String}", {"site": site}, order=("at", "id"))
    ]
    tz = timezone or site_timezone(client, site)
    return [
        Annotation(
            row[0], site, _midnight(row[2], tz) if row[1] else _utc(row[3]), row[2] if row[1] else None,
            row[4], row[5], row[6],
        )
        for row in rows
    ]  # fmt: skip


def definitions_applied(client: Client, site: str, start: datetime, end: datetime) -> list[Annotation]:
    """Each definitions version made current in the range, with what it changed for `site` (its
    own goals, exclusions and channel rules; the session gap and the other definitions of every
    site); a switch that changed nothing of this site is left out. The newest MAX_AUTOMATIC of
    them, read a page of switches at a time, newest first."""
    found: list[Annotation] = []
    for page in range(0, 1_000_000, MAX_AUTOMATIC):
        rows = client.query(
            f"SELECT at, version, previous, reason FROM {definitions.SWITCHES} "
            "WHERE at >= {start:DateTime64(3, 'UTC')} AND at < {end:DateTime64(3, 'UTC')} AND previous > 0 "
            "ORDER BY at DESC, version DESC LIMIT {limit:UInt32} OFFSET {offset:UInt32}",
            parameters={"start": start, "end": end, "limit": MAX_AUTOMATIC, "offset": page},
        ).result_rows
        found += _switches_of(client, site, rows)
        if len(rows) < MAX_AUTOMATIC or len(found) >= MAX_AUTOMATIC:
            break
    return found[:MAX_AUTOMATIC]


def _switches_of(client: Client, site: str, rows: list[Any]) -> list[Annotation]:
    """The switches of `rows` that changed something of `site`, as annotations."""
    versions = definitions.get_many(client, {int(n) for row in rows for n in (row[1], row[2])})
    found = []
    for at, number, previous, reason in rows:
        older, newer = versions.get(int(previous)), versions.get(int(number))
        if older is None or newer is None:
            continue
        mine = [
            change
            for change in definitions.changes(older.definitions, newer.definitions)
            if (match := _RULE_CHANGE.match(change)) is None or match.group(1) == site
        ]
        if not mine:
            continue
        what = f"rolled back to version {number}" if reason == "rollback" else f"version {number} applied"
        text = f"Definitions {what}: {'; '.join(mine)}"
        stamp = _utc(at)
        found.append(
            Annotation(
                f"definitions-{number}-{int(stamp.timestamp() * 1000)}", site, stamp, None,
                text[:MAX_TEXT], "tally", "definitions",
            )
        )  # fmt: skip
    return found


def imports_made(
    client: Client, site: str, start: datetime, end: datetime, timezone: str | None = None
) -> list[Annotation]:
    """Each file imported into `site`'s history, on the dates it covers: its first day, and its
    last day when that is another (on a chart, where the imported history begins and ends).
    Read from the import's record, so importing the same file again adds none."""
    tz = timezone or site_timezone(client, site)
    first, last = start.astimezone(zone(tz)).date(), end.astimezone(zone(tz)).date()
    found = []
    for record in imports.imported_days_between(client, site, first, last, MAX_AUTOMATIC):
        what = f"Imported {record.file_name} ({record.origin}, {record.first_day} to {record.last_day}, "
        what += f"{record.row_count} rows)"
        ends = [(record.first_day, f"import-{record.import_id}", what)]
        if record.last_day != record.first_day:
            ends = [
                (record.first_day, f"import-{record.import_id}", f"{what}: its first day"),
                (record.last_day, f"import-{record.import_id}-last", f"{what}: its last day"),
            ]
        for day, annotation_id, text in ends:
            at = _midnight(day, tz)
            if start <= at < end:
                found.append(Annotation(annotation_id, site, at, day, text[:MAX_TEXT], "tally", "import"))
    return found


def alerts_fired(client: Client, site: str, start: datetime, end: datetime) -> list[Annotation]:
    """Each alert of `site` fired in the range, with its summary."""
    return [
        Annotation(
            f"alert-{alert_id}", site, _utc(fired_at), None, f"Alert: {summary}"[:MAX_TEXT], "tally", "alert"
        )
        for alert_id, fired_at, summary in alert_rules.fired_between(client, site, start, end, MAX_AUTOMATIC)
    ]


def _midnight(day: date, timezone: str) -> datetime:
    return datetime.combine(day, time(), zone(timezone)).astimezone(UTC)


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def day_range(day: date, timezone: str) -> tuple[datetime, datetime]:
    """[start, end) of `day` in `timezone`, in UTC."""
    return _midnight(day, timezone), _midnight(day + timedelta(days=1), timezone)
