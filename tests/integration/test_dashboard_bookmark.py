"""A bookmarkable site (dashboard/bookmark.py): `/?site=S` opens the dashboard on S if, and only
if, the one signed in may read S; anything else in `?site=` is ignored and the page opens as
without it, never with another site's name or numbers. Through the real dashboard server
(`python -m dashboard.app` under waitress) over HTTP, as a browser asks: the page, then its
layout, which the browser fetches naming the page in `Referer` (the server's
`Referrer-Policy: same-origin` keeps the query there), then the Overview's callbacks.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import httpx
import pytest

from storage import users
from storage.client import connect
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.dashboard_server import DashboardServer, browser, signed_in
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

PASSWORD = "a long bookmark password"
CALLBACK_PATH = "/_dash-update-component"


@dataclass(frozen=True)
class Sites:
    a: str  # the member's, the busiest of the three
    b: str  # not the member's
    c: str  # the member's too, the quietest
    member: str  # a viewer of A and C


@pytest.fixture(scope="module")
def sites(dashboard_settings: Settings) -> Sites:
    tag = uuid.uuid4().hex[:8]
    a, b, c = (f"{name}-{tag}.bookmark.example" for name in ("a", "b", "c"))
    now = datetime.now(UTC) - timedelta(minutes=1)
    events = [
        page_view(site, f"{site}-v{n}", now)
        for site, visitors in ((a, 5), (b, 3), (c, 1))
        for n in range(visitors)
    ]
    client = connect(dashboard_settings)
    rows, columns = archive_rows(events)
    client.insert("events", rows, column_names=columns)
    member = f"bookmark-{tag}@example.com"
    for site in (a, b, c):
        add_site(client, site)
    for site in (a, c):
        token = users.create_invite(client, member, site, "viewer")
        invite = users.find_invite(client, token)
        assert invite is not None
        users.accept_invite(client, token, invite, PASSWORD)
    return Sites(a, b, c, member)


@pytest.fixture(scope="module")
def member(dashboard_server: DashboardServer, sites: Sites) -> Iterator[httpx.Client]:
    client = signed_in(dashboard_server, sites.member, PASSWORD)
    yield client
    client.close()


@pytest.fixture(scope="module")
def operator(dashboard_server: DashboardServer) -> Iterator[httpx.Client]:
    client = signed_in(dashboard_server)
    yield client
    client.close()


def open_page(client: httpx.Client, server: DashboardServer, query: str) -> tuple[dict, str]:
    """The page at `/?query` as a browser opens it: the page, then its layout; the site picker's
    props and the layout's whole text."""
    page = client.get(f"/?{query}")
    assert page.status_code == 200, page.status_code
    layout = client.get("/_dash-layout", headers={"Referer": f"{server.url}/?{query}"})
    assert layout.status_code == 200, layout.status_code
    return picker(layout.json()), page.text + layout.text


def picker(node: object) -> dict:
    found = list(components_with_id(node, "site"))
    assert len(found) == 1
    return found[0]


def components_with_id(node: object, component_id: str) -> Iterator[dict]:
    if isinstance(node, list):
        for item in node:
            yield from components_with_id(item, component_id)
    elif isinstance(node, dict) and "props" in node:
        if node["props"].get("id") == component_id:
            yield node["props"]
        for value in node["props"].values():
            yield from components_with_id(value, component_id)


def site_callbacks(site: str) -> list[dict]:
    """What the page asks first for the site in its picker: the picker's refresh (the clock's tick)
    and the live visitors."""
    return [
        {
            "output": "..site.options...site.value..",
            "outputs": [{"id": "site", "property": "options"}, {"id": "site", "property": "value"}],
            "inputs": [{"id": "clock", "property": "n_intervals", "value": 1}],
            "state": [{"id": "site", "property": "value", "value": site}],
            "changedPropIds": ["clock.n_intervals"],
        },
        {
            "output": "live-visitors.children",
            "outputs": {"id": "live-visitors", "property": "children"},
            "inputs": [
                {"id": "site", "property": "value", "value": site},
                {"id": "refresh", "property": "n_intervals", "value": None},
            ],
            "state": [],
            "changedPropIds": [],
        },
    ]


def live_visitors(client: httpx.Client, site: str) -> str:
    answer = client.post(CALLBACK_PATH, json=site_callbacks(site)[1])
    assert answer.status_code == 200, (answer.status_code, answer.text[:300])
    return answer.json()["response"]["live-visitors"]["children"]


def test_a_member_opening_another_sites_link_gets_their_own_site_and_nothing_of_the_other(
    dashboard_server: DashboardServer, sites: Sites
) -> None:
    client = browser(dashboard_server)
    # Not signed in: the sign-in keeps the address, `?site=` and all, and sends the browser back.
    answer = client.get(f"/?site={sites.b}")
    assert answer.status_code == 302
    login = answer.headers["Location"]
    assert login == f"/login?next={quote(f'/?site={sites.b}', safe='/')}"
    answer = client.post(
        login, data={"email": sites.member, "password": PASSWORD}, headers={"Origin": dashboard_server.url}
    )
    assert answer.status_code == 302 and answer.headers["Location"] == f"/?site={sites.b}"

    shown, text = open_page(client, dashboard_server, f"site={sites.b}")
    assert shown["options"] == [sites.a, sites.c] and shown["value"] == sites.a
    assert sites.b not in text
    for body in site_callbacks(shown["value"]):
        answer = client.post(CALLBACK_PATH, json=body)
        assert answer.status_code == 200, (answer.status_code, answer.text[:300])
        assert sites.b not in answer.text
    assert live_visitors(client, sites.a) == "5"  # A's numbers
    client.close()


def test_a_member_opening_a_link_to_one_of_their_sites_gets_that_site(
    dashboard_server: DashboardServer, sites: Sites, member: httpx.Client
) -> None:
    shown, text = open_page(member, dashboard_server, f"site={sites.c}")
    assert shown["value"] == sites.c and sites.b not in text
    assert live_visitors(member, sites.c) == "1"  # C's one visitor


def test_the_operator_opens_any_site_by_its_link(
    dashboard_server: DashboardServer, sites: Sites, operator: httpx.Client
) -> None:
    for site in (sites.a, sites.b, sites.c):
        shown, _ = open_page(operator, dashboard_server, f"site={quote(site)}")
        assert shown["value"] == site


@pytest.mark.parametrize(
    "query",
    [
        "site=unknown.bookmark.example",
        "site=..%2F..%2Fx",
        "site=../../x",
        "site=" + "x" * 10_000,
        "site=",
        "site",
        "site=%00",
        "site=%E2%80%AE",
        "SITE=whatever",
        "{two}",  # two `site` parameters, both readable: neither is taken
    ],
)
def test_junk_in_the_link_opens_the_dashboard_as_without_it(
    dashboard_server: DashboardServer, sites: Sites, member: httpx.Client, query: str
) -> None:
    query = query.replace("{two}", f"site={sites.c}&site={sites.c}")
    plain, _ = open_page(member, dashboard_server, "")
    shown, text = open_page(member, dashboard_server, query)
    assert shown == plain and shown["value"] == sites.a
    assert sites.b not in text


def test_the_layout_takes_the_site_only_from_a_page_of_this_server(
    dashboard_server: DashboardServer, sites: Sites, operator: httpx.Client
) -> None:
    plain = picker(operator.get("/_dash-layout").json())
    for referrer in (
        f"https://other.example/?site={sites.c}",
        f"{dashboard_server.url}/share/token?site={sites.c}",
        f"http://[::1/?site={sites.c}",  # not a URL
    ):
        shown = picker(operator.get("/_dash-layout", headers={"Referer": referrer}).json())
        assert shown == plain, referrer


def test_a_request_naming_the_pages_own_callback_is_refused_not_a_500(
    dashboard_server: DashboardServer, operator: httpx.Client
) -> None:
    dependencies = operator.get("/_dash-dependencies").json()
    own = next(d["output"] for d in dependencies if d["output"].startswith("..url.search...site.value"))
    answer = operator.post(
        CALLBACK_PATH,
        json={
            "output": own,
            "outputs": [{"id": "url", "property": "search"}, {"id": "site", "property": "value"}],
            "inputs": [
                {"id": "url", "property": "search", "value": ""},
                {"id": "site", "property": "value", "value": None},
            ],
            "state": [
                {"id": "site", "property": "options", "value": []},
                {"id": "url", "property": "pathname", "value": "/"},
            ],
            "changedPropIds": [],
        },
    )
    assert answer.status_code == 400 and "page runs itself" in answer.text


def clock_tick(client: httpx.Client, shown: str | None) -> dict | int:
    answer = client.post(CALLBACK_PATH, json=site_callbacks(shown)[0])  # type: ignore[arg-type]
    return answer.json()["response"]["site"] if answer.status_code == 200 else answer.status_code


def test_the_clocks_tick_leaves_the_site_shown_alone_so_the_filters_in_force_stay(
    sites: Sites, member: httpx.Client
) -> None:
    """Setting the picker's value fires every callback reading it, and a new site clears the
    filters: the minute's refresh of the list names a value only when the shown one must go."""
    assert clock_tick(member, sites.c) == {"options": [sites.a, sites.c]}
    assert clock_tick(member, sites.b) == 403  # a site not theirs is refused, not replaced
    assert clock_tick(member, None) == {"options": [sites.a, sites.c], "value": sites.a}
