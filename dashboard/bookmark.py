"""A bookmarkable site: `/?site=example.com` (any dashboard page's `?site=`) opens the dashboard
with that site in the header's picker, if this viewer may read it; choosing a site in the picker
writes it back into the address bar (no reload), so the address is the bookmark.

The page's layout comes from `/_dash-layout`, which Dash's renderer fetches without the page's
query string; the browser names the page in the fetch's `Referer` (the server's
`Referrer-Policy: same-origin` keeps the full address for its own requests), so the layout
chooses the site there, and the Overview's callbacks start with it rather than with the busiest
site and then again. In the page, a callback that runs in the browser keeps the picker and the
address bar in step: back and forward move between the sites picked, and where no `Referer` came
(a browser told to send none) it chooses the site once the page is there.

Either way only a site of the picker's options is ever chosen: those the server listed for this
viewer (dashboard/overview.py, `site_choice`). Another site, an unknown one, or junk (two `site`
parameters, an overlong value) is ignored: the page opens as without it. Shared links
(/share/…) are left alone.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from dash import ClientsideFunction, Dash, Input, Output, State, dcc
from flask import has_request_context, request

PARAMETER = "site"
LOCATION_ID = "url"
# A domain name is at most 253 characters; a longer value names no site.
MAX_SITE_CHARS = 253
SHARE_PREFIX = "/share/"


def location() -> dcc.Location:
    """The address bar, for the picker: `refresh=False`, so writing its query adds a history entry
    and reloads nothing."""
    return dcc.Location(id=LOCATION_ID, refresh=False)


def named_site(query: str) -> str | None:
    """The site a query string names: its one `site` parameter, or None (none, several, too long)."""
    try:
        values = parse_qs(query, keep_blank_values=True, max_num_fields=100).get(PARAMETER, [])
    except ValueError:  # more fields than max_num_fields
        return None
    if len(values) != 1 or not 0 < len(values[0]) <= MAX_SITE_CHARS:
        return None
    return values[0]


def requested_site() -> str | None:
    """The site the page being laid out names in its address (the layout request's `Referer`, a
    page of this server's, not a shared link's), or None. Only a wish: the caller chooses it only
    if the viewer may read it."""
    if not has_request_context():
        return None
    referrer = request.headers.get("Referer", "")
    try:
        page = urlsplit(referrer)
    except ValueError:  # an invalid IPv6 literal in the host, say
        return None
    if page.netloc.lower() != request.host.lower() or page.path.startswith(SHARE_PREFIX):
        return None
    return named_site(page.query)


def register_bookmark(app: Dash) -> None:
    """The picker and the address bar in step, in the browser (assets/bookmark.js)."""
    app.clientside_callback(
        ClientsideFunction(namespace="tally", function_name="siteInAddress"),
        Output(LOCATION_ID, "search"),
        # The picker's value is also the site list's (dashboard/overview.py): this one only moves
        # it to another of its options.
        Output("site", "value", allow_duplicate=True),
        Input(LOCATION_ID, "search"),
        Input("site", "value"),
        State("site", "options"),
        State(LOCATION_ID, "pathname"),
        # Runs as the page starts too (the address may name a site the layout could not see).
        prevent_initial_call="initial_duplicate",
    )
