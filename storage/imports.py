"""History imported from Plausible's CSV export or a GA4 export (migration 0039).

Imports are kept as daily aggregates (`imported_daily`), as Plausible keeps its own
`imported_*` tables, not as synthesised events: an export holds per-day counts, and events
made up from them would fake visitors, sessions and their order. Reports add them only when
asked (Plausible's `include.imports`; dashboard/http_api/plausible/imports.py), never to `events`, the
rollups or the sessions, which stay a copy of the log.

Each imported CSV file is identified by a hash of its bytes: a file imported again (alone, or
inside the same or another zip) finds its id in `imports` and writes nothing; rows written
twice by concurrent imports share their key and ReplacingMergeTree keeps one.

Formats (docs/architecture.md, "Imported history"):
- plausible: the zip Plausible's "Export to CSV" makes, or any of its files, named
  `imported_<table>_<YYYYMMDD>_<YYYYMMDD>.csv` (the `imported_` prefix optional), with a header
  row; the columns read are those of PLAUSIBLE_TABLES, others are ignored.
- ga4: CSV files (or a zip of them) with a header of GA4 Data API names (`date`, at most one
  dimension of GA4_DIMENSIONS, metrics of GA4_METRICS); `#` comment lines and blank lines, as
  GA4's own download writes them, are skipped. A file without a dimension holds the totals.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal
from zoneinfo import ZoneInfo

from clickhouse_connect.driver.client import Client

from storage.calendar import UTC_NAME, local_date, local_midnight, zone
from storage.sites import registered, site_timezone
from storage.tables import EVENTS
from tally.refusal import Refused

Origin = Literal["plausible", "ga4"]
ORIGINS: tuple[Origin, ...] = ("plausible", "ga4")
IMPORTED_DAILY = "imported_daily"
IMPORTS = "imports"
TOTALS = ""  # the dimension of a day's totals
MAX_FILE_BYTES = 200 * 1024 * 1024  # a CSV, or everything a zip unpacks to, counted as read
# A line of an export is a date, a value (a path, a source) and a few counts: far less than
# this; a longer one is not an export's row (one line of 200 MiB was a way to fill the memory).
MAX_LINE_BYTES = 64 * 1024
# The summed rows of one file are held until it is written (~250 bytes each): this bounds them.
# A busy site's year of Plausible pages is well under it; a bigger export is split by period.
MAX_ROWS_PER_FILE = 1_000_000
MAX_ZIP_MEMBERS = 100  # Plausible's export holds 10 files
READ_CHUNK = 64 * 1024
METRIC_NAMES = ("visitors", "pageviews", "visits", "bounces", "visit_duration")

# Plausible's tables: the dimension (Tally's name) its value column fills, that column, and
# how its metric columns map onto Tally's imported metrics (entrances and exits are the visits
# of entry and exit pages). Plausible's visit:device is the screen-size class (Tally's
# screen_size), and its source names (Google, Twitter) go where Tally's referrer domains are.
PLAUSIBLE_TABLES: dict[str, tuple[str, str, dict[str, str]]] = {
    "visitors": (TOTALS, "", {"visits": "visits"}),
    "pages": ("path", "page", {"visits": "visits"}),
    "sources": ("referrer_domain", "source", {"visits": "visits"}),
    "entry_pages": ("entry_path", "entry_page", {"visits": "entrances"}),
    "exit_pages": ("exit_path", "exit_page", {"visits": "exits"}),
    "locations": ("country", "country", {"visits": "visits"}),
    "devices": ("screen_size", "device", {"visits": "visits"}),
    "browsers": ("browser", "browser", {"visits": "visits"}),
    "operating_systems": ("os", "operating_system", {"visits": "visits"}),
}
# The UTM columns of imported_sources, each its own dimension.
PLAUSIBLE_UTM = ("utm_source", "utm_medium", "utm_campaign", "utm_content", "utm_term")
PLAUSIBLE_FILE = re.compile(r"^(?:imported_)?(?P<table>[a-z_]+?)_(?P<first>\d{8})_(?P<last>\d{8})\.csv$")
# Tables of Plausible's export that Tally does not import (it has no such dimension).
PLAUSIBLE_SKIPPED = frozenset({"custom_events"})

# GA4 Data API dimension → Tally's dimension.
GA4_DIMENSIONS = {
    "pagePath": "path",
    "pagePathPlusQueryString": "path",
    "landingPage": "entry_path",
    "sessionSource": "referrer_domain",
    "sessionMedium": "utm_medium",
    "sessionCampaignName": "utm_campaign",
    "countryId": "country",
    "deviceCategory": "device",
    "browser": "browser",
    "operatingSystem": "os",
}
# GA4 metric → how it reads (bounceRate and averageSessionDuration are per session).
GA4_METRICS = (
    "activeUsers", "totalUsers", "sessions", "screenPageViews", "bounceRate", "averageSessionDuration",
)  # fmt: skip


class InvalidImport(Refused):
    """A file Tally cannot import; the message names the file, row and column at fault."""


@dataclass(frozen=True, slots=True)
class Numbers:
    """Imported numbers of one day and value: visit_duration is the visits' total, in seconds."""

    visitors: int = 0
    pageviews: int = 0
    visits: int = 0
    bounces: int = 0
    visit_duration: int = 0

    def __add__(self, other: Numbers) -> Numbers:
        return Numbers(*(getattr(self, name) + getattr(other, name) for name in METRIC_NAMES))


@dataclass
class ImportedFile:
    """One CSV file's rows, summed per (day, dimension, value)."""

    name: str
    import_id: str
    rows: dict[tuple[date, str, str], Numbers] = field(default_factory=dict)

    def add(self, day: date, dimension: str, value: str, numbers: Numbers) -> None:
        key = (day, dimension, value)
        self.rows[key] = self.rows.get(key, Numbers()) + numbers

    @property
    def days(self) -> tuple[date, date] | None:
        days = [key[0] for key in self.rows]
        return (min(days), max(days)) if days else None


@dataclass(frozen=True)
class ImportResult:
    site: str
    imported: list[ImportedFile]  # files written now
    already: list[str]  # names of files imported before: nothing written
    native_from: date | None = None  # the site's first local day of native data, if any

    @property
    def days(self) -> tuple[date, date] | None:
        ranges = [f.days for f in self.imported if f.days]
        return (min(r[0] for r in ranges), max(r[1] for r in ranges)) if ranges else None

    @property
    def overlap(self) -> tuple[date, date] | None:
        """The imported days reports do not use, since the site's own events cover them."""
        days = self.days
        if days is None or self.native_from is None or days[1] < self.native_from:
            return None
        return max(days[0], self.native_from), days[1]

    def overlap_note(self) -> str | None:
        """What the CLI and the dashboard say of the days the site's own events cover."""
        if self.overlap is None:
            return None
        first, last = self.overlap
        return (
            f"{first} to {last} are not used: the site's own events start on {self.native_from}, "
            "and a day is never counted twice"
        )


# --- reading the files --------------------------------------------------------------------
#
# Streamed, never held whole: a file (or each zip member) is read a line at a time through a
# counting reader, its header checked before any row, each line and the rows of a file capped,
# and the bytes read (unpacked, for a zip) counted against MAX_FILE_BYTES as they arrive — a
# zip's declared sizes are checked too, but never trusted alone. Memory is bounded by a line
# and the summed rows of one file (at most MAX_ROWS_PER_FILE), not by what the file unpacks to.


def read_files(path: Path, origin: Origin) -> list[ImportedFile]:
    """The CSV files in `path` (a CSV, or a zip of them) parsed as `origin`'s export."""
    if origin not in ORIGINS:
        raise InvalidImport(f"--from must be one of {', '.join(ORIGINS)} (got {origin!r})")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise InvalidImport(f"{path.name}: larger than {MAX_FILE_BYTES // 2**20} MiB")
    with path.open("rb") as stream:
        return read_stream(path.name, stream, origin)


def read_bytes(name: str, data: bytes, origin: Origin) -> list[ImportedFile]:
    """The CSV files in `data` (a CSV, or a zip of them, named `name`) parsed as `origin`'s export."""
    if origin not in ORIGINS:
        raise InvalidImport(f"the export must be one of {', '.join(ORIGINS)} (got {origin!r})")
    return read_stream(name, io.BytesIO(data), origin)


def read_stream(name: str, stream: BinaryIO, origin: Origin) -> list[ImportedFile]:
    """The CSV files in the seekable `stream` (a CSV, or a zip of them, named `name`)."""
    try:
        if zipfile.is_zipfile(stream):
            parsed = _zip_members(name, stream, origin)
        else:
            stream.seek(0)
            budget = Budget(f"{name}: larger than {MAX_FILE_BYTES // 2**20} MiB")
            parsed = [parse_stream(name, stream, origin, budget)]
    except (zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError) as broken:
        raise InvalidImport(f"{name}: not a readable zip ({broken})") from None
    files = [f for f in parsed if f is not None]
    if not files:
        raise InvalidImport(f"{name}: no CSV file of a {origin} export in it")
    return files


def _zip_members(zip_name: str, stream: BinaryIO, origin: Origin) -> list[ImportedFile | None]:
    stream.seek(0)
    with zipfile.ZipFile(stream) as archive:
        infos = [info for info in archive.infolist() if not info.is_dir() and info.filename.endswith(".csv")]
        if len(infos) > MAX_ZIP_MEMBERS:
            raise InvalidImport(f"{zip_name}: more than {MAX_ZIP_MEMBERS} CSV files in it")
        too_big = f"{zip_name}: unpacks to more than {MAX_FILE_BYTES // 2**20} MiB"
        if sum(info.file_size for info in infos) > MAX_FILE_BYTES:  # what it declares: refused unread
            raise InvalidImport(too_big)
        budget = Budget(too_big)  # what it really unpacks to, counted as it is read
        parsed = []
        for info in infos:
            with archive.open(info) as member:
                parsed.append(parse_stream(Path(info.filename).name, member, origin, budget))
        return parsed


def parse_csv(name: str, content: bytes, origin: Origin) -> ImportedFile | None:
    """One CSV file's rows (None for a Plausible table Tally does not import)."""
    return parse_stream(name, io.BytesIO(content), origin, Budget(f"{name}: larger than the limit"))


def parse_stream(name: str, stream: IO[bytes], origin: Origin, budget: Budget) -> ImportedFile | None:
    """One CSV file's rows, read from `stream` a line at a time (None for a Plausible table
    Tally does not import: nothing of it is read)."""
    if origin == "plausible":
        found = PLAUSIBLE_FILE.match(name)
        if not found or found["table"] not in PLAUSIBLE_TABLES:
            if found and found["table"] in PLAUSIBLE_SKIPPED:
                return None
            tables = ", ".join(f"imported_{table}_YYYYMMDD_YYYYMMDD.csv" for table in PLAUSIBLE_TABLES)
            raise InvalidImport(f"{name}: not a file of Plausible's CSV export (expected one of {tables})")
    counted = CountingReader(stream, budget)
    lines = Lines(name, io.BufferedReader(counted, buffer_size=READ_CHUNK), skip_comments=origin == "ga4")
    imported = ImportedFile(name, "")
    if origin == "plausible":
        _plausible(name, found["table"], lines, imported)
    else:
        _ga4(name, lines, imported)
    imported.import_id = counted.digest()  # every byte of the file was read: its id is its hash
    return imported


class Budget:
    """The bytes a file (or all of a zip's members together) may still unpack to."""

    def __init__(self, refusal: str, limit: int = MAX_FILE_BYTES) -> None:
        self.refusal = refusal
        self.left = limit

    def spend(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise InvalidImport(self.refusal)


class CountingReader(io.RawIOBase):
    """A file's bytes as read: hashed (the file's import id) and spent from its budget, so a
    zip member that unpacks to more than it declares is stopped when it passes the limit."""

    def __init__(self, raw: IO[bytes], budget: Budget) -> None:
        self.raw, self.budget, self.hash = raw, budget, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.raw.read(len(buffer))
        self.budget.spend(len(data))
        self.hash.update(data)
        buffer[: len(data)] = data
        return len(data)

    def digest(self) -> str:
        return self.hash.hexdigest()[:32]


class Lines:
    """A CSV file's lines as text, one at a time, numbered as in the file: blank lines (and,
    for GA4, `#` comment lines) skipped, each refused past MAX_LINE_BYTES before it is decoded."""

    def __init__(self, name: str, stream: io.BufferedReader, skip_comments: bool) -> None:
        self.name, self.stream, self.skip_comments = name, stream, skip_comments
        self.number = 0  # the line last read

    def __iter__(self) -> Iterator[tuple[int, str]]:
        while raw := self.stream.readline(MAX_LINE_BYTES + 1):
            self.number += 1
            if len(raw) > MAX_LINE_BYTES:
                too_long = f"longer than {MAX_LINE_BYTES // 1024} KiB (not an export's CSV)"
                raise InvalidImport(f"{self.name}: row {self.number}: {too_long}")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise InvalidImport(
                    f"{self.name}: row {self.number}: not UTF-8 text (byte {error.start})"
                ) from None
            text = (text.removeprefix("\ufeff") if self.number == 1 else text).rstrip("\r\n")
            if text.strip() and not (self.skip_comments and text.startswith("#")):
                yield self.number, text


@dataclass(frozen=True)
class Table:
    """A CSV file's header (and the line it is on), read first, and its data lines still unread."""

    name: str
    header: list[str]
    header_line: int
    lines: Iterator[tuple[int, str]]

    def rows(self) -> Iterator[tuple[int, dict[str, str]]]:
        """(line number, row) pairs, read as they are used; InvalidImport at the first line that
        is not a row of the table, or past MAX_ROWS_PER_FILE rows."""
        number = self.header_line

        def texts() -> Iterator[str]:
            nonlocal number
            for number, text in self.lines:  # noqa: B007 (the number is the row's, read below)
                yield text

        try:
            for count, values in enumerate(csv.reader(texts()), start=1):
                if count > MAX_ROWS_PER_FILE:
                    raise InvalidImport(
                        f"{self.name}: more than {MAX_ROWS_PER_FILE:,} rows; split the export by period"
                    )
                if len(values) != len(self.header):
                    raise InvalidImport(
                        f"{self.name}: row {number}: {len(values)} columns, the header has {len(self.header)}"
                    )
                yield number, dict(zip(self.header, values, strict=True))
        except csv.Error as error:
            raise InvalidImport(f"{self.name}: not CSV ({error})") from None

    def require(self, columns: Iterable[str]) -> None:
        missing = [column for column in columns if column not in self.header]
        if missing:
            raise InvalidImport(
                f"{self.name}: row {self.header_line}: no column {missing[0]!r} "
                f"(the header has {', '.join(self.header)})"
            )


def _table(name: str, lines: Lines) -> Table:
    """The file's header, from its first line: checked before any row is read."""
    numbered = iter(lines)
    first = next(numbered, None)
    if first is None:
        raise InvalidImport(f"{name}: empty (expected a header row)")
    try:
        header = [column.strip() for column in next(csv.reader([first[1]]))]
    except csv.Error as error:
        raise InvalidImport(f"{name}: not CSV ({error})") from None
    return Table(name, header, first[0], numbered)


def _count(name: str, number: int, row: dict[str, str], column: str) -> int:
    text = row[column].strip()
    try:
        value = int(text) if text else 0
    except ValueError:
        try:
            value = round(float(text))
        except ValueError:
            raise InvalidImport(
                f"{name}: row {number}, column {column!r}: {text!r} is not a number"
            ) from None
    if value < 0:
        raise InvalidImport(f"{name}: row {number}, column {column!r}: {text!r} is negative")
    return value


def _day(name: str, number: int, row: dict[str, str], column: str = "date") -> date:
    text = row[column].strip()
    for pattern in ("%Y-%m-%d", "%Y%m%d"):
        try:
            return datetime.strptime(text, pattern).date()
        except ValueError:
            continue
    raise InvalidImport(f"{name}: row {number}, column {column!r}: {text!r} is not a date (YYYY-MM-DD)")


def _plausible(name: str, table: str, lines: Lines, imported: ImportedFile) -> None:
    dimension, value_column, renamed = PLAUSIBLE_TABLES[table]
    metric_columns = {metric: renamed.get(metric, metric) for metric in METRIC_NAMES}
    csv_table = _table(name, lines)
    present = {metric: column for metric, column in metric_columns.items() if column in csv_table.header}
    csv_table.require(["date", "visitors", *([value_column] if value_column else [])])
    for number, row in csv_table.rows():
        day = _day(name, number, row)
        numbers = Numbers(**{metric: _count(name, number, row, column) for metric, column in present.items()})
        value = row[value_column].strip() if value_column else ""
        imported.add(day, dimension, _plausible_value(dimension, value), numbers)
        if table == "sources":
            for utm in PLAUSIBLE_UTM:
                if row.get(utm, "").strip():
                    imported.add(day, utm, row[utm].strip(), numbers)


def _plausible_value(dimension: str, value: str) -> str:
    return value.upper() if dimension == "country" else value


def _ga4(name: str, lines: Lines, imported: ImportedFile) -> None:
    table = _table(name, lines)
    header, line = table.header, table.header_line
    table.require(["date"])
    dimensions = [column for column in header if column in GA4_DIMENSIONS]
    if len(dimensions) > 1:
        raise InvalidImport(f"{name}: row {line}: one dimension per file, this has {', '.join(dimensions)}")
    if "country" in header and not dimensions:
        raise InvalidImport(
            f"{name}: row {line}, column 'country': GA4 country names; export countryId (ISO codes)"
        )
    users = "activeUsers" if "activeUsers" in header else "totalUsers"
    table.require([users, "sessions"])
    dimension = GA4_DIMENSIONS[dimensions[0]] if dimensions else TOTALS
    for number, row in table.rows():
        day = _day(name, number, row)
        sessions = _count(name, number, row, "sessions")
        numbers = Numbers(
            visitors=_count(name, number, row, users),
            pageviews=_count(name, number, row, "screenPageViews") if "screenPageViews" in header else 0,
            visits=sessions,
            bounces=round(_rate(name, number, row) * sessions),
            visit_duration=round(_seconds(name, number, row) * sessions),
        )
        value = row[dimensions[0]].strip() if dimensions else ""
        if dimension == "country":
            value = value.upper()
        elif dimension == "device":
            value = value.lower()
        imported.add(day, dimension, value, numbers)


def _rate(name: str, number: int, row: dict[str, str]) -> float:
    """GA4's bounceRate: a fraction of the sessions, 0 to 1."""
    text = row.get("bounceRate", "").strip()
    try:
        rate = float(text) if text else 0.0
    except ValueError:
        raise InvalidImport(f"{name}: row {number}, column 'bounceRate': {text!r} is not a number") from None
    if not 0 <= rate <= 1:
        raise InvalidImport(
            f"{name}: row {number}, column 'bounceRate': {text!r} is not a fraction from 0 to 1"
        )
    return rate


def _seconds(name: str, number: int, row: dict[str, str]) -> float:
    text = row.get("averageSessionDuration", "").strip()
    try:
        seconds = float(text) if text else 0.0
    except ValueError:
        seconds = -1.0
    if seconds < 0:
        raise InvalidImport(
            f"{name}: row {number}, column 'averageSessionDuration': {text!r} is not a number of seconds"
        )
    return seconds


# --- writing ------------------------------------------------------------------------------


def import_files(client: Client, site: str, files: list[ImportedFile], origin: Origin) -> ImportResult:
    """Write the files not imported before into `site`'s imported history."""
    site = registered(client, site, InvalidImport)
    known = {row[0] for row in client.query(
        f"SELECT import_id FROM {IMPORTS} WHERE site = {{site:String}}", parameters={"site": site}
    ).result_rows}  # fmt: skip
    fresh = [f for f in files if f.import_id not in known and f.rows]
    for imported in fresh:
        rows = [
            [site, day, dimension, value, imported.import_id, *(getattr(numbers, m) for m in METRIC_NAMES)]
            for (day, dimension, value), numbers in imported.rows.items()
        ]
        client.insert(
            IMPORTED_DAILY,
            rows,
            column_names=["site", "date", "dimension", "value", "import_id", *METRIC_NAMES],
        )
        first, last = imported.days or (date.min, date.min)
        # Recorded after its rows: an import cut short is done again whole by the next try.
        client.insert(
            IMPORTS,
            [[site, imported.import_id, origin, imported.name, first, last, len(rows)]],
            column_names=["site", "import_id", "origin", "file_name", "first_day", "last_day", "row_count"],
        )
    native_from = native_first_day(client, site, zone(site_timezone(client, site)))
    return ImportResult(site, fresh, [f.name for f in files if f not in fresh], native_from)


# --- reading ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportRecord:
    import_id: str
    origin: str
    file_name: str
    first_day: date
    last_day: date
    row_count: int


def list_imports(client: Client, site: str) -> list[ImportRecord]:
    rows = client.query(
        f"SELECT import_id, origin, file_name, first_day, last_day, row_count FROM {IMPORTS} FINAL "
        "WHERE site = {site:String} ORDER BY first_day, file_name",
        parameters={"site": site},
    ).result_rows
    return [ImportRecord(*row) for row in rows]


def imported_days_between(
    client: Client, site: str, first: date, last: date, limit: int
) -> list[ImportRecord]:
    """The files imported into `site`'s history whose first or last day lies in [first, last],
    newest history first (the chart's automatic annotations, storage/annotations.py). A file
    imported again is one record (its id is its hash): it is listed once."""
    rows = client.query(
        f"SELECT import_id, origin, file_name, first_day, last_day, row_count FROM {IMPORTS} FINAL "
        "WHERE site = {site:String} AND ((first_day >= {first:Date} AND first_day <= {last:Date}) "
        "OR (last_day >= {first:Date} AND last_day <= {last:Date})) "
        "ORDER BY last_day DESC, first_day DESC, import_id LIMIT {limit:UInt32}",
        parameters={"site": site, "first": first, "last": last, "limit": limit},
    ).result_rows
    return [ImportRecord(*row) for row in rows]


def remove_import(client: Client, site: str, which: str) -> ImportRecord:
    """Take one imported file out of `site`'s history: named by its id, or by its file name when
    one file of the site has that name. Its rows go first, its record last: a removal cut short
    is finished by the next try, and until then the file is still listed."""
    records = list_imports(client, site)
    matching = [r for r in records if r.import_id == which] or [r for r in records if r.file_name == which]
    if not matching:
        raise InvalidImport(f"{site} has no imported file {which!r} (see 'tally import {site} --list')")
    if len(matching) > 1:
        raise InvalidImport(
            f"{len(matching)} files named {which!r} were imported into {site}: name one by its id "
            f"(see 'tally import {site} --list')"
        )
    record = matching[0]
    for table in (IMPORTED_DAILY, IMPORTS):
        client.command(
            f"ALTER TABLE {table} DELETE WHERE site = {{site:String}} AND import_id = {{id:String}} "
            "SETTINGS mutations_sync = 1",  # done when the command returns: the reports change now
            parameters={"site": site, "id": record.import_id},
        )
    return record


def first_imported_day(client: Client, site: str) -> date | None:
    """The first day `site`'s imported history holds (None without imports)."""
    earliest = client.query(
        f"SELECT min(first_day), count() FROM {IMPORTS} FINAL WHERE site = {{site:String}}",
        parameters={"site": site},
    ).result_rows[0]
    return earliest[0] if earliest[1] else None


def whole_days(start: datetime, end: datetime, tz: ZoneInfo) -> tuple[date, date] | None:
    """The first and last local day of `tz` lying wholly in [start, end): imported numbers are
    per day, so a day the range cuts (it starts or ends after that day's local midnight) has
    none, only its native numbers."""
    first = local_date(start, tz)
    if local_midnight(first, tz) < start:  # starts mid-day: that day is not whole
        first += timedelta(days=1)
    last = local_date(end, tz) - timedelta(days=1)  # end is excluded: its day is never whole
    return (first, last) if first <= last else None


def native_first_day(client: Client, site: str, tz: ZoneInfo) -> date | None:
    """The local day of `site`'s first archived event (None without any): imported days from
    this one on are not used (Plausible clamps an import's end to where native data starts),
    so no day is counted twice. Read at query time, so an import made before the tracker ran,
    or events backfilled later with an older `ts`, move the cut with them."""
    earliest = client.query(
        f"SELECT min(ts), count() FROM {EVENTS} WHERE site = {{site:String}}", parameters={"site": site}
    ).result_rows[0]
    return local_date(earliest[0], tz) if earliest[1] else None


def used_days(
    client: Client, site: str, start: datetime, end: datetime, tz: ZoneInfo
) -> tuple[date, date] | None:
    """The imported days a report of [start, end) uses: its whole local days before the site's
    native data starts."""
    days = whole_days(start, end, tz)
    native = native_first_day(client, site, tz)
    if days is None or native is None:
        return days
    last = min(days[1], native - timedelta(days=1))
    return (days[0], last) if days[0] <= last else None


def imported(
    client: Client,
    site: str,
    start: datetime,
    end: datetime,
    dimension: str = TOTALS,
    by_day: bool = False,
    timezone: str = UTC_NAME,
) -> dict[tuple[date | None, str], Numbers]:
    """Imported numbers of the days `used_days` gives for [start, end) in the site's `timezone`,
    per (day or None, value) of `dimension` ('' the totals). An imported row's `date` is the
    export's own calendar day, which is the site's local day (Plausible and GA4 export per the
    site's / property's time zone), so it is compared with local days as it is."""
    days = used_days(client, site, start, end, zone(timezone))
    if days is None:
        return {}
    day_column = "date" if by_day else "toDate(0)"
    rows = client.query(
        f"SELECT {day_column} AS day, value, sum(visitors), sum(pageviews), sum(visits), sum(bounces), "
        f"sum(visit_duration) FROM {IMPORTED_DAILY} FINAL WHERE site = {{site:String}} "
        "AND dimension = {dimension:String} AND date >= {first:Date} AND date <= {last:Date} "
        "GROUP BY day, value",
        parameters={"site": site, "dimension": dimension, "first": days[0], "last": days[1]},
    ).result_rows
    return {(day if by_day else None, value): Numbers(*map(int, numbers)) for day, value, *numbers in rows}
