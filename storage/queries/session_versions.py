"""The newest version of each visit in `sessions`, as the reports that read whole visits take it
(journeys, retention; stats/sessions_sql.py reads the planner's visits the same way).

The stream jobs write a visit (site, session_start, visitor_id) again each time it grows, and a
tombstone (`is_deleted`) when a later page view moves its start. FINAL keeps the newest version
(ReplacingMergeTree(batch_id): the highest batch, ties to the last written), merging only the key
ranges that overlap across parts: at 10M events a month's visits read in 85 ms against 426 ms
for ORDER BY … LIMIT 1 BY (bench/results/2026-11-29-vm-filtered-reads.md). Tombstones are
dropped outside, after the merge: tested inside, an older live version would stand in for them.
"""

from __future__ import annotations

from storage.tables import SESSIONS


def newest_visits_sql(*columns: str) -> str:
    """Each visit starting in [{start}, {end}) of {site}, newest version, no tombstone: its
    `visitor_id`, `start` (session_start) and `columns`."""
    kept = "".join(f", {column}" for column in columns)
    return f"""
    SELECT visitor_id, start{kept}
    FROM
    (
        SELECT visitor_id, session_start AS start, is_deleted{kept}
        FROM {SESSIONS} FINAL
        WHERE site = {{site:String}}
          AND session_start >= {{start:DateTime64(3, 'UTC')}} AND session_start < {{end:DateTime64(3, 'UTC')}}
    )
    WHERE is_deleted = 0
"""
