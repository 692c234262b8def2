"""Backtested alerts: when a rule would have fired over the archive's history, before it is saved.

The rule semantics are storage/alert_conditions.py's, the same the streaming evaluation
(stream_jobs/alerts.py) follows; only the counts come from elsewhere: the archive (`events`,
the log's gapless copy) instead of the alerts query's per-minute counts, which exist only
since that query ran and for 8 days.

* "Above" rules: each aligned window of the history with its count of the rule's events;
  a window fires when `exceeded` says so (the count above N, or above k x the mean of the
  windows before it, read from the archive as far back as the baseline needs). The value is
  the window's whole count; the stream reports the count at the trigger it crossed the
  bound, so for the same window its value may be lower, never its window.
* `goal_absent`: as if the rule had been created at the history's start, every stretch
  without the goal's events (from the start, between two events, up to the history's end)
  that lasts `window_minutes` or more fires once, at its start + M minutes; the value is the
  stretch's length in minutes.

Events count by event time, as the stream's windows do. The history is bounded
(MAX_HISTORY_DAYS) and the firings listed are capped (MAX_FIRINGS, the total is still given).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from clickhouse_connect.driver.client import Client

from storage import tables
from storage.alert_conditions import Predicate, absent_long_enough, exceeded, rule_predicate, window_start
from storage.alert_rules import AlertRule, InvalidRule, make_rule
from storage.sites import registered
from tally.clock import as_utc

DEFAULT_HISTORY_DAYS = 7
MAX_HISTORY_DAYS = 31
MAX_FIRINGS = 500
EARLIEST_YEAR = 2000
# A backtest sends nothing: a rule tested without its webhook gets this one, never POSTed to.
UNSENT_WEBHOOK = "https://backtest.invalid/"


@dataclass(frozen=True)
class Firing:
    """One window the rule would have fired for."""

    window_start: datetime
    window_end: datetime
    fired_at: datetime | None  # known for goal_absent (start + M); an "above" window: when its count crossed
    value: float  # events in the window, or minutes absent
    threshold: float  # the bound exceeded (N, or k x mean), or M minutes
    mean: float | None  # a factor rule's trailing mean


@dataclass(frozen=True)
class Backtest:
    rule: AlertRule
    start: datetime
    end: datetime
    firings: list[Firing]
    total: int  # firings in the history (the list stops at MAX_FIRINGS)


def backtest_rule(**fields: object) -> AlertRule:
    """A rule to backtest: validated as `make_rule` does, a webhook optional."""
    if not str(fields.get("webhook_url") or "").strip():
        fields["webhook_url"] = UNSENT_WEBHOOK
    return make_rule(**fields)


def history(days: int, end: datetime) -> tuple[datetime, datetime]:
    """The `days` days up to `end` (UTC), or InvalidRule naming `days`."""
    if not 1 <= days <= MAX_HISTORY_DAYS:
        raise InvalidRule(f"days: a history of 1 to {MAX_HISTORY_DAYS} days")
    end = as_utc(end)
    if end.year < EARLIEST_YEAR:  # nothing was archived before; and no date arithmetic below year 1
        raise InvalidRule(f"until: a time after {EARLIEST_YEAR}")
    return end - timedelta(days=days), end


def backtest(client: Client, rule: AlertRule, start: datetime, end: datetime) -> Backtest:
    """When `rule` would have fired between `start` and `end`, evaluated over the archive."""
    registered(client, rule.site, InvalidRule)
    predicate = rule_predicate(client, rule)
    if predicate is None:  # only a goal_absent rule's goal can be missing
        raise InvalidRule(f"goal: {rule.site} has no goal {rule.goal!r} (see 'tally goals list {rule.site}')")
    if rule.kind == "goal_absent":
        firings = absences(client, rule, predicate, start, end)
    else:
        firings = windows_above(client, rule, predicate, start, end)
    return Backtest(rule, start, end, firings[:MAX_FIRINGS], len(firings))


_WINDOW_COUNTS = f"""
SELECT intDiv(toUnixTimestamp(toStartOfMinute(ts)), {{width:UInt32}}) * {{width:UInt32}} AS window,
       count()
FROM {tables.EVENTS}
WHERE site = {{site:String}}
  AND ts >= {{since:DateTime64(3, 'UTC')}} AND ts < {{end:DateTime64(3, 'UTC')}}
  AND {{predicate}}
GROUP BY window
"""


def windows_above(
    client: Client, rule: AlertRule, predicate: Predicate, start: datetime, end: datetime
) -> list[Firing]:
    """The aligned windows overlapping [start, end) whose count is above the rule's bound: the
    first counted from its own start, the last up to `end` (as the stream sees a window so far)."""
    width = rule.window_minutes * 60
    first = window_start(int(start.timestamp()), width)
    baseline = rule.baseline_windows if rule.factor else 0
    parameters = {
        **predicate.parameters,
        "site": rule.site,
        "width": width,
        "since": _at(first - baseline * width),
        "end": end,
    }
    sql = _WINDOW_COUNTS.replace("{predicate}", predicate.sql)
    counts = {int(window): int(n) for window, n in client.query(sql, parameters=parameters).result_rows}
    firings = []
    # An empty window never fires (every bound is ≥ 0): only the windows with events are judged.
    for window in sorted(w for w in counts if w >= first):
        before = sum(counts.get(window - i * width, 0) for i in range(1, baseline + 1))
        bound = exceeded(rule, counts[window], before)
        if bound is not None:
            firings.append(
                Firing(_at(window), _at(window + width), None, counts[window], bound.threshold, bound.mean)
            )
    return firings


_GAPS = f"""
SELECT previous, ts FROM
(
    SELECT ts, lagInFrame(ts) OVER (ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS previous,
           row_number() OVER (ORDER BY ts) AS n
    FROM {tables.EVENTS}
    WHERE site = {{site:String}}
      AND ts >= {{start:DateTime64(3, 'UTC')}} AND ts < {{end:DateTime64(3, 'UTC')}}
      AND {{predicate}}
)
WHERE n > 1 AND dateDiff('millisecond', previous, ts) >= {{absent_ms:Int64}}
ORDER BY ts
"""

_FIRST_LAST = f"""
SELECT min(ts), max(ts), count() FROM {tables.EVENTS}
WHERE site = {{site:String}}
  AND ts >= {{start:DateTime64(3, 'UTC')}} AND ts < {{end:DateTime64(3, 'UTC')}}
  AND {{predicate}}
"""


def absences(
    client: Client, rule: AlertRule, predicate: Predicate, start: datetime, end: datetime
) -> list[Firing]:
    """The stretches without the goal's events lasting at least the rule's minutes."""
    parameters = {
        **predicate.parameters,
        "site": rule.site,
        "start": start,
        "end": end,
        "absent_ms": rule.window_minutes * 60_000,
    }
    [(first, last, seen)] = client.query(
        _FIRST_LAST.replace("{predicate}", predicate.sql), parameters=parameters
    ).result_rows
    if not seen:
        stretches = [(start, end)]
    else:
        between = client.query(_GAPS.replace("{predicate}", predicate.sql), parameters=parameters).result_rows
        stretches = [
            (start, as_utc(first)),
            *((as_utc(a), as_utc(b)) for a, b in between),
            (as_utc(last), end),
        ]
    minutes = timedelta(minutes=rule.window_minutes)
    return [
        Firing(
            since,
            until,
            since + minutes,
            round((until - since).total_seconds() / 60, 1),
            rule.window_minutes,
            None,
        )
        for since, until in stretches
        if absent_long_enough(rule, (until - since).total_seconds())
    ]


def _at(epoch_s: int) -> datetime:
    return datetime.fromtimestamp(epoch_s, UTC)
