"""The collector: validate, enrich, append to the log; 202 only once Kafka has the event.

Built from explicit parts (`build_app(settings, event_log, salts)`); nothing connects at
import time. Run with `python -m collector.app`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import structlog
import uvicorn
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from collector.client_ip import client_ip, parse_networks
from collector.enrichment import Draft, RequestContext, enrich
from collector.event_log import EventLog, KafkaEventLog, LogUnavailable
from collector.payload import BrowserEvent
from collector.salts import DailySalts
from storage.client import connect
from tally.event import utc_now
from tally.settings import Settings

log = structlog.get_logger()

MAX_BODY_BYTES = 64 * 1024
TRACKER_JS = Path(__file__).with_name("tracker.js")


class RejectedEvent(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def describe_validation_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    location = ".".join(str(part) for part in first["loc"]) or "body"
    return f"{location}: {first['msg']}"


async def read_json(request: Request) -> object:
    """The body as JSON, whatever the content type (beacons send text/plain)."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise RejectedEvent(413, f"body over {MAX_BODY_BYTES} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise RejectedEvent(413, f"body over {MAX_BODY_BYTES} bytes")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise RejectedEvent(400, "body: not valid UTF-8 JSON") from None


def parse(model: type[BaseModel], value: object) -> BaseModel:
    if not isinstance(value, dict):
        raise RejectedEvent(400, "body: must be a JSON object")
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise RejectedEvent(400, describe_validation_error(exc)) from None


class Collector:
    def __init__(self, settings: Settings, event_log: EventLog, salts: DailySalts) -> None:
        self.settings = settings
        self.event_log = event_log
        self.salts = salts
        self.trusted_proxies = parse_networks(settings.trusted_proxies)

    def context(self, request: Request) -> RequestContext:
        peer = request.client.host if request.client else "0.0.0.0"
        received_at = utc_now()
        return RequestContext(
            client_ip=client_ip(peer, request.headers.get("x-forwarded-for"), self.trusted_proxies),
            user_agent=request.headers.get("user-agent", "")[:1000],
            accept_language=request.headers.get("accept-language", ""),
            received_at=received_at,
            salt=self.salts.for_time(received_at),
        )

    async def post_event(self, request: Request) -> Response:
        try:
            payload = parse(BrowserEvent, await read_json(request))
        except RejectedEvent as rejected:
            return error(rejected.status, rejected.message)
        context = self.context(request)
        draft = Draft(
            site=payload.site,
            name=payload.name,
            url=payload.url,
            referrer=payload.referrer,
            props=payload.props,
            screen_width=payload.screen_width,
            ts=context.received_at,
        )
        event = enrich(draft, context)
        try:
            await self.event_log.append([event])
        except LogUnavailable as unavailable:
            log.warning("log_unavailable", error=str(unavailable))
            return error(503, "the event log is unavailable, retry later", {"Retry-After": "5"})
        return Response(status_code=202)

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def tracker(self, request: Request) -> Response:
        return Response(TRACKER_JS.read_bytes(), media_type="application/javascript")


def build_app(settings: Settings, event_log: EventLog, salts: DailySalts) -> Starlette:
    collector = Collector(settings, event_log, salts)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await asyncio.to_thread(salts.refresh)
        await event_log.start()
        refresher = asyncio.create_task(salts.refresh_forever())
        try:
            yield
        finally:
            refresher.cancel()
            await event_log.stop()

    return Starlette(
        routes=[
            Route("/api/event", collector.post_event, methods=["POST"]),
            Route("/healthz", collector.healthz, methods=["GET"]),
            Route("/tracker.js", collector.tracker, methods=["GET"]),
        ],
        lifespan=lifespan,
    )


def main() -> None:
    settings = Settings()
    app = build_app(settings, KafkaEventLog(settings), DailySalts(connect(settings)))
    uvicorn.run(
        app,
        host=settings.collector_host,
        port=settings.collector_port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=10,
    )


if __name__ == "__main__":
    main()
