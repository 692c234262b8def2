"""`POST /api/v1/alerts/backtest`: the request's JSON body as a rule and a history, and the
backtest (storage/alert_backtest.py) as JSON. No I/O here.

The body's types are checked strictly (an integer is a JSON integer, not "5" nor 5.0) before
the rule's own validation, so that the API refuses exactly what its OpenAPI document
(dashboard/http_api/openapi.py, AlertBacktestRequest) calls invalid, naming the field.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from dashboard.http_api.parameters import BadParameter
from storage import alert_backtest
from storage.alert_backtest import Backtest, Firing
from storage.alert_rules import RULE_KINDS, AlertRule, InvalidRule
from tally.clock import as_utc

# Field → the JSON types it takes (bool is excluded from the numbers below, as JSON has it apart).
RULE_FIELDS: dict[str, tuple[type, ...]] = {
    "site": (str,),
    "kind": (str,),
    "window_minutes": (int,),
    "threshold": (int,),
    "factor": (int, float),
    "baseline_windows": (int,),
    "goal": (str,),
    "event_name": (str,),
    "page_pattern": (str,),
    "webhook_url": (str,),
}
HISTORY_FIELDS: dict[str, tuple[type, ...]] = {"days": (int,), "until": (str,)}
REQUIRED = ("site", "kind")


def parse(body: object, now: datetime) -> tuple[AlertRule, datetime, datetime]:
    """The rule to backtest and its history [start, end), or BadParameter naming the field."""
    if not isinstance(body, dict):
        raise BadParameter("body", "a JSON object with the rule's fields (site, kind, …)")
    for field, value in body.items():
        types = RULE_FIELDS.get(field) or HISTORY_FIELDS.get(field)
        if types is None:
            raise BadParameter(str(field)[:100], "not a field of a backtest")
        if isinstance(value, bool) or not isinstance(value, types):
            raise BadParameter(field, f"must be a {_type_name(types)}")
    for field in REQUIRED:
        if field not in body:
            raise BadParameter(field, "required")
    if body["kind"] not in RULE_KINDS:
        raise BadParameter("kind", f"one of {', '.join(RULE_KINDS)}")
    end = _until(body.get("until"), now)
    try:
        rule = alert_backtest.backtest_rule(**{k: v for k, v in body.items() if k in RULE_FIELDS})
        start, end = alert_backtest.history(body.get("days", alert_backtest.DEFAULT_HISTORY_DAYS), end)
    except InvalidRule as refused:
        raise BadParameter(*_field_and_problem(str(refused))) from None
    return rule, start, end


def _until(value: object, now: datetime) -> datetime:
    if value is None:
        return now
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise BadParameter("until", "an ISO-8601 time such as 2026-11-20T12:00:00Z") from None
    return as_utc(moment)


def _field_and_problem(message: str) -> tuple[str, str]:
    """InvalidRule's messages start with the field at fault ("window_minutes: …")."""
    field, sep, problem = message.partition(": ")
    if sep and (field in RULE_FIELDS or field in HISTORY_FIELDS):
        return field, problem
    return "rule", message


def _type_name(types: tuple[type, ...]) -> str:
    return {str: "string", int: "integer"}.get(types[0], "number") if len(types) == 1 else "number"


def backtest_json(result: Backtest, iso: Callable[[datetime], str]) -> dict[str, object]:
    """The answer: the rule in words, the history, and the windows it would have fired for."""
    return {
        "site": result.rule.site,
        "kind": result.rule.kind,
        "description": result.rule.describe(),
        "from": iso(result.start),
        "to": iso(result.end),
        "firings": [firing_json(firing, iso) for firing in result.firings],
        "total": result.total,
        "truncated": result.total > len(result.firings),
    }


def firing_json(firing: Firing, iso: Callable[[datetime], str]) -> dict[str, object]:
    return {
        "window_start": iso(firing.window_start),
        "window_end": iso(firing.window_end),
        "fired_at": iso(firing.fired_at) if firing.fired_at else None,
        "value": firing.value,
        "threshold": firing.threshold,
        "mean": firing.mean,
    }
