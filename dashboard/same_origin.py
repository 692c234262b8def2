"""The dashboard takes form posts and callbacks only from its own pages (login CSRF and the like).

A page on another site can make a browser POST to /login (signing the victim in to the
attacker's account, whose Explore and settings the victim then fills), to /logout, to an
invitation or a shared link's password form. Browsers say where a request comes from:
`Sec-Fetch-Site` (recent browsers; when sent, it decides), else `Origin` (every POST; `null` from
sandboxed frames and no-referrer pages counts as another origin), else `Referer`. Another origin
is refused (403); a request with none of them is not sent by a browser's page and goes on to the
usual checks (as Go's net/http CrossOriginProtection does). The bearer-authenticated APIs
(/api/v1, /api/v2) take no cookies, so whoever sends them is beside the point there.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Flask, Response, jsonify, render_template_string, request

from dashboard.message_page import MESSAGE_PAGE

# What a browser's own page (or the user typing the address) sends; `same-site` is a sibling
# subdomain, which is another origin too.
OWN_FETCH_SITES = frozenset({"same-origin", "none"})
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
BEARER_PREFIXES = ("/api/v1/", "/api/v2/")


def cross_site_refusal() -> str | None:
    """Why this request looks sent by another site's page, or None if it may go on."""
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None:
        # The browser's own word, and the only one a no-referrer page (the invitation and link
        # pages) leaves intact: their posts carry `Origin: null`.
        return None if fetch_site in OWN_FETCH_SITES else f"sent from another site ({fetch_site[:40]})"
    origin = request.headers.get("Origin")
    if origin is None:
        referer = request.headers.get("Referer")
        origin = _origin_of(referer) if referer else None
    if origin is not None and urlsplit(origin).netloc.lower() != request.host.lower():
        return "sent from another site (Origin)"
    return None


def _origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else "null"


def install_same_origin_check(server: Flask) -> None:
    @server.before_request
    def refuse_cross_site() -> Response | tuple[str, int] | None:
        if request.method not in UNSAFE_METHODS or request.path.startswith(BEARER_PREFIXES):
            return None
        refusal = cross_site_refusal()
        if refusal is None:
            return None
        if request.path.startswith("/_dash-"):
            response = jsonify({"error": refusal})
            response.status_code = 403
            return response
        return render_template_string(MESSAGE_PAGE, message=FOREIGN_FORM), 403


FOREIGN_FORM = "This form was sent from another site. Open this Tally's own page and send it from there."
