"""Issue 29, findings 2 (first half) and 12 (sessions, login CSRF, shared links, look-alike emails):
tried as an attacker would, against the real dashboard server under waitress.

- A cookie copied before logging out, or held by a member removed since, signs nobody in: sessions
  are server-side rows (storage/sessions.py) that logout and removal end.
- A removed account brought back by a new invitation gets only that invitation's role.
- Another site's page cannot sign a browser in (login CSRF) nor post the invitation and shared-link
  password forms; a shared link opened in a signed-in browser does not sign it out.
- Addresses with invisible or look-alike characters are refused by the CLI, the API and the panel.
"""

from __future__ import annotations

import os
import uuid

import httpx
import pytest

from storage import shared_links, users
from storage.client import connect
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.dashboard_server import DashboardServer
from tests.security.conftest import (
    PASSWORD,
    Tenants,
    bearer,
    make_member,
    opened_share,
    signed_in,
)
from tests.security.conftest import browser as new_browser

pytestmark = pytest.mark.integration

EVIL = "https://evil.example"
# Each makes an address that looks like another: invisible and bidi characters, a BOM,
# a Cyrillic a (U+0430), a no-break space.
LOOK_ALIKES = [
    "ana\u200b@example.com",
    "ana\u200c@example.com",
    "ana\u200d@example.com",
    "ana\u2060@example.com",
    "\ufeffana@example.com",
    "ana\u202e@example.com",
    "ana@exam\u200fple.com",
    "\u0430na@example.com",
    "ana\u00a0x@example.com",
]


def browser_of(server: DashboardServer, email: str = "", password: str | None = None) -> httpx.Client:
    """A browser signed in through the real /login form, carrying its cookie as a browser would."""
    return signed_in(server, email, password)


def stranger(server: DashboardServer) -> httpx.Client:
    return new_browser(server)


def fresh_email(role: str) -> str:
    return f"{role}-{uuid.uuid4().hex[:8]}@example.com"


def cookie_of(browser: httpx.Client) -> str:
    values = {cookie.value for cookie in browser.cookies.jar if cookie.name == "tally_session"}
    assert len(values) == 1, f"signed in with session cookies {values}"
    return values.pop()


def no_session_cookie(browser: httpx.Client) -> bool:
    return all(cookie.name != "tally_session" or not cookie.value for cookie in browser.cookies.jar)


def replayed(server: DashboardServer, cookie: str) -> httpx.Client:
    """Another client carrying a copy of the cookie, as someone who copied it would."""
    return httpx.Client(base_url=server.url, timeout=30, cookies={"tally_session": cookie})


def layout_status(browser: httpx.Client) -> int:
    return browser.get("/_dash-layout").status_code


# -- logout and removal are final ---------------------------------------------------------------


def test_operator_cookie_replayed_after_logout_is_refused(tenants: Tenants) -> None:
    operator = browser_of(tenants.server)
    cookie = cookie_of(operator)
    assert layout_status(replayed(tenants.server, cookie)) == 200
    assert operator.post("/logout", headers={"Origin": tenants.server.url}).status_code == 302
    assert layout_status(operator) == 401
    copy = replayed(tenants.server, cookie)
    assert layout_status(copy) == 401
    page = copy.get("/")
    assert page.status_code == 302 and page.headers["Location"].startswith("/login")


def test_member_cookie_replayed_after_logout_is_refused(tenants: Tenants) -> None:
    member = browser_of(tenants.server, tenants.viewer_a.email, PASSWORD)
    cookie = cookie_of(member)
    member.post("/logout", headers={"Origin": tenants.server.url})
    assert layout_status(replayed(tenants.server, cookie)) == 401


def test_member_removed_from_one_site_is_refused_at_once_in_their_open_browser(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    # A viewer of A who is also viewer of B: before, removal from A left the session open (on B).
    member = make_member(dashboard_settings, fresh_email("two-sites"), tenants.site_a, "viewer")
    users.set_role(connect(dashboard_settings), member.email, tenants.site_b, "viewer")
    browser = browser_of(tenants.server, member.email, PASSWORD)
    cookie = cookie_of(browser)
    assert layout_status(browser) == 200

    removed = httpx.delete(
        f"{tenants.server.url}/api/v1/members",
        params={"site": tenants.site_a, "email": member.email},
        headers=bearer(tenants.owner_a.manage_key),
    )
    assert removed.status_code == 200, removed.text
    assert layout_status(browser) == 401
    assert layout_status(replayed(tenants.server, cookie)) == 401
    # Signing in again gives what is left: site B.
    assert layout_status(browser_of(tenants.server, member.email, PASSWORD)) == 200


def test_removed_account_cookie_stays_dead_after_the_address_is_invited_again(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    member = make_member(dashboard_settings, fresh_email("returning"), tenants.site_a, "viewer")
    cookie = cookie_of(browser_of(tenants.server, member.email, PASSWORD))
    users.remove_user(connect(dashboard_settings), member.email)
    make_member(dashboard_settings, member.email, tenants.site_a, "viewer")  # the address is back
    assert layout_status(replayed(tenants.server, cookie)) == 401


def test_removed_account_invited_again_gets_only_the_new_role(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    email = fresh_email("removed")
    make_member(dashboard_settings, email, tenants.site_a, "owner")
    client = connect(dashboard_settings)
    users.set_role(client, email, tenants.site_b, "admin")

    done = run_tally(os.environ | dashboard_settings.environment(), "users", "remove", email)
    assert done.returncode == 0, done.stderr
    # Invited again (whoever invites: the old role rows are what came back before) and accepted.
    invited = httpx.post(
        f"{tenants.server.url}/api/v1/invites",
        params={"site": tenants.site_a},
        json={"email": email, "role": "viewer"},
        headers=bearer(tenants.operator_key),
    )
    assert invited.status_code == 201, invited.text
    link = invited.json()["link"]
    path = link[link.index("/invite/") :]
    with httpx.Client(base_url=tenants.server.url, timeout=30) as browser:
        accepted = browser.post(path, data={"password": PASSWORD, "confirm": PASSWORD})
        assert accepted.status_code == 302, accepted.text[:300]

    user = users.get_user(client, email)
    assert user is not None and user.roles == {tenants.site_a: "viewer"}
    members_of_b = httpx.get(
        f"{tenants.server.url}/api/v1/members",
        params={"site": tenants.site_b},
        headers=bearer(tenants.operator_key),
    )
    assert email not in members_of_b.text


# -- forms only from this server's own pages ----------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": EVIL},
        {"Origin": "null"},
        {"Referer": f"{EVIL}/login-for-you"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
    ],
    ids=["origin", "null-origin", "referer", "fetch-cross-site", "fetch-same-site"],
)
def test_cross_site_post_to_login_is_refused_and_signs_nobody_in(
    tenants: Tenants, headers: dict[str, str]
) -> None:
    browser = stranger(tenants.server)
    answer = browser.post("/login", data={"email": "", "password": tenants.server.password}, headers=headers)
    assert answer.status_code == 403
    assert no_session_cookie(browser)
    assert layout_status(browser) == 401
    member = browser.post(
        "/login", data={"email": tenants.viewer_a.email, "password": PASSWORD}, headers=headers
    )
    assert member.status_code == 403 and no_session_cookie(browser)


def test_sign_in_from_the_servers_own_page_still_works(tenants: Tenants) -> None:
    for headers in ({"Origin": tenants.server.url}, {"Referer": f"{tenants.server.url}/login"}, {}):
        browser = stranger(tenants.server)
        answer = browser.post("/login", data={"password": tenants.server.password}, headers=headers)
        assert answer.status_code == 302, headers
        assert layout_status(browser) == 200


def test_cross_site_post_to_an_invitation_is_refused_and_leaves_it_unused(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    client = connect(dashboard_settings)
    token = users.create_invite(client, fresh_email("csrf-invite"), tenants.site_a, "viewer")
    browser = stranger(tenants.server)
    answer = browser.post(
        f"/invite/{token}", data={"password": "attacker's password", "confirm": "attacker's password"},
        headers={"Origin": EVIL},
    )  # fmt: skip
    assert answer.status_code == 403
    assert users.find_invite(client, token) is not None
    assert no_session_cookie(browser)


def test_invitation_posted_from_its_own_no_referrer_page_is_accepted(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    # The invitation page is no-referrer, so a browser's post from it says `Origin: null`; its
    # `Sec-Fetch-Site: same-origin` is what shows it is this server's own page.
    email = fresh_email("own-page")
    token = users.create_invite(connect(dashboard_settings), email, tenants.site_a, "viewer")
    browser = stranger(tenants.server)
    answer = browser.post(
        f"/invite/{token}", data={"password": PASSWORD, "confirm": PASSWORD},
        headers={"Origin": "null", "Sec-Fetch-Site": "same-origin"},
    )  # fmt: skip
    assert answer.status_code == 302, answer.text[:300]
    assert layout_status(browser) == 200


def test_cross_site_post_to_a_shared_links_password_form_is_refused(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    link = shared_links.create_link(
        connect(dashboard_settings), tenants.site_a, label="with password", password="link password"
    )
    browser = stranger(tenants.server)
    answer = browser.post(link.path(), data={"password": "link password"}, headers={"Origin": EVIL})
    assert answer.status_code == 403 and no_session_cookie(browser)
    same_site = browser.post(
        link.path(), data={"password": "link password"}, headers={"Origin": tenants.server.url}
    )
    assert same_site.status_code == 200


def test_cross_site_logout_leaves_the_operator_signed_in(tenants: Tenants) -> None:
    operator = browser_of(tenants.server)
    assert operator.post("/logout", headers={"Origin": EVIL}).status_code == 403
    assert layout_status(operator) == 200


# -- a shared link does not sign a browser out --------------------------------------------------


def test_share_link_opened_in_the_operators_browser_keeps_the_operator_signed_in(tenants: Tenants) -> None:
    operator = browser_of(tenants.server)
    page = operator.get(tenants.share_a.path())
    assert page.status_code == 200
    assert "signed in" in page.text and tenants.site_a in page.text
    layout = operator.get("/_dash-layout")
    assert layout.status_code == 200
    # The operator's page, not the shared one: it has the log-out form and the rate-limiting panel.
    assert '"logout"' in layout.text and '"rate-limits"' in layout.text
    assert "shared-banner" not in layout.text


def test_share_link_opened_in_a_members_browser_keeps_the_member_signed_in(tenants: Tenants) -> None:
    member = browser_of(tenants.server, tenants.admin_b.email, PASSWORD)
    assert member.get(tenants.share_a.path()).status_code == 200
    layout = member.get("/_dash-layout")
    assert layout.status_code == 200 and '"logout"' in layout.text and "shared-banner" not in layout.text


def test_shared_link_visitor_still_gets_the_shared_view(tenants: Tenants) -> None:
    visitor = opened_share(tenants.server, tenants.share_a)
    layout = visitor.get("/_dash-layout")
    assert layout.status_code == 200 and "shared-banner" in layout.text


# -- look-alike addresses -----------------------------------------------------------------------


@pytest.mark.parametrize("email", LOOK_ALIKES)
def test_look_alike_email_is_refused_naming_the_field(email: str) -> None:
    with pytest.raises(users.AccountError, match=r"^email: "):
        users.clean_email(email)


def test_full_width_email_is_the_address_it_looks_like() -> None:
    assert users.clean_email("\uff41na@example.com") == "ana@example.com"


def test_look_alike_email_is_refused_by_the_cli(tenants: Tenants, dashboard_settings: Settings) -> None:
    done = run_tally(
        os.environ | dashboard_settings.environment(),
        "users", "invite", "ana\u200b@example.com", "--site", tenants.site_a, "--role", "viewer",
    )  # fmt: skip
    assert done.returncode != 0
    assert "email:" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "/invite/" not in done.stdout


def test_look_alike_email_is_refused_by_the_api(tenants: Tenants) -> None:
    for key in (tenants.owner_a.manage_key, tenants.operator_key):
        answer = httpx.post(
            f"{tenants.server.url}/api/v1/invites",
            params={"site": tenants.site_a},
            json={"email": "ana\u2060@example.com", "role": "viewer"},
            headers=bearer(key),
        )
        assert answer.status_code == 400
        assert answer.json()["error"].startswith("email: ")


def test_look_alike_email_is_refused_by_the_team_panel(tenants: Tenants) -> None:
    owner = browser_of(tenants.server, tenants.owner_a.email, PASSWORD)
    # The invite callback also bumps the panel's version (its waiting invitations list).
    output = next(
        dependency["output"]
        for dependency in owner.get("/_dash-dependencies").json()
        if dependency["output"].startswith("..invite-created.children...")
    )
    answer = owner.post(
        "/_dash-update-component",
        json={
            "output": output,
            "outputs": [
                {"id": "invite-created", "property": "children"},
                {"id": "team-version", "property": "data"},
            ],
            "inputs": [{"id": "invite-create", "property": "n_clicks", "value": 1}],
            "state": [
                {"id": "site", "property": "value", "value": tenants.site_a},
                {"id": "invite-email", "property": "value", "value": "\ufeffana@example.com"},
                {"id": "invite-role", "property": "value", "value": "viewer"},
                {"id": "team-version", "property": "data", "value": 0},
            ],
            "changedPropIds": ["invite-create.n_clicks"],
        },
        headers={"Origin": tenants.server.url},
    )
    assert answer.status_code == 200
    assert "email: " in answer.text and "/invite/" not in answer.text
