"""Retention: of the visitors who first came in a week, how many came back in each
later week, over up to 12 weeks.

What the report counts (docs/architecture.md, "Retention"):

- Weeks are the site's: Monday 00:00 in its time zone to the next (storage/calendar.py), the
  `weeks` last ones ending with the week holding `until`.
- A visitor is a visitor id — not a (UTC day, id) pair as in the other reports: the question is
  whether the same id comes back. It is in a week when one of its visits starts in that week
  (session_start, as the other visit reports count visits).
- Its cohort is the first of the report's weeks it is in; it returns in each later week it is in.
  A cohort's row: its visitors, and for each later week up to the report's last, how many of them
  were there (and the share, that number over its visitors).
- agg reads the newest version of each `sessions` row (LIMIT 1 BY, tombstones dropped, as the
  journeys do); raw sessionises the archive's page views (raw.raw_sessions_sql): the same visits,
  so the same numbers to the unit.

An id lives as long as its site's salt (storage/site_identity.py): under daily ids nobody is
recognised in a later week, so the later weeks read 0 whatever the visitors did. The report says
which identity it rests on: the rotation in force at its first week's start and every change
within its weeks (with when), and a cohort whose weeks span a change says so in its `note`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from clickhouse_connect.driver.client import Client

from storage.calendar import local_midnight, zone
from storage.queries.contract import Source, StatsQuery
from storage.queries.raw import raw_sessions_sql
from storage.queries.session_versions import newest_visits_sql
from storage.site_identity import IdentityChange, identity_history

MAX_WEEKS = 12
DEFAULT_WEEKS = 12


@dataclass(frozen=True)
class Cohort:
    """The visitors first seen in `week` (its Monday, local) and how many of them came back in
    each later week of the report, in order (none for the report's last week)."""

    week: date
    visitors: int
    returning: tuple[int, ...]
    note: str = ""  # says when the cohort's weeks span a change of visitor identity

    @property
    def shares(self) -> tuple[float, ...]:
        """Each later week's returning visitors over the cohort's (0 for an empty cohort)."""
        return tuple(round(n / self.visitors, 4) if self.visitors else 0.0 for n in self.returning)


# What each identity lets the report see (docs/privacy.md): an id lives as long as its salt.
IDENTITY_NOTES = {
    "daily": "visitor ids live one UTC day: nobody is recognised in a later week, so later weeks read 0",
    "weekly": "visitor ids live one ISO week (UTC): a visitor back in a later week has a new id, so later "
    "weeks read about 0 (monthly ids recognise returns within a calendar month)",
    "monthly": "visitor ids live one calendar month (UTC): returns are recognised within a month; a visitor "
    "back in the next month has a new id",
}


@dataclass(frozen=True)
class RetentionReport:
    weeks: tuple[date, ...]  # every week of the report, its Monday (local)
    cohorts: tuple[Cohort, ...]  # one per week, empty ones too
    identity: tuple[IdentityChange, ...]  # in force at the first week's start, then each change in the report

    @property
    def identity_note(self) -> str:
        """What the identities the numbers rest on let them show, one sentence each."""
        rotations = dict.fromkeys(change.rotation for change in self.identity)
        return "; ".join(IDENTITY_NOTES[rotation] for rotation in rotations) + "."


# Per visitor its first week and every week it has a visit in; then per (cohort, weeks later)
# the visitors (0 weeks later: the cohort itself).
_RETENTION = """
SELECT cohort, toUInt32(intDiv(dateDiff('day', cohort, week), 7)) AS later, count() AS visitors
FROM
(
    SELECT min(week) AS cohort, groupUniqArray(week) AS weeks
    FROM (SELECT visitor_id, toMonday(start, {{tz:String}}) AS week FROM ({visits}))
    GROUP BY visitor_id
)
ARRAY JOIN weeks AS week
GROUP BY cohort, later
ORDER BY cohort, later
"""


def report_weeks(until: date, weeks: int) -> tuple[date, ...]:
    """The Mondays of the `weeks` weeks ending with the one holding `until`."""
    last = until - timedelta(days=until.weekday())
    return tuple(last - timedelta(weeks=weeks - 1 - n) for n in range(weeks))


def retention_query(site: str, weeks: tuple[date, ...], timezone: str, session_gap_s: int) -> StatsQuery:
    """The report's range as a query: from its first Monday's local midnight to the one after its last."""
    tz = zone(timezone)
    start, end = local_midnight(weeks[0], tz), local_midnight(weeks[-1] + timedelta(days=7), tz)
    return StatsQuery(site, start, end, session_gap_s=session_gap_s, timezone=timezone)


def retention_sql(q: StatsQuery, source: Source) -> str:
    visits = newest_visits_sql() if source == "agg" else raw_sessions_sql(q, ())
    return _RETENTION.format(visits=visits)


def retention(
    client: Client,
    site: str,
    weeks: tuple[date, ...],
    timezone: str,
    session_gap_s: int,
    source: Source = "agg",
) -> RetentionReport:
    """The cohorts of `weeks` (consecutive Mondays, report_weeks) in the site's `timezone`."""
    q = retention_query(site, weeks, timezone, session_gap_s)
    rows = client.query(retention_sql(q, source), parameters=q.parameters()).result_rows
    counts = {(cohort, int(later)): int(visitors) for cohort, later, visitors in rows}
    history = identity_history(client, site)
    identity = in_force(history, q.start, q.end)
    cohorts = []
    for index, week in enumerate(weeks):
        later = range(1, len(weeks) - index)
        starts = local_midnight(week, zone(timezone))
        cohorts.append(
            Cohort(
                week,
                counts.get((week, 0), 0),
                tuple(counts.get((week, n), 0) for n in later),
                spanned_change(history, starts, q.end),
            )
        )
    return RetentionReport(weeks, tuple(cohorts), identity)


def in_force(history: list[IdentityChange], start: datetime, end: datetime) -> tuple[IdentityChange, ...]:
    """The identity in force at `start` (with the `since` it had), then each change before `end`."""
    before = [change for change in history if change.since is None or change.since <= start]
    within = [change for change in history if change.since is not None and start < change.since < end]
    return (before[-1], *within)


def spanned_change(history: list[IdentityChange], start: datetime, end: datetime) -> str:
    """A sentence when the visitor identity changed between `start` and `end`, else ''."""
    identities = in_force(history, start, end)
    if len(identities) == 1:
        return ""
    changes = ", then ".join(
        f"{change.rotation} from {change.since:%Y-%m-%d %H:%M} UTC"
        for change in identities[1:]
        if change.since
    )
    return (
        f"spans a change of visitor identity: {identities[0].rotation} ids, then {changes}; an id does not "
        "survive the change, so a visitor seen on both sides counts as two"
    )
