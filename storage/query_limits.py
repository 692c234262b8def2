"""The bounds every query of the stats path runs under: a time, a memory and a size
limit set as ClickHouse settings on the client itself, so that no query the dashboard server
sends (the dashboard, /api/v1, the Plausible APIs, funnels, segments, Explore) can go without
them, and a way to tell a query stopped by one from a store that is down.

Regular expressions are bounded before they reach the store (storage/queries/contract.py,
check_patterns): ClickHouse has no setting limiting an RE2 program, so the time limit here is
what stops any cost the pattern check did not foresee.
"""

from __future__ import annotations

from typing import Any

from clickhouse_connect.driver.exceptions import ClickHouseError

from tally.settings import Settings

# More rows than any answer of the stats path holds (10,000 time buckets, 1,000 breakdown rows,
# Explore's capped results): a query past it is refused, never cut short silently.
MAX_RESULT_ROWS = 1_000_000
# Distinct GROUP BY keys in one aggregation (sessions are grouped per visitor, so a busy site's
# year holds millions): a bound on memory that max_memory_usage backs up.
MAX_ROWS_TO_GROUP_BY = 50_000_000
# ClickHouse's error codes for a query stopped by one of these limits.
LIMIT_ERRORS = {
    159: "took longer than the time a query may take",  # TIMEOUT_EXCEEDED
    241: "needed more memory than a query may use",  # MEMORY_LIMIT_EXCEEDED
    158: "would answer more rows than a query may",  # TOO_MANY_ROWS
    396: "would answer more rows than a query may",  # TOO_MANY_ROWS_OR_BYTES
}


def stats_limits(settings: Settings) -> dict[str, object]:
    """The ClickHouse settings sent with every query of a stats client. Overflow modes are all
    `throw`: a partial answer would be a wrong number shown as a right one."""
    return {
        "max_execution_time": settings.stats_query_timeout_s,
        "timeout_overflow_mode": "throw",
        "max_memory_usage": settings.stats_query_memory_bytes,
        "max_result_rows": MAX_RESULT_ROWS,
        "result_overflow_mode": "throw",
        "max_rows_to_group_by": MAX_ROWS_TO_GROUP_BY,
        "group_by_overflow_mode": "throw",
        # Hyperscan's bounds (multiMatch…, should a query use them), as RE2's are checked in Python.
        "max_hyperscan_regexp_length": 256,
        "max_hyperscan_regexp_total_length": 1280,
        "regexp_max_matches_per_row": 1000,
    }


def limit_exceeded(failure: ClickHouseError) -> str | None:
    """What limit stopped the query, in words, or None when the failure is something else (the
    store down, a bug). ClickHouse's message starts `Code: N.`; the endpoint's JSON errors carry
    the same text."""
    text = str(failure)
    for code, words in LIMIT_ERRORS.items():
        if f"Code: {code}." in text or f"Code: {code}," in text:
            return words
    return None


def limit_message(failure: ClickHouseError, settings: Settings) -> str | None:
    """The sentence a client reads when its query was stopped by a limit (None otherwise)."""
    words = limit_exceeded(failure)
    if words is None:
        return None
    return (
        f"the query {words} (at most {settings.stats_query_timeout_s:g} s and "
        f"{settings.stats_query_memory_bytes // 1024**2:,} MiB): choose a shorter period or fewer "
        "or simpler filters"
    )


def log_failure(log: Any, door: str, failure: ClickHouseError, **context: object) -> str | None:
    """Log a failed stats query as what it was, `<door>_query_stopped` with the limit that stopped
    it, or `<door>_store_unavailable` (an operator alerting on outages must not page for a query
    too costly); returns the limit's words, or None for an outage."""
    stopped = limit_exceeded(failure)
    if stopped:
        log.warning(f"{door}_query_stopped", limit=stopped, **context)
    else:
        log.warning(f"{door}_store_unavailable", error=str(failure)[:300], **context)
    return stopped
