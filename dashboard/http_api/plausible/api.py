"""Plausible's Stats API v2 on the dashboard server: `POST /api/v2/query` (docs/plausible-api.md).

A report, script or integration written for Plausible works against Tally by changing the
base URL and the key: the body is Plausible's (dashboard.http_api.plausible.query parses it), the
numbers are Tally's query layer's (dashboard.http_api.plausible.report), the answer is Plausible's
`{"results": [{"metrics": […], "dimensions": […]}], "meta": {…}, "query": {…}}`. The key is
the stats API's (`Authorization: Bearer <api key>`); an optional `?source=agg|raw` (Tally's,
default agg where it answers) picks the source, and `meta.source` says which one answered.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import structlog
from flask import Blueprint, Response, g, jsonify, request

from dashboard import provenance
from dashboard.access import key_refusal, route_access
from dashboard.http_api.authorisation import authorise, may_read
from dashboard.http_api.plausible import comparisons as plausible_comparisons
from dashboard.http_api.plausible.imports import all_time_first_day, with_imports
from dashboard.http_api.plausible.query import PlausibleQuery, QueryBody, parse_body, plan
from dashboard.http_api.plausible.report import Report, run, shown, site_of
from dashboard.refusals import answer_refusals, error
from dashboard.segments import expand
from dashboard.store import ClientFactory, StoreUnavailable
from storage.definitions import CurrentDefinitions, Version
from storage.queries import Source, questions
from storage.query_limits import limit_message, log_failure
from storage.sites import site_timezone
from tally.settings import Settings

log = structlog.get_logger()

PREFIX = "/api/v2"
MAX_BODY = 64 * 1024
SOURCES: tuple[Source, ...] = ("agg", "raw")


def plausible_api(
    settings: Settings, clients: ClientFactory, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
) -> Blueprint:
    api = Blueprint("plausible_api", __name__, url_prefix=PREFIX)
    api_key = settings.resolved_api_key().encode()
    defined = CurrentDefinitions(settings, clients)

    @api.before_request
    def require_api_key() -> Response | None:
        authorization = request.headers.get("Authorization", "")
        if not authorization:
            return unauthorized("Missing API key. Please use a valid Tally API key as a Bearer Token.")
        access = authorise(authorization, api_key, clients, request.remote_addr or "")
        if access is None:
            return unauthorized("Invalid API key. Please make sure you're using a valid Tally API key.")
        g.api_access = access
        if access_refusal := key_refusal(route_access(request.endpoint), access, "", lambda: None):
            return error(403, access_refusal)  # undeclared endpoints: the operator's (dashboard/access.py)
        return None

    @api.after_request
    def never_cached(response: Response) -> Response:
        response.headers["Cache-Control"] = "no-store"
        return response

    @api.post("/query")
    def query() -> Response:
        body_bytes = request.stream.read(MAX_BODY + 1)  # bounded, with or without Content-Length
        if len(body_bytes) > MAX_BODY:
            return error(413, f"Request body too large: at most {MAX_BODY // 1024} KiB.")
        source = request.args.get("source", "agg")
        if source not in SOURCES or set(request.args) - {"source"}:
            return error(400, "Invalid query string: only source=agg or source=raw (Tally's) is accepted.")
        body = parse_body(body_bytes)
        client = clients()
        site = site_of(client, body.site_id)
        if not may_read(site):  # a team member's key reads only its sites
            return error(403, f"This API key may not read site {site!r}.")
        first_day = (
            all_time_first_day(client, site, body.include.imports) if body.date_range == "all" else None
        )
        body = body.model_copy(update={"site_id": site, "filters": expand(client, site, body.filters)})
        planned = plan(body, clock(), first_day, site_timezone(client, site))
        now_defined = defined.settings()  # the current definitions version's (storage/definitions.py)
        gap_s, bounce_ms = now_defined.session_gap_s, now_defined.engaged_bounce_ms
        report = run(client, planned, source, gap_s, bounce_ms)  # type: ignore[arg-type]
        report, imports_meta = with_imports(client, planned, report, source, gap_s, bounce_ms)  # type: ignore[arg-type]
        report = shown(report, planned)
        answered = answer(planned, report, imports_meta)
        compared = plausible_comparisons.compared_query(planned)
        if compared is not None:  # include.comparisons: the same query over the compared range
            other = shown(run(client, compared, source, gap_s, bounce_ms), compared)  # type: ignore[arg-type]
            plausible_comparisons.attach(answered, planned, report, compared, other)
        answered["meta"] |= plausible_meta(client, now_defined, planned, report, defined.version())  # type: ignore[operator]
        return jsonify(answered)

    @api.route("/<path:unknown>", methods=["GET", "POST"])
    def not_found(unknown: str) -> Response:
        if unknown == "query":  # GET /api/v2/query: the query is a POST's body
            response = error(405, "Method not allowed: send the query as the JSON body of a POST.")
            response.headers["Allow"] = "POST"
            return response
        return error(404, f"No such endpoint: {PREFIX}/{unknown}; the v2 Stats API is POST {PREFIX}/query.")

    answer_refusals(api)  # a QueryError in Plausible's wording, an unknown site_id, …: status and message

    @api.errorhandler(StoreUnavailable)
    def store_unavailable(failure: StoreUnavailable) -> Response:
        log_failure(log, "plausible_api", failure, path=request.path)
        stopped = limit_message(failure, settings)  # a query past its bounds, not a store down
        words = f"{stopped[0].upper()}{stopped[1:]}." if stopped else None  # "The query took longer…"
        response = error(503, words or "The analytics store is not answering; try again shortly.")
        response.headers["Retry-After"] = "5"
        return response

    @api.errorhandler(Exception)
    def unexpected(failure: Exception) -> Response:
        log.exception("plausible_api_failed", path=request.path)
        return error(500, "Internal error; the dashboard's log has the details.")

    return api


def unauthorized(message: str) -> Response:
    response = error(401, message)
    response.headers["WWW-Authenticate"] = 'Bearer realm="tally"'
    return response


def answer(query: PlausibleQuery, report: Report, imports_meta: dict[str, object]) -> dict[str, object]:
    body = query.body
    page = report.rows[body.pagination.offset : body.pagination.offset + body.pagination.limit]
    meta: dict[str, object] = {"source": report.source, **imports_meta}
    if body.include.time_labels:
        meta["time_labels"] = report.time_labels
    if body.include.total_rows:
        meta["total_rows"] = len(report.rows)
    return {
        "results": [
            {"metrics": [row.metrics.get(name) for name in query.metrics], "dimensions": list(row.dimensions)}
            for row in page
        ],
        "meta": meta,
        "query": echo(query, body),
    }


def plausible_meta(
    client: object, settings: Settings, query: PlausibleQuery, report: Report, version: Version | None = None
) -> dict[str, object]:
    """Tally's provenance fields (dashboard/provenance.py), added to Plausible's `meta`."""
    q = questions.question(query.site, query.start, query.end, settings, timezone=query.timezone)
    return provenance.meta(client, settings, q, report.source, version)


def echo(query: PlausibleQuery, body: QueryBody) -> dict[str, object]:
    """The query as answered, Plausible's `query` object: the range with both ends included."""
    last = query.end - timedelta(seconds=1)
    return {
        "site_id": query.site,
        "metrics": body.metrics,
        "date_range": [query.start.isoformat(), last.isoformat()],
        "filters": body.filters,
        "dimensions": body.dimensions,
        "order_by": [[name, "desc" if descending else "asc"] for name, descending in query.order_by],
        "include": {name: value for name, value in body.include.model_dump().items() if value},
        "pagination": body.pagination.model_dump(),
    }
