"""Numbers that show their work: a stats answer's provenance, as the APIs carry it
in `meta` and as the Overview shows it under the top metrics (storage/queries/provenance.py
computes it).

The stats API adds it when asked (`meta=true`): the answer becomes
`{"results": <the usual answer>, "meta": {...}}` (a funnel's, already an object with `meta`,
gets the fields in that `meta`), so callers that do not ask get the same shapes as before and
pay nothing. Plausible's v2 query always carries it, inside its `meta` object.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from dash import Dash, Input, Output, html
from dash.exceptions import PreventUpdate

from dashboard.accounts import current_user
from dashboard.friendly_errors import friendly
from dashboard.http_api.authorisation import caller
from dashboard.http_api.export import EXPORT_PATH
from dashboard.http_api.parameters import Arguments, BadParameter
from dashboard.periods import Period
from dashboard.sharing import shared_link
from dashboard.store import ClientFactory
from storage import queries
from storage.definitions import CurrentDefinitions, Version
from storage.queries import Source, StatsQuery, questions
from storage.queries import provenance as provenance_queries
from storage.queries.provenance import Provenance
from tally.settings import Settings

META_PARAMETER = "meta"
YES, NO = ("true",), ("false",)


def asked(arguments: Arguments) -> bool:
    """Whether the call asks for `meta` (meta=true|false; a 400 naming `meta` otherwise)."""
    value = arguments.get(META_PARAMETER)
    if value is None or value in NO:
        return False
    if value in YES:
        return True
    raise BadParameter(META_PARAMETER, "must be true or false")


def definitions(settings: Settings, q: StatsQuery) -> dict[str, int]:
    """The definitions that shaped the numbers: the query's, and the stream jobs' lateness."""
    return {
        "session_gap_s": q.session_gap_s,
        "engaged_bounce_ms": q.engaged_bounce_ms,
        "watermark_s": settings.watermark_s,
    }


def answered_source(client: Any, q: StatsQuery, source: Source) -> Source:
    """The source that answers `q` when `source` is asked (filtered reports, and ranges late page
    views touch, read the archive: storage/queries/contract.py, LATE_EVENTS_RULE)."""
    return queries.answered_source(client, q, source)


def of(
    client: Any, settings: Settings, q: StatsQuery, source: Source, version: Version | None = None
) -> Provenance:
    """The provenance of the answer `source` gives to `q` (`source`: the one that answered),
    made with definitions version `version` (storage/definitions.py; None: not recorded yet)."""
    return provenance_queries.provenance(
        client,
        q,
        source,
        settings.pageviews_topic,
        definitions(settings, q),
        version=None if version is None else version.number,
    )


def meta(
    client: Any, settings: Settings, q: StatsQuery, source: Source, version: Version | None = None
) -> dict[str, object]:
    """The `meta` fields of an answer to `q` read from `source` (the one that answered); for a
    team member's key, scoped to its sites."""
    found = provenance_queries.to_json(of(client, settings, q, source, version))
    access = caller()
    return found if access is None or access.sites is None else scoped(found)


SCOPE_NOTE = (
    "offsets and late events of this key's sites only: the stream jobs' end offsets count every "
    "site's events, so processed_to is left out (pending says what of these sites is not processed yet)"
)


def scoped(found: dict[str, Any]) -> dict[str, Any]:
    """`meta` as a team member's key sees it: the partitions' offsets of its site's own events
    (the answer's site, which the key may read) and that site's late events, never the log's
    end offsets, which count every site's events."""
    log = found["log"]
    partitions = [{k: v for k, v in p.items() if k != "processed_to"} for p in log["partitions"]]
    return {
        **found,
        "log": {"topic": log["topic"], "partitions": partitions, "scope": SCOPE_NOTE},
    }


# --- the Overview's info line ------------------------------------------------------------


def register_provenance(app: Dash, settings: Settings, clients: ClientFactory) -> None:
    """Under the top metrics: where they were read from, what of the log they cover, late
    events and whether agg and raw agree (a disagreement as a warning, never only on hover)."""
    source: Source = settings.dashboard_source
    defined = CurrentDefinitions(settings, clients)  # the current definitions version's

    @app.callback(
        Output("provenance", "children"),
        Output("provenance", "className"),
        Output("provenance", "title"),
        Input("site", "value"),
        Input("period", "data"),
        Input("filters", "data"),
    )
    @friendly(lambda message: (message, "provenance provenance-unknown", ""))
    def show(site: str | None, period_data: dict | None, filters: dict | None) -> tuple[Any, str, str]:
        if not site or period_data is None:
            raise PreventUpdate
        period = Period.from_store(period_data)
        q = questions.question(
            site, period.start, period.end, defined.settings(), timezone=period.timezone, filters=filters
        )
        q = questions.with_saved_segment(clients(), q)
        found = of(clients(), settings, q, answered_source(clients(), q, source), defined.version())
        tone = "provenance-warning" if found.agreement.status == "disagree" else "provenance-ok"
        # A shared link's viewer sees the line, not the offsets: they count every site's events;
        # a team member the offsets of the site's own events, not the log's end offsets.
        details = "" if shared_link() is not None else hover(found, scoped=current_user() is not None)
        parts = line(found)
        if shared_link() is None:  # the events themselves: for the site's members, not a shared link
            parts += [" \u00b7 ", download_link(site, period.start, period.end, filters)]
        return parts, f"provenance {tone}", details


def line(p: Provenance) -> list[Any]:
    """The info line's parts; each carries its own id for tests and screen readers."""
    parts: list[Any] = [
        html.Span(f"Read from {SOURCE_WORDS[p.source]}", id="provenance-source"),
        " \u00b7 ",
        html.Span(coverage_words(p), id="provenance-coverage"),
        " \u00b7 ",
        html.Span(late_words(p), id="provenance-late"),
        " \u00b7 ",
        html.Span(
            agreement_words(p),
            id="provenance-agreement",
            **{"data-status": p.agreement.status},
        ),
    ]
    return parts


def download_link(site: str, start: datetime, end: datetime, filters: dict | None) -> html.A:
    """The page views of the period and filters shown, as the export streams them
    (dashboard/http_api/export.py): the rows add up to the page views on the Overview."""
    asked = {
        "site": site,
        "from": start.astimezone(UTC).isoformat(),
        "to": end.astimezone(UTC).isoformat(),
        "metric": "pageviews",
        "format": "csv",
    }
    if filters:
        asked["filters"] = json.dumps(filters, separators=(",", ":"))
    return html.A(
        "Download these page views (CSV)", href=f"{EXPORT_PATH}?{urlencode(asked)}", id="provenance-export"
    )


SOURCE_WORDS = {"agg": "the stream jobs' tables (agg)", "raw": "the raw archive (raw)"}


def coverage_words(p: Provenance) -> str:
    from_log = [c for c in p.partitions if c.from_log]
    events = sum(c.events for c in p.partitions)
    pending = sum(c.pending for c in from_log)
    words = f"{events} events from {len(from_log)} log partition{'s' if len(from_log) != 1 else ''}"
    if p.watermark is not None:
        words += f", watermark {p.watermark:%Y-%m-%d %H:%M:%S} UTC"
    if pending:
        words += f", {pending} not yet processed by the stream jobs"
    return words


def late_words(p: Provenance) -> str:
    if not p.late_events:
        return "no late events"
    plural = "s" if p.late_events != 1 else ""
    return f"{p.late_events} late event{plural} (counted in raw, not in agg)"


FIGURE_WORDS = {
    "pageviews_visitors": "page views and visitors",
    "sessions": "sessions",
    "goal_events": "goal events",
    "custom_events": "custom events",
}


def agreement_words(p: Provenance) -> str:
    a = p.agreement
    if a.status == "agree":
        checked = [FIGURE_WORDS.get(f.figure, f.figure) for f in a.figures if f.status == "agree"]
        days = f"{a.checked_days} day{'s' if a.checked_days != 1 else ''} checked"
        return f"agg and raw agree ({days}{': ' + ', '.join(checked) if checked else ''})"
    if a.status == "not checked":
        return f"agg and raw not checked: {a.reason}"
    parts = []
    if a.differences:
        parts.append(
            "agg and raw disagree on "
            + "; ".join(
                f"{d.day:%Y-%m-%d}: raw {d.raw[0]} page views / {d.raw[1]} visitors, "
                f"agg {d.agg[0]} / {d.agg[1]}" + (f" ({d.late_events} late)" if d.late_events else "")
                for d in a.differences
            )
        )
    for figure in a.figures:
        if figure.figure != "pageviews_visitors" and figure.status == "disagree":
            days = "; ".join(
                f"{d.day:%Y-%m-%d} (raw {_numbers(d.raw)}, agg {_numbers(d.agg)})" for d in figure.differences
            )
            parts.append(f"{FIGURE_WORDS.get(figure.figure, figure.figure)} differ on {days}")
    if not a.differences:
        parts[0] = f"agg and raw disagree: {parts[0]}"
    return "\u26a0 " + "; ".join(parts)


def _numbers(numbers: dict[str, int]) -> str:
    return ", ".join(f"{value} {name}" for name, value in numbers.items())


def hover(p: Provenance, scoped: bool = False) -> str:
    """The details behind the line: offsets per partition, the stream jobs' progress (not to a
    team member: the log's end offsets count every site's events)."""
    lines = [f"Range {fmt(p.start)} to {fmt(p.end)}, topic {p.topic}"]
    for c in p.partitions:
        if not c.from_log:
            lines.append(f"{c.events} events written to the archive directly (not from the log)")
            continue
        if scoped:
            processed = f"{c.pending} not processed yet"
        else:
            processed = "not read yet" if c.processed_to is None else f"processed below {c.processed_to}"
        lines.append(
            f"partition {c.partition}: offsets {c.first_offset}..{c.last_offset} ({c.events} events), "
            f"stream jobs {processed}"
        )
    number = "not recorded yet" if p.version is None else str(p.version)
    lines.append(f"Definitions version {number} ({p.definitions_version}): {p.definitions}")
    return "\n".join(lines)


def fmt(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC"
