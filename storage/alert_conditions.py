"""What an alert rule (storage/alert_rules.py) counts and when it holds: the rule semantics in
one place, followed by the streaming evaluation (stream_jobs/alerts.py, over the alerts
query's per-minute counts) and by the backtest (storage/alert_backtest.py, over the archive).

* Which events a rule counts: a `Predicate`, SQL over the columns `name` and `path` that both
  `alert_counts_minute` and `events` have; the user's text only ever travels as a parameter.
* Windows: aligned on the epoch (:00, :05, … for 5 minutes); an event belongs to the window
  holding the start of its minute.
* "Above" rules: a window fires when its count is above the threshold N, or above factor k x
  the mean of the `baseline_windows` windows before it (never while that mean is 0).
* `goal_absent`: fires once the goal has not been seen for `window_minutes`, counted from its
  last event (or from the rule's creation).
"""

from __future__ import annotations

from dataclasses import dataclass

from clickhouse_connect.driver.client import Client

from storage.alert_rules import AlertRule
from storage.goals import InvalidGoal, find_goal
from storage.page_patterns import pattern_regex

PAGEVIEW = "pageview"


@dataclass(frozen=True)
class Predicate:
    """Which events a rule counts: SQL over the columns `name` and `path`, with its parameters."""

    sql: str
    parameters: dict[str, object]


@dataclass(frozen=True)
class Bound:
    """An "above" rule's bound that a window's count exceeded, and the trailing mean (factor rules)."""

    threshold: float
    mean: float | None


def rule_predicate(client: Client, rule: AlertRule) -> Predicate | None:
    """What the rule counts; None for a goal_absent rule whose goal was removed since."""
    if rule.kind == "pageviews_above":
        return Predicate("name = {pageview:String}", {"pageview": PAGEVIEW})
    if rule.kind == "event_rate_above":
        return event_or_page(rule.event_name, rule.page_pattern)
    try:
        goal = find_goal(client, rule.site, rule.goal)
    except InvalidGoal:
        return None
    return event_or_page(goal.event_name, goal.page_pattern)


def event_or_page(event_name: str, page_pattern: str) -> Predicate:
    if event_name:
        return Predicate("name = {event:String}", {"event": event_name})
    return Predicate(
        "name = {pageview:String} AND match(path, {regex:String})",
        {"pageview": PAGEVIEW, "regex": pattern_regex(page_pattern)},
    )


def window_start(epoch_s: int, width_s: int) -> int:
    """The start (epoch seconds) of the aligned window of `width_s` holding `epoch_s`."""
    return epoch_s // width_s * width_s


def exceeded(rule: AlertRule, current: int, before: int) -> Bound | None:
    """The bound a window's `current` count is above, or None: the rule does not fire.

    `before` is the count of the `baseline_windows` windows before it (read only by a factor
    rule; a window missing from the history counts 0)."""
    if rule.factor:
        mean = before / rule.baseline_windows
        bound = rule.factor * mean
        return Bound(bound, mean) if mean > 0 and current > bound else None
    return Bound(rule.threshold, None) if current > rule.threshold else None


def absent_long_enough(rule: AlertRule, absent_s: float) -> bool:
    """Whether a goal unseen for `absent_s` seconds fires the goal_absent rule."""
    return absent_s >= rule.window_minutes * 60
