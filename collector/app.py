"""The collector: validate, enrich, append to the log; 202 only once Kafka has the event.

Built from explicit parts (`build_app(settings, parts)`); nothing connects at import time.
Run with `python -m collector.app`. The hot path never queries the store: sites, salts
and the blocklist are in memory, refreshed in the background (an event for a site not known
yet waits for a shared, rate-limited re-read of the registry: collector/known_sites.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import hmac
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import orjson
import structlog
import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from collector.blocklist import Blocklist
from collector.enrichment import Draft, Dropped, DropReason, RequestContext, build_pipeline, enrich
from collector.event_log import EventLog, KafkaEventLog, LogRecord, LogUnavailable
from collector.exclusions import SiteExclusions
from collector.geo import CountryLookup
from collector.http_protocol import bounded_httptools
from collector.known_sites import KnownSites
from collector.metrics import CollectorMetrics
from collector.payload import BrowserEvent, ServerEvent
from collector.salts import Salts
from collector.user_agent import classify, is_bot
from storage.client import connect
from tally import structured_logging
from tally.client_ip import client_ip, parse_networks
from tally.clock import utc_now
from tally.event import describe_validation_error, encode_fields, event_key
from tally.settings import Settings

log = structlog.get_logger()

MAX_EVENT_BYTES = 64 * 1024
MAX_BATCH_BYTES = 1024 * 1024
MAX_BATCH_EVENTS = 1000
# A beacon's headers are a few hundred bytes; cookies for the stats domain add little.
MAX_HEADER_BYTES = 16 * 1024
# How long an idle connection is kept open. Longer than the TLS proxy keeps idle connections
# to the collector (deploy/Caddyfile): a server that closes first races the proxy's next
# request on that connection, and a POST lost that way is not retried.
KEEP_ALIVE_S = 20
# Batch senders may backfill, but not from the future (clock skew allowance).
MAX_FUTURE_SKEW = timedelta(minutes=5)
TRACKER_JS = Path(__file__).with_name("tracker.js")
# Beacons come from every site's pages: the beacon endpoint alone allows any origin.
BEACON_CORS = {"Access-Control-Allow-Origin": "*"}
# A beacon's 202, the same bytes for every request: made once, never changed after (a
# response object and its headers per request cost ~3 us of the hot path).
ACCEPTED = Response(status_code=202, headers=BEACON_CORS)
PREFLIGHT_CORS = {
    **BEACON_CORS,
    "Access-Control-Allow-Methods": "POST, OPTIONS",
    "Access-Control-Allow-Headers": "Content-Type",
    "Access-Control-Max-Age": "86400",
}


class ClientGone(Exception):
    """The client hung up (or was cut off for being too slow) before its body was in."""


class RejectedEvent(Exception):
    def __init__(self, status: int, message: str, reason: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason
        self.headers = headers


@dataclass
class CollectorParts:
    """The stateful pieces the collector is built from (tests pass their own)."""

    event_log: EventLog
    salts: Salts
    sites: KnownSites
    blocklist: Blocklist
    countries: CountryLookup
    # The sites' exclusions (none if not given: tests that build parts by hand need none).
    exclusions: SiteExclusions | None = None


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def read_json(request: Request, limit: int) -> object:
    """The body as JSON, whatever the content type (beacons send text/plain).

    How long the body may take is the protocol's to enforce (collector/http_protocol.py: a
    client that dribbles or stalls gets its 408 there and the connection closed); reading it
    here then ends with the client gone."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise RejectedEvent(413, f"body: over {limit} bytes", "too_large")
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise RejectedEvent(413, f"body: over {limit} bytes", "too_large")
    except ClientDisconnect:
        raise ClientGone from None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise RejectedEvent(400, "body: not valid UTF-8 JSON", "invalid") from None


def parse(model: type[BaseModel], value: object) -> BaseModel:
    if not isinstance(value, dict):
        raise RejectedEvent(400, "body: must be a JSON object", "invalid")
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise RejectedEvent(400, describe_validation_error(exc), "invalid") from None


SERVER_EVENTS = TypeAdapter(list[ServerEvent])


def parse_batch(body: list[object]) -> list[ServerEvent]:
    """Every event of a batch, validated in one call (pydantic's core loops over the array);
    the first error names its event and field: `[3].url: ...`."""
    try:
        return SERVER_EVENTS.validate_python(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        index, *field = first["loc"]
        if not field and first["type"] in ("model_type", "dict_type"):
            message = "must be a JSON object"
        else:
            message = first["msg"]
        location = f"[{index}]" + "".join(f".{part}" for part in field)
        raise RejectedEvent(400, f"{location}: {message}", "invalid") from None


class Collector:
    def __init__(self, settings: Settings, parts: CollectorParts) -> None:
        self.settings = settings
        self.parts = parts
        self.metrics = CollectorMetrics()
        self.accepted = self.metrics.accepted
        self.latency = {endpoint: self.metrics.latency.labels(endpoint) for endpoint in ("event", "events")}
        self.trusted_proxies = parse_networks(settings.trusted_proxies)
        self.pipeline = build_pipeline(
            is_known_site=parts.sites.__contains__,
            is_blocked=parts.blocklist.is_blocked,
            countries=parts.countries,
            excluded_by=parts.exclusions.rule_matching if parts.exclusions else lambda *_: None,
        )
        self.ingest_key = settings.resolved_ingest_key().encode()
        self.tracker_js = TRACKER_JS.read_bytes()
        self.tracker_etag = '"' + hashlib.sha256(self.tracker_js).hexdigest()[:20] + '"'

    def context(self, request: Request, site: str) -> RequestContext:
        """Who sent the event: the request's client (behind trusted proxies), at this moment,
        and the salts its hashes take for `site` (as the sender spelt it)."""
        peer = request.client.host if request.client else "0.0.0.0"
        received_at = utc_now()
        headers = request.headers
        return RequestContext(
            client_ip=client_ip(peer, headers.getlist("x-forwarded-for"), self.trusted_proxies),
            user_agent=headers.get("user-agent", "")[:1000],
            accept_language=headers.get("accept-language", ""),
            received_at=received_at,
            salt=self.parts.salts.for_time(received_at),
            visitor_salt=self.parts.salts.for_visitor(site_name(site), received_at),
        )

    def draft(self, payload: BrowserEvent, ts: datetime) -> Draft:
        return Draft(
            site=site_name(payload.site),
            name=payload.name,
            url=payload.url,
            referrer=payload.referrer,
            props=payload.props,
            screen_width=payload.screen_width,
            ts=ts,
            hash_mode=payload.hash_mode,
            event_id=payload.event_id,
            revenue_amount=payload.revenue.amount_text if payload.revenue else "",
            revenue_currency=payload.revenue.currency if payload.revenue else "",
            scroll_depth=payload.scroll_depth,
            engagement_ms=payload.engagement_ms,
            vitals=payload.vitals(),
        )

    async def append(self, records: list[LogRecord]) -> Response | None:
        """Append to the log; a 503 response if it cannot take the write, else None."""
        try:
            await self.parts.event_log.append(records)
        except LogUnavailable as unavailable:
            self.metrics.kafka_errors.inc()
            self.metrics.rejected.labels("log_unavailable").inc(len(records))
            log.warning("log_unavailable", error=str(unavailable)[:200])
            return error(503, "the event log is unavailable, retry later", {"Retry-After": "5"})
        self.accepted.inc(len(records))
        return None

    # -- POST /api/event: one browser event ----------------------------------------------

    async def post_event(self, request: Request) -> Response:
        response = await self._handle("event", self._one_event, request)
        if response is not ACCEPTED:
            response.headers.update(BEACON_CORS)
        return response

    async def _handle(
        self, endpoint: str, handler: Callable[[Request], Awaitable[Response]], request: Request
    ) -> Response:
        """Run an ingest endpoint: a rejection becomes its error response, every request is timed."""
        started = time.perf_counter()
        try:
            response = await handler(request)
        except RejectedEvent as rejected:
            self.metrics.rejected.labels(rejected.reason).inc()
            response = error(rejected.status, rejected.message, rejected.headers)
        except ClientGone:
            return Response(status_code=400)  # nobody to read it (uvicorn drops it)
        self.latency[endpoint].observe(time.perf_counter() - started)
        return response

    async def _one_event(self, request: Request) -> Response:
        body = await read_json(request, MAX_EVENT_BYTES)
        payload = parse(BrowserEvent, body)
        await self.parts.sites.confirm(payload.site)
        context = self.context(request, payload.site)
        try:
            event = enrich(self.draft(payload, context.received_at), context, self.pipeline)
        except Dropped as dropped:
            return self._dropped_response(dropped, payload.site)
        return await self.append([log_record(event)]) or ACCEPTED

    def _dropped_response(self, dropped: Dropped, site: str) -> Response:
        reason = dropped.reason
        self._count_drop(dropped)
        if reason is DropReason.BOT:
            # Bots are told nothing: an error would invite them to adapt.
            return ACCEPTED
        if reason is DropReason.EXCLUDED:
            # Done as the site's owner asked: the sender (a staff member's browser, a
            # monitoring probe) did nothing wrong, and an error would fill its console, or
            # make a sender retry, for traffic that is meant to go uncounted.
            return ACCEPTED
        if reason is DropReason.UNKNOWN_SITE:
            return error(400, f"site: {site!r} is not registered (tally sites add {site})")
        return error(429, "too many requests from this client", {"Retry-After": "60"})

    async def preflight(self, request: Request) -> Response:
        return Response(status_code=204, headers=PREFLIGHT_CORS)

    # -- POST /api/events: a batch from a server-side sender -----------------------------

    async def post_events(self, request: Request) -> Response:
        return await self._handle("events", self._batch, request)

    def _authorise(self, request: Request) -> None:
        scheme, _, key = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(key.strip().encode(), self.ingest_key):
            raise RejectedEvent(401, "authorization: a valid Bearer ingest key is required", "unauthorized")

    async def _batch(self, request: Request) -> Response:
        self._authorise(request)
        body = await read_json(request, MAX_BATCH_BYTES)
        if not isinstance(body, list):
            raise RejectedEvent(400, "body: must be a JSON array of events", "invalid")
        if not 1 <= len(body) <= MAX_BATCH_EVENTS:
            raise RejectedEvent(400, f"body: 1 to {MAX_BATCH_EVENTS} events per batch", "invalid")
        # Validate everything first: a batch is taken whole or refused whole.
        payloads = parse_batch(body)
        await asyncio.gather(*(self.parts.sites.confirm(site) for site in {p.site for p in payloads}))
        events, dropped = self._enrich_batch(request, payloads)
        if events and (unavailable := await self.append(events)):
            return unavailable
        return JSONResponse({"accepted": len(events), "dropped": dict(dropped)}, status_code=202)

    def _enrich_batch(self, request: Request, payloads: list[ServerEvent]) -> tuple[list[LogRecord], Counter]:
        events: list[LogRecord] = []
        dropped: Counter[str] = Counter()
        # Each event's client is whom the authenticated sender says it is; the rest is the request's.
        peer = request.client.host if request.client else "0.0.0.0"
        received_at = utc_now()
        salt = self.parts.salts.for_time(received_at)
        language = request.headers.get("accept-language", "")
        latest = received_at + MAX_FUTURE_SKEW
        for index, payload in enumerate(payloads):
            context = RequestContext(
                client_ip=payload.ip or peer,
                user_agent=payload.user_agent,
                accept_language=language,
                received_at=received_at,
                salt=salt,
                server_side=True,
                visitor_salt=self.parts.salts.for_visitor(site_name(payload.site), received_at),
            )
            ts = payload.ts or received_at
            if ts > latest:
                raise RejectedEvent(400, f"[{index}].ts: in the future", "invalid")
            try:
                events.append(log_record(enrich(self.draft(payload, ts), context, self.pipeline)))
            except Dropped as drop:
                if drop.reason is DropReason.UNKNOWN_SITE:
                    message = f"[{index}].site: {payload.site!r} is not registered"
                    raise RejectedEvent(400, message, drop.reason) from None
                self._count_drop(drop)
                dropped[drop.reason.value] += 1
        return events, dropped

    def count_refused(self, reason: str) -> None:
        """A connection the server cut off before the app saw a request (collector/http_protocol.py)."""
        self.metrics.rejected.labels(reason).inc()

    def _count_drop(self, dropped: Dropped) -> None:
        reason = dropped.reason
        if reason is DropReason.BOT:
            self.metrics.bots.inc()
        elif reason is DropReason.EXCLUDED:
            self.metrics.excluded.labels(dropped.rule).inc()
        else:
            self.metrics.rejected.labels(reason.value).inc()

    # -- the rest ------------------------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        connected = getattr(self.parts.event_log, "connected", True)
        return JSONResponse({"status": "ok", "kafka": "connected" if connected else "reconnecting"})

    async def metrics_text(self, request: Request) -> Response:
        self.metrics.blocked_clients.set(self.parts.blocklist.size)
        self.metrics.site_rereads.set(self.parts.sites.rereads)
        return Response(generate_latest(self.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def tracker(self, request: Request) -> Response:
        headers = {
            "ETag": self.tracker_etag,
            # A day fresh, then revalidated cheaply with the ETag (site owners never re-embed).
            "Cache-Control": "public, max-age=86400, stale-while-revalidate=604800",
            **BEACON_CORS,
        }
        if request.headers.get("if-none-match") == self.tracker_etag:
            return Response(status_code=304, headers=headers)
        return Response(self.tracker_js, media_type="application/javascript", headers=headers)


def site_name(site: str) -> str:
    """The site as the registry spells it (events may say www. or capitals)."""
    return site.lower().removeprefix("www.")


def log_record(event: dict[str, object]) -> LogRecord:
    return event_key(str(event["site"]), str(event["visitor_id"])), encode_fields(event)


def _background(*refreshers: Callable[[], Awaitable[None]]) -> list[asyncio.Task[None]]:
    return [asyncio.create_task(refresh()) for refresh in refreshers]


def build_app(settings: Settings, parts: CollectorParts) -> Starlette:
    collector = Collector(settings, parts)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await asyncio.to_thread(parts.salts.refresh)
        await asyncio.to_thread(parts.sites.refresh)
        refreshers = [
            parts.salts.refresh_forever,
            parts.salts.refresh_rotations_forever,
            parts.sites.refresh_forever,
        ]
        if parts.exclusions is not None:
            await asyncio.to_thread(parts.exclusions.refresh)
            refreshers.append(parts.exclusions.refresh_forever)
        await parts.event_log.start()
        await parts.blocklist.start()
        tasks = _background(*refreshers)
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await parts.blocklist.stop()
            await parts.event_log.stop()  # flushes in-flight sends

    app = Starlette(
        routes=[
            Route("/api/event", collector.post_event, methods=["POST"]),
            Route("/api/event", collector.preflight, methods=["OPTIONS"]),
            Route("/api/events", collector.post_events, methods=["POST"]),
            Route("/healthz", collector.healthz, methods=["GET"]),
            Route("/metrics", collector.metrics_text, methods=["GET"]),
            Route("/tracker.js", collector.tracker, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.state.collector = collector
    return app


def production_parts(settings: Settings) -> CollectorParts:
    return CollectorParts(
        event_log=KafkaEventLog(settings, send_timeout_s=settings.collector_send_timeout_s),
        salts=Salts(connect(settings)),
        sites=KnownSites(connect(settings)),
        blocklist=Blocklist(settings),
        countries=CountryLookup(),
        exclusions=SiteExclusions(connect(settings)),
    )


def load_lookups(parts: CollectorParts) -> None:
    """Load the country database and compile the user-agent rules before the first request,
    then move everything loaded so far out of the garbage collector's sight: a full
    collection would otherwise walk those millions of objects again and again while
    requests allocate (`gc.freeze`, as long-running servers do)."""
    parts.countries.load()
    classify("Mozilla/5.0")
    is_bot("Mozilla/5.0")
    gc.collect()
    gc.freeze()


def main() -> None:
    structured_logging.configure()
    settings = Settings()
    parts = production_parts(settings)
    load_lookups(parts)
    app = build_app(settings, parts)
    uvicorn.run(
        app,
        host=settings.collector_host,
        port=settings.collector_port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=10,
        # The client's address is tally/client_ip.py's to decide (TALLY_TRUSTED_PROXIES,
        # every X-Forwarded-For line): uvicorn's own rewrite would trust 127.0.0.1 and read
        # only the last header line, a second policy the settings do not describe.
        proxy_headers=False,
        # Bounds on slow or abusive clients (headers' size, headers' and body's time).
        http=bounded_httptools(
            settings.collector_header_timeout_s,
            MAX_HEADER_BYTES,
            settings.collector_body_timeout_s,
            on_refused=app.state.collector.count_refused,
        ),
        limit_concurrency=4096,
        timeout_keep_alive=KEEP_ALIVE_S,
    )


if __name__ == "__main__":
    main()
