"""The one query model every front door translates into: a site, a range, metrics,
dimensions, a filter expression, an order and a page.

Names are the catalogue's keys (stats/catalogue.py): Plausible's namespaced names where Plausible
has the thing (`visitors`, `bounce_rate`, `event:page`, `visit:source`, `time:day`,
`event:props:KEY`), `tally:NAME` where only Tally does (`tally:device`, `tally:language`). A door
maps its own vocabulary onto these and back; `validate` checks a query once, whichever door
built it, and its errors name the field at fault (`metrics[1]: unknown metric 'foo'`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from stats import catalogue
from storage.calendar import UTC_NAME, InvalidTimezone, zone
from storage.queries.contract import (
    ENGAGED_BOUNCE_MS,
    MAX_FILTER_VALUES,
    MAX_PATTERNS,
    MAX_PROPERTY_KEY,
    SESSION_GAP_S,
    UnsupportedQuery,
    check_pattern,
)

PROPS_PREFIX = "event:props:"
TALLY_PREFIX = "tally:"
MAX_DIMENSIONS = 3
MAX_DEPTH = 10
MAX_ROWS = 10_000
GOAL = "goal"

Operator = Literal[
    "is", "is_not", "contains", "contains_not", "matches", "matches_not",
    "matches_wildcard", "matches_wildcard_not",
]  # fmt: skip
OPERATORS: tuple[Operator, ...] = (
    "is", "is_not", "contains", "contains_not", "matches", "matches_not",
    "matches_wildcard", "matches_wildcard_not",
)  # fmt: skip
Source = Literal["raw", "agg"]


@dataclass(frozen=True)
class Condition:
    """`dimension` compared with `values` by `operator`; `case_sensitive=False` compares
    lower-cased (Plausible's `{"case_sensitive": false}`)."""

    operator: Operator
    dimension: str
    values: tuple[str, ...]
    case_sensitive: bool = True


@dataclass(frozen=True)
class Logic:
    """`and` / `or` of its operands, or `not` of its one operand."""

    operator: Literal["and", "or", "not"]
    operands: tuple[Filter, ...]


@dataclass(frozen=True)
class Behaviour:
    """`has_done`: the visitors who have, in the range, an event passing `inner`;
    `has_not_done`: those who have none (Plausible's behavioural filters)."""

    operator: Literal["has_done", "has_not_done"]
    inner: Filter


Filter = Condition | Logic | Behaviour


@dataclass(frozen=True)
class Query:
    """What is asked: one site, the half-open UTC range [start, end) (days, weeks and months of
    the site's `timezone`), metrics, 0 to 3 dimensions, a filter expression, an order
    ((name, descending) pairs), a page, and the source wanted."""

    site: str
    start: datetime
    end: datetime
    metrics: tuple[str, ...]
    dimensions: tuple[str, ...] = ()
    filters: Filter | None = None
    timezone: str = UTC_NAME
    order_by: tuple[tuple[str, bool], ...] = ()
    limit: int = MAX_ROWS
    offset: int = 0
    source: Source = "raw"
    session_gap_s: int = SESSION_GAP_S
    engaged_bounce_ms: int = ENGAGED_BOUNCE_MS


class InvalidQuery(UnsupportedQuery):
    """A query the engine refuses; `field` names the part at fault (`metrics[1]`, `filters`)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}", field=field)
        self.problem = problem


def key(entry: catalogue.Dimension) -> str:
    """A dimension's name in the model."""
    return entry.plausible or f"{TALLY_PREFIX}{entry.tally}"


def dimension_entry(name: str) -> catalogue.Dimension | None:
    """The catalogue's dimension the model's `name` names (None for event:props:KEY or unknown)."""
    name = catalogue.TIME_ALIASES.get(name, name)
    return next((entry for entry in catalogue.DIMENSIONS if key(entry) == name), None)


def props_key(name: str) -> str:
    """KEY of event:props:KEY ('' if `name` is no property dimension or its key is too long)."""
    found = name.removeprefix(PROPS_PREFIX) if name.startswith(PROPS_PREFIX) else ""
    return found if len(found) <= MAX_PROPERTY_KEY else ""


def is_time(name: str) -> bool:
    entry = dimension_entry(name)
    return entry is not None and entry.scope == "time"


def validate(query: Query) -> None:
    """InvalidQuery naming the first field at fault, or nothing."""
    validate_metrics(query)
    validate_dimensions(query.dimensions)
    if "exit_rate" in query.metrics and query.dimensions not in (("event:page",), ("visit:exit_page",)):
        raise InvalidQuery(
            f"metrics[{query.metrics.index('exit_rate')}]",
            "exit_rate needs the one dimension event:page or visit:exit_page",
        )
    if query.filters is not None:
        validate_filter(query.filters, "filters", 0, inside_behaviour=False)
        patterns = patterns_of(query.filters)
        if len(patterns) > MAX_PATTERNS:
            raise InvalidQuery(
                "filters", f"at most {MAX_PATTERNS} patterns (matches, matches_wildcard) in one query"
            )
        for pattern in patterns:
            try:
                check_pattern(pattern)
            except UnsupportedQuery as refused:
                raise InvalidQuery("filters", str(refused)) from None
    for index, (name, _) in enumerate(query.order_by):
        if name not in query.metrics and name not in query.dimensions:
            raise InvalidQuery(f"order_by[{index}]", f"{name!r} is not a queried metric or dimension")
    if query.end <= query.start:
        raise InvalidQuery("date_range", "the end must be after the start")
    if not 0 < query.limit <= MAX_ROWS or query.offset < 0:
        raise InvalidQuery("pagination", f"limit is 1 to {MAX_ROWS}, offset at least 0")
    try:
        zone(query.timezone)
    except InvalidTimezone as error:
        raise InvalidQuery("timezone", str(error)) from None


def validate_metrics(query: Query) -> None:
    if not query.metrics:
        raise InvalidQuery("metrics", "at least one metric")
    for index, name in enumerate(query.metrics):
        entry = catalogue.metric(name)
        if entry is None:
            raise InvalidQuery(f"metrics[{index}]", f"unknown metric {name!r}")
        if not entry.engine:
            raise InvalidQuery(f"metrics[{index}]", f"{name!r} is not answered by the stats engine")
        if name in query.metrics[:index]:
            raise InvalidQuery(f"metrics[{index}]", f"{name!r} is asked twice")


def validate_dimensions(dimensions: tuple[str, ...]) -> None:
    if len(dimensions) > MAX_DIMENSIONS:
        raise InvalidQuery("dimensions", f"at most {MAX_DIMENSIONS} dimensions, not {len(dimensions)}")
    for index, name in enumerate(dimensions):
        entry = dimension_entry(name)
        if entry is None and not props_key(name):
            raise InvalidQuery(f"dimensions[{index}]", f"unknown dimension {name!r}")
        if entry is not None and not entry.groupable:
            raise InvalidQuery(f"dimensions[{index}]", f"{name!r} is answered by its own report, alone")
        if name in dimensions[:index]:
            raise InvalidQuery(f"dimensions[{index}]", f"{name!r} is asked twice")
    if sum(is_time(name) for name in dimensions) > 1:
        raise InvalidQuery("dimensions", "at most one time dimension")


def validate_filter(expression: Filter, field: str, depth: int, *, inside_behaviour: bool) -> None:
    if depth > MAX_DEPTH:
        raise InvalidQuery(field, f"filters nest at most {MAX_DEPTH} deep")
    if isinstance(expression, Behaviour):
        if inside_behaviour:
            raise InvalidQuery(field, f"{expression.operator} cannot hold another has_done / has_not_done")
        validate_filter(expression.inner, field, depth + 1, inside_behaviour=True)
        return
    if isinstance(expression, Logic):
        if not expression.operands or (expression.operator == "not" and len(expression.operands) != 1):
            wanted = "one filter" if expression.operator == "not" else "filters"
            raise InvalidQuery(field, f"`{expression.operator}` needs {wanted}")
        for operand in expression.operands:
            validate_filter(operand, field, depth + 1, inside_behaviour=inside_behaviour)
        return
    if expression.operator not in OPERATORS:
        raise InvalidQuery(field, f"unknown operator {expression.operator!r}")
    entry = dimension_entry(expression.dimension)
    if not props_key(expression.dimension) and (entry is None or not entry.filterable):
        raise InvalidQuery(field, f"cannot filter by {expression.dimension!r}")
    if entry is not None and entry.tally == GOAL and expression.operator not in ("is", "is_not"):
        raise InvalidQuery(field, f"a goal is filtered by is or is_not, not {expression.operator}")
    if not 0 < len(expression.values) <= MAX_FILTER_VALUES:
        raise InvalidQuery(field, f"a condition has 1 to {MAX_FILTER_VALUES} values")


def wildcard_regex(glob: str) -> str:
    """Plausible's page glob as an anchored RE2 expression: `*` and `**` match any run of
    characters, `|` separates alternatives, everything else is itself."""
    escaped = "".join(f"\\{char}" if char in "\\.^$+?()[]{}" else char for char in glob)
    return "^(?:" + escaped.replace("**", "*").replace("*", ".*") + ")$"


def patterns_of(expression: Filter) -> list[str]:
    """The RE2 expressions a filter runs (matches values, wildcards as regular expressions)."""
    if isinstance(expression, Behaviour):
        return patterns_of(expression.inner)
    if isinstance(expression, Logic):
        return [pattern for operand in expression.operands for pattern in patterns_of(operand)]
    if expression.operator.startswith("matches_wildcard"):
        return [wildcard_regex(value) for value in expression.values]
    return list(expression.values) if expression.operator.startswith("matches") else []
