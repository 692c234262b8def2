"""The newest version of each visit in `sessions`, as the reports that read whole visits take it.

The stream jobs write a visit (site, session_start, visitor_id) again each time it grows, and a
tombstone (`is_deleted`) when a later page view moves its start; a reader keeps the newest
version of each visit starting in the range and drops tombstones. LIMIT 1 BY over the range
rather than FINAL, which would merge every part of it (stats/sessions_sql.py reads the
planner's visits with FINAL, measured faster there at 10M; these reports read a few columns).
"""

from __future__ import annotations

from storage.tables import SESSIONS


def newest_visits_sql(*columns: str) -> str:
    """Each visit starting in [{start}, {end}) of {site}, newest version, no tombstone: its
    `visitor_id`, `start` (session_start) and `columns`."""
    kept = "".join(f", {column}" for column in columns)
    return f"""
    SELECT visitor_id, session_start AS start{kept}
    FROM
    (
        SELECT session_start, visitor_id, is_deleted{kept}
        FROM {SESSIONS}
        WHERE site = {{site:String}}
          AND session_start >= {{start:DateTime64(3, 'UTC')}} AND session_start < {{end:DateTime64(3, 'UTC')}}
        ORDER BY session_start, visitor_id, batch_id DESC, written_at DESC
        LIMIT 1 BY session_start, visitor_id
    )
    WHERE is_deleted = 0
"""
