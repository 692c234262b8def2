"""A part the store can no longer read: set aside, and what it held rebuilt from its source.

ClickHouse writes a part's files and then commits the part. On a disk that filled while a merge
was writing, chDB 26.9 was seen to commit a merged part of `archive_ids` with an empty marks file
(CI, the full-store-disk fault test: `Empty marks file '…/all_1_40_12/data.cmrk4': 0, must be:
3808 (while reading from part …)`). Every read of that part fails from then on, so the
archiver's next insert, which looks its ids up in `archive_ids`, failed the same way for as long
as the store ran: nothing was archived again, while every other component was healthy.
ClickHouse server sets a broken part aside only when it loads a table (to `detached/broken-*`);
at run time it leaves that to an operator.

Not every such error names its part: an emptied data file reads as `Cannot read all data. Bytes
read: 0. Bytes expected: 1. (CANNOT_READ_ALL_DATA)` with no path (CI again: the archiver asked
for the archive's end every 30 s for a quarter of an hour and was refused each time). For those,
`located` checks the newest parts of Tally's tables with CHECK TABLE … PART: a part breaks when
it is written (an insert or a merge on a full disk), so the newest are the suspects.

Here the part is detached (its files stay under the table's `detached/` folder, for an operator
to inspect or attach again) and what it held is rebuilt where that is possible:
- `archive_ids` is an index of the archive: the ids the archive holds within the deduplication
  window and the index lacks are indexed again, from `events`;
- `events` (the archive): the rows are still in the log while Kafka retains them; the archive
  audit finds the hole and re-reads it (`tally verify` sets a broken part of it aside itself,
  then audits every offset, archiver/audit.py);
- any other table is derived from the archive or the log: `tally replay` rebuilds it, and the
  log line says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import structlog
from clickhouse_connect.driver.client import Client

from storage.tables import SYNTHETIC_PARTITION

log = structlog.get_logger()

#: ClickHouse's error codes for a part whose files do not read back as written: CORRUPTED_DATA,
#: CHECKSUM_DOESNT_MATCH, CANNOT_READ_ALL_DATA, ATTEMPT_TO_READ_AFTER_EOF, NO_FILE_IN_DATA_PART,
#: BAD_SIZE_OF_FILE_IN_DATA_PART, UNKNOWN_PART_TYPE. Anything else (a full disk, a timeout, a
#: refused query) is no reason to set data aside.
BROKEN_PART_CODES = frozenset({246, 40, 33, 32, 226, 228, 317})

#: The part the error names, by its path in the store (`…/store/b48/<table uuid>/<part>/…`).
PART_PATH = re.compile(
    r"/store/[0-9a-f]{3}/(?P<uuid>[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12})/(?P<part>[A-Za-z0-9_]+)/"
)
ERROR_CODE = re.compile(r"\bCode: (?P<code>\d+)\.")
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

PART_NAME = re.compile(r"^[A-Za-z0-9_]+$")
#: How many of the newest parts a search for a broken part that no error named checks (CHECK reads
#: every file of a part: the search is bounded, and runs only after a broken-part error).
MAX_CHECKED = 200

INDEXED = "event_id, site, kafka_partition, kafka_offset, received_at"
#: How far back `archive_ids` is indexed again: the window it keeps ids for (migration 0021).
ARCHIVE_IDS_DAYS = 8


@dataclass(frozen=True)
class BrokenPart:
    table_uuid: str
    part: str


def named_in(error: BaseException) -> BrokenPart | None:
    """The broken part an error from the store names, if it is such an error."""
    where = PART_PATH.search(str(error))
    if where is None or _code(error) not in BROKEN_PART_CODES:
        return None
    return BrokenPart(where["uuid"], where["part"])


#: The store's disk full: ClickHouse's NOT_ENOUGH_SPACE (a reservation refused) or ENOSPC.
DISK_FULL = re.compile(r"not enough space|no space left on device", re.IGNORECASE)


def disk_full(error: BaseException) -> bool:
    """Whether the store refused for a full disk (parts written meanwhile are suspects)."""
    return DISK_FULL.search(str(error)) is not None


def _code(error: BaseException) -> int | None:
    """ClickHouse's error code in the error's text, if any."""
    found = ERROR_CODE.search(str(error))
    return int(found["code"]) if found else None


def located(client: Client, error: BaseException) -> list[BrokenPart]:
    """The broken parts behind an error from the store: the one it names, or, when it is a
    broken-part error naming none, those of the newest parts of the client's database that fail
    CHECK (`checked`). [] for any other error (a full disk, a timeout, a refused query)."""
    if _code(error) not in BROKEN_PART_CODES:
        return []
    named = named_in(error)
    return [named] if named is not None else checked(client)


def checked(client: Client, most: int = MAX_CHECKED) -> list[BrokenPart]:
    """The parts among the `most` newest active ones of the client's database that CHECK TABLE
    finds broken (a part it cannot even read counts as broken)."""
    newest = client.query(
        "SELECT toString(t.uuid), p.table, p.name FROM system.parts AS p"
        " INNER JOIN system.tables AS t ON t.database = p.database AND t.name = p.table"
        " WHERE p.database = currentDatabase() AND p.active"
        " ORDER BY p.modification_time DESC LIMIT {most:UInt32}",
        parameters={"most": most},
    ).result_rows
    return [
        BrokenPart(uuid, part)
        for uuid, table, part in newest
        if IDENTIFIER.match(table) and PART_NAME.match(part) and not _passes_check(client, table, part)
    ]


def _passes_check(client: Client, table: str, part: str) -> bool:
    try:
        answer = client.raw_query(
            f"CHECK TABLE `{table}` PART '{part}' SETTINGS check_query_single_value_result = 0",
            fmt="TabSeparated",
        )
    except Exception as error:
        if _code(error) in BROKEN_PART_CODES:
            return False
        raise
    # one line per file set checked: part_path, is_passed, message
    return all(line.split("\t")[1:2] == ["1"] for line in answer.decode().splitlines() if line)


def set_aside(client: Client, broken: BrokenPart) -> str | None:
    """Detach the part and rebuild what it held where its source is at hand. Returns the table
    (`database.name`), or None when the part is not an active part of a table any more (a merge
    or another caller got there first)."""
    found = client.query(
        "SELECT t.database, t.name, p.rows FROM system.tables AS t"
        " INNER JOIN system.parts AS p ON p.database = t.database AND p.table = t.name"
        " WHERE t.uuid = toUUID({uuid:String}) AND p.name = {part:String} AND p.active",
        parameters={"uuid": broken.table_uuid, "part": broken.part},
    ).result_rows
    if not found:
        return None
    database, table, rows = found[0]
    if not (IDENTIFIER.match(database) and IDENTIFIER.match(table)):
        return None  # not one of Tally's tables: left to the operator
    client.command(f"ALTER TABLE `{database}`.`{table}` DETACH PART '{broken.part}'")
    rebuilt = rebuild(client, database, table)
    log.error(
        "broken_part_detached",
        table=f"{database}.{table}",
        part=broken.part,
        rows=rows,
        kept_in=f"{table}'s detached/ folder",
        rebuilt=rebuilt,
    )
    return f"{database}.{table}"


def rebuild(client: Client, database: str, table: str) -> str:
    """Make good what a detached part of `table` held, as far as its source allows; says how."""
    if table == "archive_ids":
        indexed = reindex_archive_ids(client, database)
        return f"{indexed} archived ids indexed again from events"
    if table == "events":
        return "its offsets are re-read from the log by the archive audit (tally verify --full)"
    return "derived from the log: tally replay rebuilds it"


def reindex_archive_ids(client: Client, database: str) -> int:
    """Index again the archive's ids of the window that `archive_ids` lacks, a day at a time (each
    day's ids are one set in memory). An id indexed twice is harmless (migration 0021)."""
    total = 0
    for days_ago in range(ARCHIVE_IDS_DAYS, -1, -1):
        summary = client.command(
            f"INSERT INTO `{database}`.archive_ids ({INDEXED})"
            f" SELECT {INDEXED}"
            f" FROM `{database}`.events"
            " WHERE kafka_partition != {synthetic:UInt16} AND toDate(received_at) = today() - {days:UInt16}"
            " AND event_id NOT IN ("
            f"SELECT event_id FROM `{database}`.archive_ids"
            " WHERE toDate(received_at) = today() - {days:UInt16})",
            parameters={"days": days_ago, "synthetic": SYNTHETIC_PARTITION},
        )
        total += int(getattr(summary, "written_rows", 0) or 0)
    return total
