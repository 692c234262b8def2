"""The dashboard server: the Dash app and the stats API on one Flask server (:8050).

Built from a Settings object; nothing connects to the store until the first request.
Run with `python -m dashboard.app` (waitress).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import structlog
from dash import Dash
from flask import Flask, Response, request
from waitress import serve

from dashboard.access import CALLBACK_PATH, install_shape_check
from dashboard.accounts import install_accounts, register_team_panel, team_sign_in
from dashboard.alerts_panel import register_alerts_panel
from dashboard.annotations_panel import register_annotations_panel
from dashboard.auth import install_login
from dashboard.bookmark import register_bookmark, requested_site
from dashboard.chunk_preload import install_chunk_preload
from dashboard.client_address import install_client_address
from dashboard.custom_props_panel import register_custom_props_panel
from dashboard.exclusions_panel import register_exclusions_panel
from dashboard.explore import register_explore
from dashboard.funnel import register_funnel, register_funnel_saving
from dashboard.goals_panel import register_goal_editing
from dashboard.http_api.export import ExportSlots, register_export_download
from dashboard.http_api.plausible.api import plausible_api
from dashboard.http_api.stats import stats_api
from dashboard.identity_panel import register_identity_panel
from dashboard.imports_panel import register_imports_panel
from dashboard.journeys import register_journeys
from dashboard.layout import build_layout
from dashboard.overview import first_sites, register_overview
from dashboard.performance_view import register_performance
from dashboard.provenance import register_provenance
from dashboard.realtime_view import register_realtime
from dashboard.request_bodies import install_body_limits
from dashboard.retention_view import register_retention
from dashboard.segments import register_segment_editing, register_segment_picker
from dashboard.settings_view import register_settings_view
from dashboard.share_panel import register_share_panel
from dashboard.sharing import install_sharing, layout_for_viewer
from dashboard.site_settings_panel import register_site_settings
from dashboard.store import ClientFactory, thread_local_clients
from dashboard.timezone_panel import register_timezone_panel, with_zone_names
from dashboard.view_tabs import register_view_tabs
from dashboard.whatif_panel import register_whatif_panel
from tally import structured_logging
from tally.clock import utc_now
from tally.settings import Settings

log = structlog.get_logger()

SERVER_THREADS = 8


def build_app(
    settings: Settings, clients: ClientFactory | None = None, clock: Callable[[], datetime] = utc_now
) -> Dash:
    clients = clients or thread_local_clients(settings)
    server = Flask(__name__)
    install_login(server, settings, clients, team_sign_in(clients, settings.owner_email))
    export_slots = ExportSlots()  # the API's exports and the download link's, together
    server.register_blueprint(stats_api(settings, clients, clock, export_slots))
    server.register_blueprint(plausible_api(settings, clients, clock))  # Plausible's v2 query
    register_export_download(server, settings, clients, clock, export_slots)  # the Overview's download link
    harden(server)

    @server.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    app = Dash(__name__, server=server, title="Tally", update_title=None, serve_locally=True)
    app.index_string = with_zone_names(app.index_string)
    install_chunk_preload(app)  # the header's pickers and the charts load with the page
    topojson_url = app.get_asset_url("topojson/")
    # The site the page's address names (`?site=`), if this viewer may read it (dashboard/bookmark.py).
    app.layout = layout_for_viewer(
        lambda: build_layout(topojson_url, *first_sites(clients, requested_site()))
    )
    register_overview(app, settings, clients, clock)
    register_bookmark(app)
    register_view_tabs(app)
    register_imports_panel(app, clients)
    register_segment_picker(app, clients)
    register_realtime(app, clients, clock)
    register_performance(app, settings, clients)
    register_provenance(app, settings, clients)
    register_explore(app, settings, clients)
    register_funnel(app, settings, clients)
    register_journeys(app, settings, clients)
    register_retention(app, settings, clients)
    register_share_panel(app, clients)
    register_alerts_panel(app, settings, clients)
    register_site_settings(app, clients)
    register_settings_view(app)
    register_goal_editing(app, clients)
    register_funnel_saving(app, clients)
    register_exclusions_panel(app, clients)
    register_custom_props_panel(app, clients)
    register_annotations_panel(app, settings, clients)
    register_segment_editing(app, clients)
    register_timezone_panel(app, clients)
    register_identity_panel(app, clients)
    register_whatif_panel(app, settings, clients)
    register_team_panel(app, settings, clients)
    # Who may run each callback (site, role, shared link or not) is declared in dashboard/access.py,
    # which the member guard (accounts.py) and the shared-link guard (sharing.py) read; the shape
    # of a callback request is checked for everyone signed in, the operator too.
    install_sharing(app, settings, clients)
    install_accounts(app, settings, clients)
    install_shape_check(app)
    # Around everything above, before any guard reads a request: its size, then its client.
    install_body_limits(server, settings, app.callback_map)
    install_client_address(server, settings)
    return app


def harden(server: Flask) -> None:
    @server.after_request
    def security_headers(response: Response) -> Response:
        # Not framable (clickjacking on the login form), no MIME sniffing, no referrer leaking
        # dashboard URLs to other sites.
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response

    @server.after_request
    def log_refused_callbacks(response: Response) -> Response:
        # A refused or failed callback shows nothing on the page (Dash drops the answer): the
        # log says which one, with its status, so "the button did nothing" can be traced.
        if request.path == CALLBACK_PATH and response.status_code >= 400:
            try:
                body = request.get_json(silent=True)  # parsed once already: cached
            except RecursionError:  # nested past the parser's limit: the shape check's 400
                body = None
            output = body.get("output") if isinstance(body, dict) else None
            log.warning(
                "dashboard_callback_refused",
                status=response.status_code,
                output=output[:200] if isinstance(output, str) else "",
            )
        return response


def main() -> None:
    structured_logging.configure()
    settings = Settings()
    app = build_app(settings)
    log.info(
        "dashboard_listening",
        url=f"http://{settings.dashboard_host}:{settings.dashboard_port}/",
        password_from=(
            "TALLY_DASHBOARD_PASSWORD"
            if settings.dashboard_password
            else str(settings.home_dir / "dashboard_password")
        ),
    )
    serve(
        app.server,
        host=settings.dashboard_host,
        port=settings.dashboard_port,
        threads=SERVER_THREADS,
        # waitress reads whole requests before a thread sees them, so a slow client holds
        # only its connection, and this closes one that stays silent.
        channel_timeout=settings.dashboard_channel_timeout_s,
        # Nothing larger than the largest body a route takes (dashboard/request_bodies.py); the
        # default is 1 GiB.
        max_request_body_size=settings.dashboard_max_body_bytes,
        # X-Forwarded-For reaches the app as sent: dashboard/client_address.py applies
        # TALLY_TRUSTED_PROXIES (networks, hop by hop), which waitress's one trusted address and
        # fixed hop count cannot express. Without this, waitress drops the header and every
        # client behind the proxy is the proxy.
        clear_untrusted_proxy_headers=False,
        _quiet=True,
    )


if __name__ == "__main__":
    main()
