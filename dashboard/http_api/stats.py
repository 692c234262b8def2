"""The JSON stats API (`/api/v1/...`, DESIGN.md "Stats API"), a Flask blueprint on the
dashboard's server. Bearer-key auth, every bad parameter a 400 naming it, numbers from
storage.queries exactly as the dashboard shows them."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from urllib.parse import urlsplit

import structlog
from flask import Blueprint, Response, g, jsonify, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from dashboard import provenance
from dashboard.access import key_refusal, route_access
from dashboard.http_api import answers, backtest_request, parameters, sql_query
from dashboard.http_api.annotations import register_annotations_api
from dashboard.http_api.answers import goal_json, iso
from dashboard.http_api.authorisation import authorise, scoped_site
from dashboard.http_api.export import ExportSlots, register_export_api
from dashboard.http_api.imports import register_imports_api
from dashboard.http_api.manage import register_management
from dashboard.http_api.openapi import openapi_document
from dashboard.http_api.parameters import Arguments, BadParameter
from dashboard.http_api.plausible import v1 as plausible_v1
from dashboard.http_api.segments import register_segments_api
from dashboard.http_api.sites_api import register_sites_api
from dashboard.http_api.whatif import register_whatif_api
from dashboard.refusals import answer_refusals, error
from dashboard.store import ClientFactory, StoreUnavailable
from storage import alert_backtest, alert_rules, queries, users
from storage.calendar import local_date, zone
from storage.definitions import CurrentDefinitions
from storage.queries import FunnelStep, SessionRow, Source, StatsQuery, StepResult, questions, vitals
from storage.queries.journeys import JourneyRow, answering_source
from storage.queries.realtime_breakdowns import RealtimeReport, realtime_breakdown
from storage.queries.retention import retention
from storage.query_limits import limit_message, log_failure
from storage.saved_funnels import InvalidFunnel, find_funnel
from storage.sites import InvalidDomain, normalise, site_timezone
from tally.settings import Settings

log = structlog.get_logger()

HTTP_METHODS = ("get", "put", "post", "delete", "patch")
PREFIX = "/api/v1"
DEFAULT_BREAKDOWN_LIMIT = 10
DEFAULT_SESSIONS_LIMIT = 100
DEFAULT_ALERTS_LIMIT = 100


def stats_api(
    settings: Settings,
    clients: ClientFactory,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    export_slots: ExportSlots | None = None,
) -> Blueprint:
    """The stats API; `export_slots` bounds the exports streaming at once (shared with the
    dashboard's download link, dashboard/app.py)."""
    api = Blueprint("stats_api", __name__, url_prefix=PREFIX)
    api_key = settings.resolved_api_key().encode()
    # The current definitions version's session gap and bounce threshold (storage/definitions.py).
    defined = CurrentDefinitions(settings, clients)

    @api.before_request
    def require_api_key() -> Response | None:
        if request.endpoint == "stats_api.openapi":
            return None  # the description of the API is public; its numbers are not
        authorization = request.headers.get("Authorization", "")
        access = authorise(authorization, api_key, clients, request.remote_addr or "")
        if access is None:
            response = error(401, "missing or wrong API key: send Authorization: Bearer <api key>")
            response.headers["WWW-Authenticate"] = 'Bearer realm="tally"'
            return response
        g.api_access = access
        # A team member's key reads only its sites (dashboard/http_api/authorisation.py).
        named = "site" if request.args.get("site") else "site_id"  # Plausible's APIs say site_id
        site = scoped_site(request.args.get(named) or "")
        if site and not access.may_read(site):
            return error(403, f"{named}: this API key may not read {site}")
        # The role and scope the endpoint declares (dashboard/access.py), as the dashboard asks them.
        declared = route_access(request.endpoint)
        in_query = site if declared is not None and declared.site == "query" else ""
        refusal = key_refusal(declared, access, in_query, lambda: users.get_user(clients(), access.email))
        if refusal is not None:
            if named == "site_id" and refusal.startswith("site: "):  # the parameter as it was sent
                refusal = "site_id: " + refusal.removeprefix("site: ")
            return error(403, refusal)
        return None

    @api.after_request
    def never_cached(response: Response) -> Response:
        response.headers["Cache-Control"] = "no-store"
        return response

    @api.get("/openapi.json")
    def openapi() -> Response:
        return jsonify(openapi_document())

    def asked() -> tuple[Arguments, StatsQuery]:
        """The request's arguments and the report they ask for."""
        arguments, q, _ = asked_with_comparison()
        return arguments, q

    def asked_with_comparison(
        args: dict[str, list[str]] | None = None,
    ) -> tuple[Arguments, StatsQuery, StatsQuery | None]:
        """The arguments (the request's unless given), the report, and the same report over the
        compared range (`compare`), in the site's time zone (storage/sites.py)."""
        arguments = Arguments.parse(request.args.to_dict(flat=False) if args is None else args)
        client, site = clients(), parameters.site(arguments)
        first_day = queries.first_day(client, site) if arguments.get("period") == "all" else None
        q, compared = parameters.window_queries(
            arguments, clock(), defined.settings(), site_timezone(client, site), first_day
        )
        return arguments, q, compared

    def answered(answer: object, arguments: Arguments, q: StatsQuery, source: Source) -> Response:
        """The answer, inside `{"results", "meta"}` when the call asks for meta (provenance.py)."""
        if not provenance.asked(arguments):
            return jsonify(answer)
        meta = provenance.meta(
            clients(), settings, q, provenance.answered_source(clients(), q, source), defined.version()
        )
        return jsonify({"results": answer, "meta": meta})

    def plausible_call(endpoint: plausible_v1.Endpoint) -> Response | None:
        """Plausible's v1 answer when the call uses Plausible's parameters (site_id), else None."""
        if not plausible_v1.requested(request.args):
            return None
        args = request.args.to_dict(flat=False)
        return jsonify(
            plausible_v1.answer(
                endpoint,
                args,
                clients(),
                clock(),
                defined.settings().session_gap_s,
                defined.settings().engaged_bounce_ms,
            )
        )

    register_export_api(api, settings, clients, clock, export_slots or ExportSlots())

    @api.get("/stats/aggregate")
    def aggregate() -> Response:
        if (plausible := plausible_call("aggregate")) is not None:
            return plausible
        arguments, q, compared = asked_with_comparison()
        source = parameters.source(arguments)
        return answered(answers.aggregate(clients(), q, compared, source), arguments, q, source)

    @api.get("/stats/timeseries")
    def timeseries() -> Response:
        if (plausible := plausible_call("timeseries")) is not None:
            return plausible
        arguments, q, compared = asked_with_comparison()
        interval = parameters.interval(arguments, q)
        source = parameters.source(arguments)
        return answered(answers.timeseries(clients(), q, compared, interval, source), arguments, q, source)

    @api.get("/stats/breakdown")
    def breakdown() -> Response:
        if (plausible := plausible_call("breakdown")) is not None:
            return plausible
        arguments, q = asked()
        by = parameters.dimension(arguments)
        goal = parameters.goal(arguments, by)
        limit = parameters.limit(arguments, DEFAULT_BREAKDOWN_LIMIT)
        source = parameters.source(arguments)
        return answered(answers.breakdown(clients(), q, by, goal, limit, source), arguments, q, source)

    @api.get("/stats/funnel")
    def funnel() -> Response:
        arguments, q = asked()
        steps = saved_funnel_steps(q.site, arguments) or parameters.funnel_steps(arguments)
        report = queries.funnel(clients(), q, steps, source=parameters.source(arguments), now=clock())
        meta: dict[str, object] = {"source": report.source}
        if provenance.asked(arguments):  # a funnel's answer has its meta already: the fields join it
            meta = provenance.meta(clients(), settings, q, report.source, defined.version())
        if report.days is not None:  # agg: which days were read stored, computed now, and what was live
            meta["funnel_days"] = asdict(report.days)
        return jsonify({"steps": [step_json(row) for row in report.steps], "meta": meta})

    def saved_funnel_steps(site: str, arguments: Arguments) -> list[FunnelStep]:
        """The steps of the saved funnel `funnel` names (none without one); 400 naming it."""
        name = arguments.get("funnel")
        if name is None:
            return []
        if arguments.get("steps") is not None:
            raise BadParameter("funnel", "give a saved funnel's name or steps, not both")
        try:
            return find_funnel(clients(), site, name).steps
        except InvalidFunnel as error:
            raise BadParameter("funnel", str(error)) from None

    @api.get("/stats/journeys")
    def journeys() -> Response:
        """Where the range's visits go next from a page, or came from into it (DESIGN.md
        "Journeys"); agg reads sessions.journey, raw sessionises the archive."""
        arguments, q = asked()
        question = parameters.journey_question(arguments)
        source = parameters.source(arguments)
        answer = [journey_json(row) for row in queries.journeys(clients(), q, question, source)]
        if not provenance.asked(arguments):
            return jsonify(answer)
        # agg reads `sessions` under visit filters too (answered() would say raw for a filtered report)
        read = answering_source(clients(), q, source)
        return jsonify(
            {"results": answer, "meta": provenance.meta(clients(), settings, q, read, defined.version())}
        )

    @api.get("/stats/retention")
    def retention_report() -> Response:
        """Weekly cohorts of first visit and the share back in each later week (DESIGN.md
        "Retention"); `site_id` (Plausible's spelling) names the site as `site` does."""
        args = request.args.to_dict(flat=False)
        if "site_id" in args and "site" not in args:
            args["site"] = args.pop("site_id")
        arguments = Arguments.parse(args)
        client, site = clients(), parameters.site(arguments)
        timezone = site_timezone(client, site)
        weeks = parameters.retention_weeks(arguments, local_date(clock(), zone(timezone)))
        source = parameters.source(arguments)
        gap_s = defined.settings().session_gap_s
        report = retention(client, site, weeks, timezone, gap_s, source)
        return jsonify({"site": site, **answers.retention_json(report, timezone, source)})

    @api.get("/stats/goals")
    def goals() -> Response:
        arguments, q = asked()
        source = parameters.source(arguments)
        return answered(answers.goals(clients(), q, source), arguments, q, source)

    @api.get("/stats/vitals")
    def web_vitals() -> Response:
        """Web Vitals percentiles and ratings (storage/queries/vitals.py); `site_id` (Plausible's
        spelling) names the site as `site` does."""
        args = request.args.to_dict(flat=False)
        if "site_id" in args and "site" not in args:
            args["site"] = args.pop("site_id")
        arguments, q, _ = asked_with_comparison(args)
        if q.filtered:
            raise BadParameter("filters", "the Web Vitals report takes no filters")
        breakdown = parameters.vitals_property(arguments)
        limit = parameters.limit(arguments, DEFAULT_BREAKDOWN_LIMIT)
        source = parameters.source(arguments)
        rows = vitals.vitals(clients(), q, breakdown, limit, source)
        return answered([answers.vitals_json(row) for row in rows], arguments, q, source)

    @api.get("/stats/realtime")
    def realtime() -> Response:
        arguments = Arguments.parse(request.args.to_dict(flat=False))
        site, now, source = parameters.site(arguments), clock(), parameters.source(arguments)
        # Checked with or without a breakdown: a documented parameter out of range is a 400 even
        # where it changes nothing (schemathesis sent limit=2972860716779586 to the live counts).
        limit = parameters.limit(arguments, DEFAULT_BREAKDOWN_LIMIT)
        provenance.asked(arguments)  # meta=junk is a 400 with a breakdown too, whose answer has no meta
        if (breakdown := parameters.realtime_breakdown(arguments)) is not None:
            return jsonify(
                realtime_json(realtime_breakdown(clients(), site, breakdown, now, limit), breakdown)
            )
        live = queries.realtime(clients(), site, now=now, source=source)
        window = questions.question(site, now - queries.LIVE_WINDOW, now, defined.settings())
        return answered(live, arguments, window, source)

    @api.get("/sessions")
    def sessions() -> Response:
        arguments, q = asked()
        limit = parameters.limit(arguments, DEFAULT_SESSIONS_LIMIT)
        source = parameters.source(arguments)
        rows = queries.sessions(clients(), q, limit, source=source)
        return answered([session_json(row) for row in rows], arguments, q, source)

    @api.get("/alerts")
    def alerts() -> Response:
        """The site's alert rules and its latest alerts with their delivery's status."""
        arguments = Arguments.parse(request.args.to_dict(flat=False))
        try:
            site = normalise(parameters.site(arguments))
        except InvalidDomain:
            raise BadParameter("site", "not a site name") from None
        limit = parameters.limit(arguments, DEFAULT_ALERTS_LIMIT)
        client = clients()
        return jsonify(
            {
                "rules": [rule_json(rule) for rule in alert_rules.list_rules(client, site)],
                "alerts": [alert_json(alert) for alert in alert_rules.recent_alerts(client, site, limit)],
            }
        )

    @api.post("/alerts/backtest")
    def alerts_backtest() -> Response:
        """When a rule would have fired over the history (storage/alert_backtest.py), unsaved."""
        rule, start, end = backtest_request.parse(request.get_json(force=True, silent=True), clock())
        if not g.api_access.may_read(rule.site):
            return error(403, f"site: this API key may not read {rule.site}")
        access = g.api_access  # the site is in the body: the role check declared for it, here
        refusal = key_refusal(
            route_access(request.endpoint), access, rule.site, lambda: users.get_user(clients(), access.email)
        )
        if refusal is not None:
            return error(403, refusal)
        try:
            result = alert_backtest.backtest(clients(), rule, start, end)
        except alert_rules.InvalidRule as refused:
            field, _, problem = str(refused).partition(": ")
            raise BadParameter(field, problem) from None
        return jsonify(backtest_request.backtest_json(result, iso))

    @api.post("/query")
    def sql() -> Response:
        """Read-only SQL over the archive (Explore's), the operator's key only (dashboard/access.py)."""
        sql_text, limit = sql_query.parse(request.get_json(force=True, silent=True))
        return jsonify(sql_query.answer(settings, clients(), sql_text, limit))

    register_imports_api(api, clients)  # POST/GET /imports: imported history (dashboard/http_api/imports.py)
    register_segments_api(api, clients)  # /segments: list, create, change, delete
    register_management(api, settings, clients)  # settings and accounts (dashboard/http_api/manage.py)
    register_sites_api(api, settings, clients)  # Plausible's Sites API (dashboard/http_api/sites_api.py)
    register_annotations_api(
        api, settings, clients, clock
    )  # /annotations (dashboard/http_api/annotations.py)
    register_whatif_api(api, settings, clients, clock, goal_json)  # GET /whatif/goals (whatif_api.py)

    @api.get("/<path:unknown>")
    def not_found(unknown: str) -> Response:
        # Without this, Dash's catch-all page route would answer HTML for a mistyped API path.
        methods = documented_methods(f"{PREFIX}/{unknown}")
        if methods is not None:  # an endpoint without GET (POST /invites): this catch-all took it
            return not_allowed(methods)
        return error(404, f"no such endpoint: {PREFIX}/{unknown}; see {PREFIX}/openapi.json")

    @api.app_errorhandler(MethodNotAllowed)
    def method_not_allowed(refused: MethodNotAllowed) -> Response:
        # Raised while routing, before a blueprint is chosen, hence an app-wide handler: the
        # API's paths answer JSON (a 404 for a path that is no endpoint, whatever the method),
        # every other path Werkzeug's own answer.
        if not request.path.startswith((f"{PREFIX}/", "/api/v2/")):
            return refused.get_response()
        methods = documented_methods(request.path)
        if methods is None:
            return error(404, f"no such endpoint: {request.path}; see {PREFIX}/openapi.json")
        # The document's methods, not Werkzeug's: the catch-all above makes every API path
        # routable with GET, which for PUT /annotations/{id} would name a GET that is a 405 too.
        return not_allowed(methods)

    def documented_methods(path: str) -> list[str] | None:
        """The methods the document gives `path` (its templates, `{site_id}`, included), with
        HEAD beside GET and OPTIONS; None for a path the document does not describe."""
        paths = openapi_document()["paths"]
        item = paths.get(path) or next(
            (item for template, item in paths.items() if re.fullmatch(path_pattern(template), path)), None
        )
        if item is None:
            return None
        methods = {method.upper() for method in item if method in HTTP_METHODS} | {"OPTIONS"}
        return sorted(methods | ({"HEAD"} if "GET" in methods else set()))

    def not_allowed(methods: list[str]) -> Response:
        allowed = ", ".join(methods)
        response = error(405, f"method {request.method} not allowed; allowed: {allowed}")
        response.headers["Allow"] = allowed
        response.headers["Cache-Control"] = "no-store"
        return response

    # Every refusal (a bad parameter, Plausible's v1 wording, an unknown site, a setting the
    # store layer refuses): its kind's status and its message.
    answer_refusals(api)

    @api.errorhandler(StoreUnavailable)
    def store_unavailable(failure: StoreUnavailable) -> Response:
        log_failure(log, "stats_api", failure, path=request.path)
        stopped = limit_message(failure, settings)  # a query past its bounds, not a store down
        response = error(503, stopped or "the analytics store is not answering; try again shortly")
        response.headers["Retry-After"] = "5"
        return response

    @api.errorhandler(HTTPException)
    def http_error(failure: HTTPException) -> Response:
        return error(failure.code or 500, failure.description or failure.name)

    @api.errorhandler(Exception)
    def unexpected(failure: Exception) -> Response:
        log.exception("stats_api_failed", path=request.path)
        return error(500, "internal error; the dashboard's log has the details")

    return api


def path_pattern(template: str) -> str:
    """A regular expression of an OpenAPI path: each `{name}` one path segment."""
    parts = template.split("/")
    return "/".join("[^/]+" if part.startswith("{") else re.escape(part) for part in parts)


def session_json(row: SessionRow) -> dict[str, object]:
    return {
        "visitor_id": row.visitor_id,
        "start": iso(row.start),
        "end": iso(row.end),
        "duration_s": float(row.duration_s),
        "pageviews": int(row.pageviews),
        "entry_path": row.entry_path,
        "exit_path": row.exit_path,
        "is_bounce": bool(row.is_bounce),
        "engaged_s": float(row.engaged_s),
        "referrer_domain": row.referrer_domain,
        "utm_source": row.utm_source,
        "country": row.country,
        "device": row.device,
        "browser": row.browser,
        "os": row.os,
    }


def rule_json(rule: alert_rules.AlertRule) -> dict[str, object]:
    """A rule as the API shows it: its webhook's host only (a URL may carry a secret)."""
    return {
        "rule_id": rule.rule_id,
        "kind": rule.kind,
        "description": rule.describe(),
        "window_minutes": rule.window_minutes,
        "threshold": rule.threshold,
        "factor": rule.factor,
        "goal": rule.goal,
        "event_name": rule.event_name,
        "page_pattern": rule.page_pattern,
        "webhook_host": urlsplit(rule.webhook_url).hostname or "",
        "created_at": iso(rule.created_at),
    }


def alert_json(alert: alert_rules.FiredAlert) -> dict[str, object]:
    return {
        "alert_id": alert.alert_id,
        "rule_id": alert.rule_id,
        "kind": alert.kind,
        "window_start": iso(alert.window_start),
        "observed": alert.observed,
        "threshold": alert.threshold,
        "fired_at": iso(alert.fired_at),
        "summary": alert.summary,
        "status": alert.status,
        "attempts": alert.attempts,
        "last_error": alert.last_error,
    }


def journey_json(row: JourneyRow) -> dict[str, object]:
    return {"steps": list(row.steps), "visits": row.visits, "visitors": row.visitors}


def step_json(row: StepResult) -> dict[str, object]:
    return {
        "step": {row.step.kind: row.step.value},
        "visitors": row.visitors,
        "sessions": row.sessions,
        "dropoff": row.dropoff,
        "dropoff_rate": row.dropoff_rate,
        "conversion_rate": row.conversion_rate,
    }


def realtime_json(report: RealtimeReport, breakdown: str) -> dict[str, object]:
    """The last 30 minutes: totals and one breakdown, read from the archive whatever the source."""
    return {
        "since": report.since.isoformat(),
        "visitors": report.visitors,
        "pageviews": report.pageviews,
        "breakdown": breakdown,
        "results": [
            {"value": r.value, "visitors": r.visitors, "pageviews": r.pageviews} for r in report.rows
        ],
        "meta": {"source": "raw"},
    }
