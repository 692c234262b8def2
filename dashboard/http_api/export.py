"""The events behind a number: `GET /api/v1/export/events` (an API key) and `/export/events`
(the Overview's download link, a signed-in session) stream exactly the archived events a
figure of `/api/v1/stats/aggregate` (or a goal's, or the custom events') counts, as Parquet or
CSV, with their Kafka partition and offset and the definitions version
(storage/export.py: figure_events, stream_figure).

The question is asked with the aggregate's parameters, parsed by the same code
(dashboard/http_api/parameters.py); the answer's headers say what the rows add up to
(`X-Tally-Figure: pageviews=1234`), before the first byte of the file."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime

from flask import Blueprint, Flask, Response, request, stream_with_context

from dashboard import browser_session
from dashboard.accounts import current_user
from dashboard.http_api import parameters
from dashboard.http_api.parameters import Arguments
from dashboard.refusals import error, refused_answer
from dashboard.store import ClientFactory
from storage import queries
from storage.client import connect
from storage.definitions import CurrentDefinitions
from storage.export import FIGURES, figure_events, stream_figure
from storage.sites import site_timezone
from tally.refusal import Refused
from tally.settings import Settings

EXPORT_PATH = "/export/events"
CONTENT_TYPES = {"parquet": "application/vnd.apache.parquet", "csv": "text/csv; charset=utf-8"}
#: Exports streaming at once per dashboard process. Each holds one of the server's threads
#: (dashboard/app.py SERVER_THREADS, 8) for as long as its client reads: 10M events take a
#: minute, a slow reader longer. Without a bound a few viewers' downloads would take every
#: thread and the dashboard would stop answering. Past it: 429, try again.
MAX_CONCURRENT_EXPORTS = 2


class ExportSlots:
    """The exports that may stream at once; a slot is given back when its response is closed
    (streamed whole, or the client gone), whether or not the body was ever read."""

    def __init__(self, size: int = MAX_CONCURRENT_EXPORTS) -> None:
        self._free = threading.BoundedSemaphore(size)
        self.size = size

    def take(self) -> Callable[[], None] | None:
        """A slot's give-back (call it once), or None when every slot is taken."""
        if not self._free.acquire(blocking=False):
            return None
        given_back = threading.Event()

        def give_back() -> None:
            if not given_back.is_set():
                given_back.set()
                self._free.release()

        return give_back


def register_export_api(
    api: Blueprint,
    settings: Settings,
    clients: ClientFactory,
    clock: Callable[[], datetime],
    slots: ExportSlots,
) -> None:
    """`GET /api/v1/export/events` on the stats API (a viewer's key, declared in access.py)."""
    defined = CurrentDefinitions(settings, clients)

    @api.get(EXPORT_PATH)
    def export_events() -> Response:
        return exported(settings, clients, defined, clock, slots)


def register_export_download(
    server: Flask,
    settings: Settings,
    clients: ClientFactory,
    clock: Callable[[], datetime],
    slots: ExportSlots,
) -> None:
    """`/export/events` for the dashboard's own link: the operator, or a member who may read the
    site (a shared link's session never gets here: the sign-in guard sends it to /login)."""
    defined = CurrentDefinitions(settings, clients)

    @server.get(EXPORT_PATH)
    def export_download() -> Response:
        live = browser_session.current(clients)
        user = current_user()
        site = request.args.get("site", "")
        operator = live is not None and live.kind == "operator"
        if not operator and (user is None or not user.may(site, "viewer")):
            return error(403, f"site: you may not read {site}")
        try:
            return exported(settings, clients, defined, clock, slots)
        except Refused as refused:
            return refused_answer(refused)


def exported(
    settings: Settings,
    clients: ClientFactory,
    defined: CurrentDefinitions,
    clock: Callable[[], datetime],
    slots: ExportSlots,
) -> Response:
    """The request's figure's events, streamed, its value in the headers; 429 while
    `slots.size` exports are streaming."""
    give_back = slots.take()
    if give_back is None:
        busy = error(429, f"export: {slots.size} exports are streaming already; try again when one ends")
        busy.headers["Retry-After"] = "10"
        return busy
    try:
        response = figure_response(settings, clients, defined, clock)
    except BaseException:
        give_back()
        raise
    response.call_on_close(give_back)
    return response


def figure_response(
    settings: Settings, clients: ClientFactory, defined: CurrentDefinitions, clock: Callable[[], datetime]
) -> Response:
    arguments, choice = parameters.export_arguments(request.args.to_dict(flat=False))
    client = clients()
    q = question(client, arguments, clock(), defined)
    q = parameters.breakdown_row(q, choice.breakdown)
    version = defined.version()
    number = 0 if version is None else version.number
    found = figure_events(client, q, choice.metric, parameters.export_goal(arguments), number)
    # The stream has a client of its own: the thread's is free for anything else meanwhile.
    body = stream_figure(connect(settings), found, choice.output_format)
    name = f"{q.site}-{choice.metric}-{q.start:%Y%m%dT%H%M}-{q.end:%Y%m%dT%H%M}.{choice.output_format}"
    response = Response(stream_with_context(body), content_type=CONTENT_TYPES[choice.output_format])
    response.headers["Content-Disposition"] = f'attachment; filename="{name}"'
    response.headers["X-Tally-Figure"] = f"{choice.metric}={found.figure}"
    response.headers["X-Tally-Figure-Rule"] = FIGURES[choice.metric]
    response.headers["X-Tally-Rows"] = str(found.rows)
    response.headers["X-Tally-Visitors"] = str(found.visitors)
    response.headers["X-Tally-Definitions-Version"] = str(number)
    response.headers["X-Tally-Source"] = "raw"
    return response


def question(
    client: object, arguments: Arguments, now: datetime, defined: CurrentDefinitions
) -> queries.StatsQuery:
    """The aggregate's question (stats.py: asked_with_comparison), in the site's time zone."""
    site = parameters.site(arguments)
    first_day = queries.first_day(client, site) if arguments.get("period") == "all" else None  # type: ignore[arg-type]
    return parameters.window_queries(
        arguments,
        now,
        defined.settings(),
        site_timezone(client, site),
        first_day,  # type: ignore[arg-type]
    )[0]
