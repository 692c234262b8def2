"""Every refusal class is a `Refused` (tally/refusal.py) with a kind each front door maps: the
CLI's one line, the APIs' status and `{"error": …}`, the dashboard's sentence. None of them
falls through to a door's "unexpected error" (the CLI's log-file line, an API's 500)."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable

import pytest
from flask import Flask

from dashboard.friendly_errors import UNEXPECTED, friendly
from dashboard.refusals import STATUS, refused_answer
from ops.cli_errors import describe, settings_or_defaults
from tally.refusal import KINDS, Refused
from tally.settings import PROJECT_ROOT

# The packages requests reach (the operator package and the benchmarks only call them).
PRODUCT = ("tally", "storage", "stats", "dashboard", "alerts", "collector", "loadgen", "stream_jobs")
# Failures of the machinery, not refusals: the caller cannot fix them by asking differently.
NOT_REFUSALS = {"StoreUnavailable", "LogUnavailable", "AuditUnavailable", "ClickHouseError", "StackError"}


def every_refusal_class() -> list[type[Refused]]:
    """Every subclass of Refused the product defines (each module imported to find them)."""
    for package in PRODUCT:
        for module in pkgutil.walk_packages([str(PROJECT_ROOT / package)], f"{package}."):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)
    found: list[type[Refused]] = []
    pending = [Refused]
    while pending:
        for subclass in pending.pop().__subclasses__():
            if subclass.__module__.split(".")[0] in PRODUCT:
                found.append(subclass)
            pending.append(subclass)
    return sorted(set(found), key=lambda cls: cls.__qualname__)


REFUSALS = every_refusal_class()


def refusal(cls: type[Refused]) -> Refused:
    """One instance, however the class takes its message ("field: problem" or field, problem)."""
    try:
        return cls("site: example.com is not registered")
    except TypeError:
        return cls("site", "example.com is not registered")  # type: ignore[call-arg]


def raising(error: Exception) -> Callable[[], object]:
    def render() -> object:
        raise error

    return render


def test_the_refusals_of_every_domain_are_found() -> None:
    names = {cls.__name__ for cls in REFUSALS}
    assert {
        "InvalidDomain",
        "InvalidGoal",
        "BadParameter",
        "QueryError",
        "SiteNotFound",
        "QueryRefused",
    } <= names
    assert {"SegmentRefused", "ReportsNotConfigured", "RefusedDestination", "InvalidQuery"} <= names
    assert not names & NOT_REFUSALS


@pytest.mark.parametrize("cls", REFUSALS, ids=lambda cls: cls.__name__)
def test_every_refusal_has_a_kind_every_door_answers(cls: type[Refused]) -> None:
    refused = refusal(cls)
    assert refused.kind in STATUS
    # The CLI: its one line is the message, never "unexpected error … the traceback is in …".
    assert describe(refused, settings_or_defaults()) == str(refused)
    # The APIs: the kind's status and the message as it is.
    with Flask(__name__).app_context():
        answer = refused_answer(refused)
    assert answer.status_code == STATUS[refused.kind]
    assert answer.get_json() == {"error": str(refused)}
    # The dashboard: the panel shows the message, not "something went wrong".
    assert friendly(lambda message: message)(raising(refused))() == str(refused) != UNEXPECTED


def test_the_http_doors_answer_every_kind_with_its_own_status() -> None:
    assert STATUS == {
        "invalid": 400,
        "forbidden": 403,
        "not_found": 404,
        "conflict": 409,
        "not_configured": 503,
    }
    assert set(STATUS) == set(KINDS)


def test_the_message_is_what_str_shows_and_one_raise_may_give_another_kind() -> None:
    from dashboard.http_api.parameters import BadParameter
    from dashboard.http_api.segments import SegmentRefused
    from storage.goals import InvalidGoal

    bad = BadParameter("limit", "must be a whole number from 1 to 1000")
    assert (str(bad), bad.field, bad.kind) == (
        "limit: must be a whole number from 1 to 1000",
        "limit",
        "invalid",
    )
    taken = SegmentRefused("name: example.com already has a segment 'DE'", kind="conflict")
    assert (taken.kind, SegmentRefused("x").kind) == ("conflict", "invalid")
    assert isinstance(InvalidGoal("goal: no goal 'Signup'"), ValueError)  # callers catching ValueError


def test_a_dashboard_panel_shows_a_store_refusal_as_its_sentence() -> None:
    from storage.goals import InvalidGoal

    @friendly(lambda message: f"notice: {message}")
    def goals_panel() -> str:
        raise InvalidGoal("name: no goal 'Signup' on example.com")

    assert goals_panel() == "notice: name: no goal 'Signup' on example.com"
